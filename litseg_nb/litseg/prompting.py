"""LitSeg's conversations from the verbatim Appendix E.1 templates, and the JSON schemas of its replies.

The soft length reference replaces the number of the prompt's "recommended maximum length" sentence;
the no-length-constraint variant (calibration) removes its three length sentences, failing loudly otherwise."""
from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Mapping, Union

from ..errors import UsageError
from ..core.paths import TEMPLATES_DIR
from ..core.prompts import PromptError, fill_prompt, load_prompt

LENGTH_SENTENCE = "The recommended maximum length for any single segment is {n} sentences."
PAPER_LENGTH_REFERENCE = 100
LENGTH_SENTENCES = (
    "The recommended maximum length for any single segment is 100 sentences. "
    "This is a guidance threshold rather than an absolute hard cap. "
    "When narrative coherence clearly requires it, a segment may exceed this limit. "
)
STAGES = ("stage1", "stage2", "stage3")


REPLY_FORMAT_MARKER = "Return STRICT JSON only (no markdown): "  # the templates' reply formats follow it


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [s for v in items for s in _strings(v)]


def normalize_words(text: str) -> str:
    """``text`` lower-cased, every run of non-alphanumeric characters one space (what an echo check compares)."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.casefold()).split())


@functools.lru_cache(maxsize=None)
def reply_placeholders() -> tuple[str, ...]:
    """The placeholder strings of every reply format a template spells out after :data:`REPLY_FORMAT_MARKER`
    (``"The subtitle of the plot block"`` ...), normalised (:func:`normalize_words`); read from the verbatim
    template files, a format that is not JSON is a :class:`PromptError`."""
    found: set[str] = set()
    for path in sorted(TEMPLATES_DIR.rglob("*.txt")):
        if REPLY_FORMAT_MARKER not in path.read_text(encoding="utf-8"):
            continue
        text = load_prompt(str(path.relative_to(TEMPLATES_DIR)))
        for part in text.split(REPLY_FORMAT_MARKER)[1:]:
            try:
                spec, _ = json.JSONDecoder().raw_decode(part)
            except json.JSONDecodeError as e:
                raise PromptError(f"prompt template {path}: the reply format after {REPLY_FORMAT_MARKER!r} is not "
                                  f"JSON ({e})") from e
            found.update(w for w in map(normalize_words, _strings(spec)) if w)
    return tuple(sorted(found))


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise PromptError(f"expected exactly one occurrence of {old[:70]!r} in the LitSeg system prompt, "
                          f"found {text.count(old)}")
    return text.replace(old, new)


def with_length_reference(text: str, length_reference: int | None) -> str:
    """``text`` (a prompt carrying the paper's length sentence) with the recommended maximum set to
    ``length_reference``; ``None`` removes the three length sentences."""
    if length_reference is None:
        return _replace_once(text, LENGTH_SENTENCES, "")
    n = int(length_reference)
    if n < 1:
        raise ValueError(f"length_reference must be >= 1 (or None), got {length_reference}")
    return _replace_once(text, LENGTH_SENTENCE.format(n=PAPER_LENGTH_REFERENCE), LENGTH_SENTENCE.format(n=n))


#: one value for every unit, the per-dataset calibration (dataset -> value), or ``None`` (no length constraint)
LengthReference = Union[int, Mapping[str, int], None]


class CalibrationMissing(UsageError, ValueError):
    """A unit whose dataset has no calibrated length reference (names the unit and the dataset)."""


def reference_for(length_reference: LengthReference, book: Any, unit: Any = None) -> int | None:
    """The length reference of ``unit``: the one value, or its book's dataset's; a dataset the mapping lacks
    is a :class:`CalibrationMissing` naming the unit (never a silent fallback)."""
    if length_reference is None or not isinstance(length_reference, Mapping):
        return None if length_reference is None else int(length_reference)
    ds = getattr(book, "dataset", "")
    if ds not in length_reference:
        where = f"{book.book_id}/{unit.unit_id}" if unit is not None else f"book {book.book_id}"
        raise CalibrationMissing(f"unit {where}: dataset {ds!r} has no calibrated length reference (calibrated: "
                         f"{sorted(length_reference) or 'none'}); calibrate it (notebook 02: "
                         "litseg.segmenter.calibrate_length_reference) or give one value for every unit")
    return int(length_reference[ds])


def system_prompt(length_reference: int | None = PAPER_LENGTH_REFERENCE) -> str:
    """The unified system prompt; ``None`` gives the no-length-constraint variant (calibration)."""
    return with_length_reference(load_prompt("litseg/system"), length_reference)


def stage_user_prompt(stage: str, chapter_content: str, n_sentences: int,
                      step_1_result: str = "", step_2_result: str = "") -> str:
    template = load_prompt(f"litseg/{stage}")
    if stage == "stage1":
        return fill_prompt(template, chapter_content=chapter_content)
    if stage == "stage2":
        return fill_prompt(template, chapter_content=chapter_content, step_1_result=step_1_result)
    if stage == "stage3":
        return fill_prompt(template, chapter_content=chapter_content, step_1_result=step_1_result,
                           step_2_result=step_2_result, last_index=n_sentences)
    raise ValueError(f"unknown LitSeg stage {stage!r}; expected one of {STAGES}")


# JSON schemas for constrained decoding (ours, not the paper's): sized so a complete reply fits the token
# budget, indices bounded to ``1..n``; order and coverage stay the validator's and the fallbacks' to repair.
SCHEMA_VERSION = 2  # part of the annotation key of constrained runs
_CHARS_PER_TOKEN = 2.5  # conservative for English text inside JSON strings
_SEGMENT_TOKENS = 48  # one segment object with a 40-character subtitle and a short context list (measured)
_TURNING_POINT_TOKENS = 50


def _text_schema(key: str, max_new_tokens: int) -> dict[str, Any]:
    text = {"type": "string", "maxLength": max(16, int((max_new_tokens - 12) * _CHARS_PER_TOKEN))}
    return {"type": "object", "properties": {key: text}, "required": [key], "additionalProperties": False}


def segment_floor(n_sentences: int, length_reference: int | None, min_segments: int) -> int:
    """The fewest segments stage 3 may decode (a small-model accommodation, not the paper's): 0 when
    ``min_segments`` is 0, else ``max(min_segments, ceil(n / length_reference))`` capped at ``n``."""
    if min_segments < 0:
        raise ValueError(f"min_segments must be >= 0, got {min_segments}")
    if not min_segments:
        return 0
    n = int(n_sentences)
    by_length = math.ceil(n / int(length_reference)) if length_reference else 1
    return max(1, min(n, max(int(min_segments), by_length)))


def segment_budget(max_new_tokens: int) -> tuple[int, int]:
    """How many turning points and segments a complete stage-3 reply of ``max_new_tokens`` holds."""
    budget = max_new_tokens - 30  # braces, keys and the chapter title
    n_tp = max(1, min(6, budget // (4 * _TURNING_POINT_TOKENS)))
    n_seg = max(1, min(32, (budget - n_tp * _TURNING_POINT_TOKENS) // _SEGMENT_TOKENS))
    return n_tp, n_seg


def segmentation_schema(max_new_tokens: int, n_sentences: int | None = None, min_segments: int = 0) -> dict[str, Any]:
    """The stage-3 object sized to ``max_new_tokens``, indices bounded by ``n_sentences`` when given.

    ``min_segments`` >= 2 (a :func:`segment_floor`) requires that many segments, kept apart: the first
    starts at 1 and leaves room for the others, every later one starts at 2 or later."""
    n_tp, n_seg = segment_budget(max_new_tokens)
    index: dict[str, Any] = {"type": "integer", "minimum": 1}
    floor = int(min_segments)
    if floor and n_sentences is None:
        raise ValueError("min_segments needs n_sentences (the floor is per unit)")
    if n_sentences is not None:
        n = int(n_sentences)
        if n < 1:
            raise ValueError(f"a unit needs at least one sentence, got n_sentences={n_sentences}")
        index["maximum"] = n
        n_seg = min(n_seg, n)
        floor = min(floor, n_seg)
    short = {"type": "string", "maxLength": 40}

    def segment(from_idx: dict[str, Any], to_idx: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object",
                "properties": {"subtitle": short, "from_idx": from_idx, "to_idx": to_idx,
                               "context_idx": {"type": "array", "maxItems": 3, "items": index}},
                "required": ["subtitle", "from_idx", "to_idx", "context_idx"],
                "additionalProperties": False}

    segments: dict[str, Any] = {"type": "array", "minItems": 1, "maxItems": n_seg, "items": segment(index, index)}
    if floor >= 2:
        segments = {"type": "array", "minItems": floor, "maxItems": n_seg,
                    "prefixItems": [segment({"type": "integer", "minimum": 1, "maximum": 1},
                                            {**index, "maximum": n - floor + 1})],
                    "items": segment({**index, "minimum": 2}, index)}
    return {
        "type": "object",
        "properties": {
            "chapter_title": short,
            "step_3_turning_points": {
                "type": "array", "maxItems": n_tp,
                "items": {"type": "object",
                          "properties": {"type": {"type": "string", "maxLength": 30},
                                         "description": {"type": "string", "maxLength": 80}},
                          "required": ["type", "description"], "additionalProperties": False},
            },
            "segments": segments,
        },
        "required": ["chapter_title", "step_3_turning_points", "segments"],
        "additionalProperties": False,
    }


def stage_json_schema(stage: str, max_new_tokens: int, n_sentences: int | None = None,
                      min_segments: int = 0) -> dict[str, Any]:
    """The JSON schema of ``stage`` sized so that a complete reply fits ``max_new_tokens``."""
    if stage in ("stage1", "stage2"):
        return _text_schema("step_1_events" if stage == "stage1" else "step_2_threads", max_new_tokens)
    if stage != "stage3":
        raise ValueError(f"unknown LitSeg stage {stage!r}; expected one of {STAGES}")
    return segmentation_schema(max_new_tokens, n_sentences, min_segments)


def single_pass_json_schema(max_new_tokens: int, n_sentences: int | None = None) -> dict[str, Any]:
    """The schema of LitSeg-Lite's single-pass E.2 reply: a sixth of the budget each for step 1 and 2, the
    rest for step 3."""
    part = max(24, max_new_tokens // 6)
    rest = max(64, max_new_tokens - 2 * part)
    return {
        "type": "object",
        "properties": {"step1": _text_schema("step_1_events", part),
                       "step2": _text_schema("step_2_threads", part),
                       "step3": segmentation_schema(rest, n_sentences)},
        "required": ["step1", "step2", "step3"],
        "additionalProperties": False,
    }
