"""The Appendix E.3 rubric judge (notebook 06's judge, LitSeg-Lite's narratological reward).

Chunks are scored on Event Validity, Unity of Action and Cut Point Logic; replies are read leniently, an
unreadable one after bounded retries gets the neutral score 3.0 (flagged); a backend error propagates."""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..llm.base import BackendUnavailableError, LLMBackend, SamplingParams, UsageTag
from ..llm.replies import json_candidates, read_int, read_reply
from ..errors import LitsegError
from .prompting import with_length_reference
from .validate import short_repr
from ..core.prompts import load_prompt, fill_prompt

DIMENSIONS = ("event_validity", "unity_of_action", "cut_point_logic")
DIMENSION_KEYS = ("dimension1", "dimension2", "dimension3")
NEUTRAL_SCORE = 3.0
# dims 1-2: 1..5 (the rubric's own example uses half points); dim 3: 1..5 +/- the 0.5 overlap rule
SCORE_RANGES = ((1.0, 5.0), (1.0, 5.0), (0.5, 5.5))


class RubricParseError(LitsegError, ValueError):
    """The judge's reply could not be turned into valid per-chunk scores (message says why)."""


@dataclass
class RubricScores:
    """Per-chunk scores on the three E.3 dimensions for one segmentation (one unit)."""

    event_validity: list[float]
    unity_of_action: list[float]
    cut_point_logic: list[float]
    attempts: int = 1  # judge calls made
    neutral: bool = False  # True when every attempt failed and the neutral score was used
    errors: list[str] = field(default_factory=list)  # parse/LLM errors of failed attempts
    improper_overlap: list[bool] = field(default_factory=list)  # deterministic rubric-penalty check

    def per_chunk(self) -> list[float]:
        """Mean of the three dimensions for every chunk (the paper averages dimensions first)."""
        return [(a + b + c) / 3.0 for a, b, c in zip(self.event_validity, self.unity_of_action,
                                                     self.cut_point_logic)]

    @property
    def mean(self) -> float:
        """Average over dimensions, then over chunks (the narratological reward of Section 3.2)."""
        pc = self.per_chunk()
        return sum(pc) / len(pc) if pc else float("nan")

    def dimension_means(self) -> dict[str, float]:
        return {name: sum(v) / len(v) if v else float("nan") for name in DIMENSIONS for v in [getattr(self, name)]}


# --------------------------------------------------------------------------- parsing
# fallback for broken JSON: "dimension1": [numbers] pairs (possessive quantifiers keep it linear)
_KEY_RE = re.compile(r"""(?:dimension|dim|d)[\s_-]*+([123])\s*+["']?\s*+:\s*+\[([^\[\]]*+)\]""", re.I)
_NUM_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)
_KEY_NORM = re.compile(r"(?:dimension|dim|d)[\s_-]*+([123])", re.I)
_MAX_SCORE_MAGNITUDE = 1e6  # anything larger is out of every range; avoids int->float overflow


def _norm_key(key: Any) -> str | None:
    k = str(key).strip()
    if len(k) > 200:
        return None
    m = _KEY_NORM.fullmatch(k)
    if m:
        return f"dimension{m.group(1)}"
    low = k.lower()
    if "validity" in low:
        return "dimension1"
    if "unity" in low or "phase" in low:
        return "dimension2"
    if "cut" in low:
        return "dimension3"
    return None


def _to_float(v: Any) -> float:
    for _ in range(8):  # {"score": 4} style, a few levels at most
        inner = next((v[k] for k in ("score", "value") if k in v), None) if isinstance(v, dict) else None
        if inner is None:
            break
        v = inner
    if isinstance(v, bool):
        raise RubricParseError(f"score {short_repr(v)} is not a number")
    if isinstance(v, int):
        if abs(v) > _MAX_SCORE_MAGNITUDE:
            raise RubricParseError(f"score {short_repr(v)} is out of range")
        return float(v)
    if isinstance(v, float):
        return v
    m = _NUM_RE.search(v[:200]) if isinstance(v, str) else None
    if m:  # at most 200 digits: float() reads them
        return float(m.group())
    raise RubricParseError(f"score {short_repr(v)} is not a number")


def _dims_of(obj: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            nk = _norm_key(k)
            if nk and isinstance(v, list) and nk not in found:
                found[nk] = v
    return found


def _candidate_dicts(answer: str) -> tuple[list[dict[str, list[Any]]], list[dict[str, list[Any]]]]:
    """Dimension dicts of the answer's JSON objects in text order, and the loose ``key: [numbers]`` reading."""
    by_start: dict[int, dict[str, list[Any]]] = {}
    for cand in json_candidates(answer, lenient=True):
        found = _dims_of(cand.value)
        if found and cand.start not in by_start:
            by_start[cand.start] = found
    cands = [by_start[k] for k in sorted(by_start)]
    loose: dict[str, list[Any]] = {}
    for m in _KEY_RE.finditer(answer):
        loose.setdefault(f"dimension{m.group(1)}", _NUM_RE.findall(m.group(2)))
    return cands, ([loose] if loose else [])


@functools.cache
def rubric_worked_example() -> tuple[tuple[float, ...], ...]:
    """The scores of the E.3 rubric's own output example (read from the template, cached)."""
    system = load_prompt("judge/e3_rubric_system")
    for cand in json_candidates(system[system.rfind("Example"):]):
        dims = _dims_of(cand.value)
        if all(k in dims for k in DIMENSION_KEYS):
            return tuple(tuple(float(x) for x in dims[k]) for k in DIMENSION_KEYS)
    return ()


def _scores_of(cand: dict[str, list[Any]], n_chunks: int) -> tuple[list[float], list[float], list[float]]:
    """One candidate's per-chunk scores, checked (count, numbers, ranges, not the worked example)."""
    missing = [k for k in DIMENSION_KEYS if k not in cand]
    if missing:
        raise RubricParseError(f"missing {', '.join(missing)}")
    dims = []
    for key, (lo, hi) in zip(DIMENSION_KEYS, SCORE_RANGES):
        if len(cand[key]) != n_chunks:
            raise RubricParseError(f"{key} has {len(cand[key])} scores for {n_chunks} chunks")
        vals = [_to_float(v) for v in cand[key]]
        bad = [v for v in vals if not lo <= v <= hi]
        if bad:
            raise RubricParseError(f"{key} scores {bad[:5]} outside [{lo}, {hi}]")
        dims.append(vals)
    example = rubric_worked_example()
    if example and tuple(tuple(v) for v in dims) == example:
        raise RubricParseError("scores repeat the rubric's worked example verbatim (not a judgement)")
    return dims[0], dims[1], dims[2]


def parse_rubric_reply(text: str, n_chunks: int, max_new_tokens: int | None = None
                       ) -> tuple[list[float], list[float], list[float]]:
    """Per-chunk scores ``(dimension1, dimension2, dimension3)`` of a judge reply; the last qualifying object
    wins, one repeating the rubric's worked example is skipped; else :class:`RubricParseError`."""
    if n_chunks <= 0:
        raise ValueError(f"n_chunks must be positive, got {n_chunks}")
    if not isinstance(text, str) or not text.strip():
        raise RubricParseError("empty judge reply")
    reply = read_reply(text, max_new_tokens=max_new_tokens)
    if reply.error:
        raise RubricParseError(reply.error)
    if not reply.answer.strip():
        raise RubricParseError("empty judge reply after its reasoning block")
    problems: list[str] = []
    for group in _candidate_dicts(reply.answer):  # the JSON objects, then (none qualified) the loose reading
        chosen = None
        for cand in group:
            try:
                chosen = _scores_of(cand, n_chunks)  # the last qualifying object wins
            except RubricParseError as e:
                problems.append(str(e))
        if chosen is not None:
            return chosen
    if not problems:
        problems.append("no JSON object with dimension scores found")
    raise RubricParseError("; ".join(list(dict.fromkeys(problems))[:10]))


# --------------------------------------------------------------------------- judge call
def improper_overlap_flags(segments: Sequence[dict[str, Any]]) -> list[bool]:
    """Per segment: does its ``context_idx`` hold a sentence of its own main range (the rubric's penalty)?"""
    flags = []
    for seg in segments:
        lo, hi = read_int(seg.get("from_idx")), read_int(seg.get("to_idx"))
        raw = seg.get("context_idx")
        ctx = [c for c in (read_int(i) for i in (raw if isinstance(raw, list) else [])) if c is not None]
        flags.append(lo is not None and hi is not None and any(lo <= i <= hi for i in ctx))
    return flags


def _segments_from_json(segment_pipeline_json: str) -> list[dict[str, Any]]:
    try:
        obj = json.loads(segment_pipeline_json)
    except (ValueError, TypeError, RecursionError):
        return []
    segs = obj.get("segments") if isinstance(obj, dict) else None
    return [s for s in segs if isinstance(s, dict)] if isinstance(segs, list) else []


def score_chunks_with_rubric(
    backend: LLMBackend,
    original_passage: str,
    segment_pipeline_prompt: str,
    segment_pipeline_json: str,
    n_chunks: int,
    retries: int = 2,
    max_new_tokens: int | None = None,
    tag: UsageTag = UsageTag(stage="rubric-judge"),
    seed: int = 0,
) -> RubricScores:
    """Score ``n_chunks`` chunks with the E.3 rubric; at most ``1 + retries`` judge calls (retries sampled at
    0.7, new seed), else the neutral score with ``neutral=True``."""
    if n_chunks <= 0:
        raise ValueError(f"n_chunks must be positive, got {n_chunks}")
    user = fill_prompt(load_prompt("judge/e3_rubric_user"), segment_pipeline_prompt=segment_pipeline_prompt,
                       original_passage=original_passage, segment_pipeline=segment_pipeline_json)
    conv = [{"role": "system", "content": load_prompt("judge/e3_rubric_system")}, {"role": "user", "content": user}]
    budget = max_new_tokens or (48 + 3 * 8 * n_chunks)
    flags = improper_overlap_flags(_segments_from_json(segment_pipeline_json))
    flags = flags if len(flags) == n_chunks else []
    errors: list[str] = []
    for attempt in range(retries + 1):
        params = SamplingParams(max_new_tokens=budget, temperature=0.0 if attempt == 0 else 0.7, seed=seed + attempt)
        try:
            reply = backend.chat([conv], params, tag)[0].text
        except BackendUnavailableError:
            raise  # a dead or failing server is no reply: it stops the run, never a neutral score
        except Exception as e:  # noqa: BLE001 - a refused request
            errors.append(f"attempt {attempt}: {type(e).__name__}: {e}")
            continue
        try:
            d1, d2, d3 = parse_rubric_reply(reply, n_chunks, max_new_tokens=budget)
        except RubricParseError as e:
            errors.append(f"attempt {attempt}: {e}")
            continue
        return RubricScores(d1, d2, d3, attempts=attempt + 1, errors=errors, improper_overlap=flags)
    neutral = [NEUTRAL_SCORE] * n_chunks
    return RubricScores(list(neutral), list(neutral), list(neutral), attempts=retries + 1, neutral=True,
                        errors=errors, improper_overlap=flags)


# --------------------------------------------------------------------------- the E.3 judge's inputs
# the "Segment Pipeline Prompt": the method's prompt templates, or a rule-based chunker's algorithm
RULE_BASED_PIPELINES = {
    "token": "Rule-based, no prompt: fixed token windows with overlap (token splitter, App. H).",
    "recursive": "Rule-based, no prompt: recursive character splitter (paragraph, newline, sentence, word "
                 "separators) to a target length with overlap (App. H).",
    "semantic": "Embedding-based, no prompt: LangChain-style SemanticChunker; a boundary where the cosine "
                "distance of adjacent sentence-group embeddings exceeds a percentile threshold (App. H).",
    "paragraph": "Rule-based, no prompt: one chunk per paragraph of the source text.",
    "boundary-model": "Trained, no prompt: a logistic regression over lexical-cohesion and paragraph features, "
                      "trained on the authors' chapter and scene breaks of other books, scores every paragraph "
                      "start; boundaries at the top-scored ones under a length target.",
    "perplexity": "LLM-based, no prompt: Meta-Chunking's perplexity chunker; boundaries at local minima of "
                  "the sentence-level perplexity curve (App. H).",
}
PIPELINE_TEMPLATES = {
    "litseg": ("litseg/system", "litseg/stage1", "litseg/stage2", "litseg/stage3"),
    "litseg-lite": ("lite/system",), "lite": ("lite/system",), "wo-grpo": ("lite/system",), "wo-ft": ("lite/system",),
    "wo-theo-s1": ("ablation/wo_theo_s1",), "wo-theo-s2": ("ablation/wo_theo_s2",),
    "wo-theo-s3": ("ablation/wo_theo_s3",), "wo-theory": ("ablation/wo_theory",),
    "lumber": ("baselines/lumberchunker",), "margin": ("baselines/margin_sampling",),
    "proposition": ("baselines/proposition",),
}
PIPELINE_STEPS = {
    "merge": "then dynamic merge: adjacent chunks merged up to a target length (App. H).",
    "completion": "then Meta-Chunking's semantic completion (the package's completion prompts, our own).",
}


def _carries_length_sentence(template: str) -> bool:
    return template.endswith("system") or template.startswith("ablation/")


def uses_length_reference(method: str, detail: str = "full") -> bool:
    base = method.split("@")[0].split("+")[0]
    return detail == "full" and any(_carries_length_sentence(t) for t in PIPELINE_TEMPLATES.get(base, ()))


def segment_pipeline_prompt(method: str, length_reference: int | None = None, detail: str = "full",
                            last_index: int | None = None) -> str:
    """The E.3 ``{segment_pipeline_prompt}`` for ``method`` (e.g. ``lumber+merge``): the verbatim templates or
    the algorithm of a rule-based chunker, then each ``+step``; ``detail="name"``: one line."""
    base, *steps = method.split("@")[0].split("+")
    if detail == "name":
        return f"Chunker {method!r} (prompt not shown: judge context too short)"
    if detail != "full":
        raise ValueError(f"detail must be 'full' or 'name', got {detail!r}")
    if base in PIPELINE_TEMPLATES:
        parts = []
        for name in PIPELINE_TEMPLATES[base]:
            text = load_prompt(name)
            if length_reference is not None and _carries_length_sentence(name):
                text = with_length_reference(text, length_reference)
            if last_index is not None and "{last_index}" in text:
                text = text.replace("{last_index}", str(last_index))
            parts.append(text)
        out = "\n\n".join(parts)
    elif base in RULE_BASED_PIPELINES:
        out = RULE_BASED_PIPELINES[base]
    else:
        out = f"Imported or unknown chunk set {method!r}: its prompt is not known to this package."
    for s in steps:
        out += "\n\n" + PIPELINE_STEPS.get(s, f"then step {s!r}.")
    return out


def segment_pipeline_json(segments: Sequence[Any], texts: Sequence[str] | None = None,
                          analysis: Any = None) -> str:
    """The E.3 ``{segment_pipeline}``: the output's analysis (Lite's steps, their segments left out) and its
    segments, with their text."""
    segs = []
    for i, s in enumerate(segments):
        get = s.get if isinstance(s, dict) else (lambda k, _s=s: getattr(_s, k))
        seg = {"subtitle": get("subtitle") or "", "from_idx": int(get("from_idx")), "to_idx": int(get("to_idx")),
               "context_idx": [int(c) for c in (get("context_idx") or [])]}
        if texts is not None:
            seg["text"] = texts[i]
        segs.append(seg)
    out = {k: {kk: vv for kk, vv in v.items() if kk != "segments"} if isinstance(v, dict) else v
           for k, v in analysis.items() if k != "segments"} if isinstance(analysis, dict) else {}
    return json.dumps({**out, "segments": segs}, ensure_ascii=False)


def segment_texts_from_passage(passage: str, segments: Sequence[dict[str, Any]]) -> list[str]:
    """Each segment's text from a sentence-indexed passage, in LitSeg's reconstruction order."""
    lines = map(re.compile(r"\[(\d+)\]\s?(.*)").match, passage.split("\n"))
    sent = {int(m.group(1)): m.group(2) for m in lines if m}
    out = []
    for s in segments:
        lo, hi = int(s["from_idx"]), int(s["to_idx"])
        ctx = sorted({int(c) for c in s.get("context_idx") or [] if not lo <= int(c) <= hi})
        parts = [" ".join(sent.get(i, "") for i in ctx if i < lo),
                 " ".join(sent.get(i, "") for i in range(lo, hi + 1)),
                 " ".join(sent.get(i, "") for i in ctx if i > hi)]
        out.append("\n".join(p for p in parts if p))
    return out
