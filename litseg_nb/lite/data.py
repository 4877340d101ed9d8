"""LitSeg-Lite training data: LitSeg annotations reformatted into the single-pass schema of E.2.

For every unit that LitSeg annotated *without* a fallback, the three stage outputs are merged into
one JSON object, exactly the shape the Appendix E.2 prompt asks for::

    {"step1": {"step_1_events": ...},
     "step2": {"step_2_threads": ...},
     "step3": {"chapter_title": ..., "step_3_turning_points": [...], "segments": [...]}}

paired with the Lite system prompt (``{last_index}`` filled) and the same sentence-indexed unit as
user input. Units whose annotation needed a fallback (coverage repair or whole-unit) are excluded
and counted; every target is checked with the shared LitSeg validator before it is used.

Training units are notebook 02's ``train_annotations.jsonl`` (``LitSegConfig.train_corpus``: the
LiteraryQA train split in ``full``, another book in ``test``/``smoke``); the student is evaluated on
the units of ``annotations.jsonl`` and never on a trained unit (:mod:`litseg_nb.lite.heldout`).

The teacher's length references. The teacher's system prompt carried a "recommended maximum length"
calibrated per dataset (notebook 02; every annotation record says its value, ``length_reference``,
whose it is, ``length_reference_dataset``, and the run's mapping dataset -> value,
``length_references``). The student's E.2 prompt gets the value of the unit's dataset from the same
mapping (:func:`annotation_length_reference`), in training (LiteraryQA train units: LiteraryQA's
value) and at inference (a GutenQA unit: GutenQA's value); a unit of a dataset the mapping lacks is an
error naming it.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.artifacts import artifact_path
from ..core.prompts import fill_prompt, load_prompt
from ..core.schema import Book, Unit, read_jsonl
from ..errors import UsageError
from ..litseg.prompting import with_length_reference, reference_for
from ..litseg.validate import parse_json_reply, validate_segments
from .heldout import unit_fingerprint

LITE_SYSTEM_TEMPLATE = "lite/system"
PAPER_LENGTH_REFERENCE = 100
LITE_USER_TEMPLATE = "lite/user"
CHAT_TEMPLATE_MARGIN = 32  # tokens the chat template adds around the three messages (upper bound)


class AnnotationsMissingError(UsageError, FileNotFoundError):
    """Notebook 02's LitSeg annotations artifact is not there (run notebook 02 first)."""


def annotations_path(profile: str, split: str = "eval") -> Path:
    """Notebook 02's LitSeg annotations of ``profile``: ``split="eval"`` → ``annotations.jsonl`` (the
    evaluated units), ``"train"`` → ``train_annotations.jsonl`` (Lite's training units)."""
    if split not in ("eval", "train"):
        raise ValueError(f"split must be 'eval' or 'train', got {split!r}")
    return artifact_path(profile, "litseg", "annotations.jsonl" if split == "eval" else "train_annotations.jsonl")


def load_annotations(profile: str, split: str = "eval") -> list[dict[str, Any]]:
    """The LitSeg annotation records of ``profile``; a clear error names the missing file."""
    path = annotations_path(profile, split)
    if not path.is_file():
        raise AnnotationsMissingError(
            f"LitSeg annotations not found: {path}. Notebook 03 trains on notebook 02's output; "
            f"run `python -m litseg_nb run --profile {profile} --only 02` first."
        )
    return list(read_jsonl(path))


# --------------------------------------------------------------------------- prompts
def lite_system_prompt(n_sentences: int, template: str = LITE_SYSTEM_TEMPLATE,
                       length_reference: int | None = PAPER_LENGTH_REFERENCE) -> str:
    """The Appendix E.2 system prompt (or an E.4 ablation prompt, ``template="ablation/..."``)
    with ``{last_index}`` = the unit's last sentence index and the recommended maximum segment
    length = ``length_reference`` (the teacher's calibrated value; the paper's text says 100)."""
    return fill_prompt(with_length_reference(load_prompt(template), length_reference), last_index=n_sentences)


def lite_user_prompt(indexed_text: str) -> str:
    return fill_prompt(load_prompt(LITE_USER_TEMPLATE), chapter_content=indexed_text)


def lite_conversation(book: Book, unit: Unit, template: str = LITE_SYSTEM_TEMPLATE,
                      length_reference: int | Mapping[str, int] = PAPER_LENGTH_REFERENCE) -> list[dict[str, str]]:
    """System + user messages of one Lite call for ``unit`` (the student's whole input);
    ``length_reference`` is one value or the teacher's mapping dataset -> value (the unit's book's
    dataset's value is used; a dataset it lacks raises ``ValueError`` naming the unit)."""
    ref = reference_for(length_reference, book, unit)
    return [{"role": "system", "content": lite_system_prompt(unit.n_sentences, template, ref)},
            {"role": "user", "content": lite_user_prompt(unit.indexed_text(book.text))}]


# --------------------------------------------------------------------------- annotation records
@dataclass
class AnnotationView:
    """The parts of one LitSeg annotation record that distillation needs (normalised)."""

    book_id: str
    unit_id: str
    n_sentences: int
    step1: dict[str, Any]
    step2: dict[str, Any]
    step3: dict[str, Any]
    segments: list[dict[str, Any]]
    fallback: str | None  # None when LitSeg needed no fallback


def _parse(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, str):
        parsed = parse_json_reply(obj)
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _valid_stage_output(stage: Mapping[str, Any]) -> dict[str, Any]:
    """The last valid reply of a LitSeg stage (what the pipeline passed on), parsed."""
    for att in reversed(stage.get("attempts") or []):
        if att.get("valid"):
            got = _parse(att.get("parsed")) or _parse(att.get("text"))
            if got:
                return got
    return _parse(stage.get("passed_on"))


def view_annotation(rec: Mapping[str, Any]) -> AnnotationView:
    """Normalise one record of ``annotations.jsonl`` (written by :mod:`litseg_nb.litseg.pipeline`).

    The unit needed a fallback when stage 3 needed one (``fallback != "none"``: index/coverage
    repair or whole unit) or when stage 1 or 2 was still invalid after the retries
    (``stage_fallbacks``: raw passthrough / empty). Raises ``ValueError`` naming book and unit
    when a field distillation needs is absent.
    """
    where = f"annotation of book {rec.get('book_id')!r} unit {rec.get('unit_id')!r}"
    try:
        book_id, unit_id = str(rec["book_id"]), str(rec["unit_id"])
        n = int(rec["n_sentences"])
        segs = [dict(x) for x in rec["segments"]]
        stages = rec["stages"]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: missing field {e} (is this a LitSeg annotations file?)") from e
    reasons = []
    if rec.get("status", "done") != "done":
        reasons.append(f"status {rec.get('status')}")
    for st, fb in sorted((rec.get("stage_fallbacks") or {}).items()):
        if fb not in (None, "none"):
            reasons.append(f"{st} {fb}")
    if rec.get("fallback") not in (None, "none"):
        reasons.append(f"stage3 {rec.get('fallback')}")
    step3 = {"chapter_title": rec.get("chapter_title"), "step_3_turning_points": rec.get("turning_points")}
    return AnnotationView(book_id, unit_id, n, _valid_stage_output(stages.get("stage1") or {}),
                          _valid_stage_output(stages.get("stage2") or {}), step3, segs,
                          "; ".join(reasons) or None)


# --------------------------------------------------------------------------- single-pass target
def _clean_segment(seg: Mapping[str, Any]) -> dict[str, Any]:
    return {"subtitle": str(seg.get("subtitle") or ""),
            "from_idx": int(seg["from_idx"]), "to_idx": int(seg["to_idx"]),
            "context_idx": [int(i) for i in (seg.get("context_idx") or [])]}


def single_pass_target(view: AnnotationView, unit_title: str = "") -> dict[str, Any]:
    """Merge LitSeg's three stage outputs into the one JSON object of the E.2 schema."""
    s3 = view.step3
    tps = s3.get("step_3_turning_points")
    tps = [{"type": str(t.get("type", "")), "description": str(t.get("description", ""))}
           for t in tps if isinstance(t, Mapping)] if isinstance(tps, list) else []
    return {
        "step1": {"step_1_events": str(view.step1.get("step_1_events", "") or "")},
        "step2": {"step_2_threads": str(view.step2.get("step_2_threads", "") or "")},
        "step3": {
            "chapter_title": str(s3.get("chapter_title") or unit_title or ""),
            "step_3_turning_points": tps,
            "segments": [_clean_segment(s) for s in view.segments],
        },
    }


def target_text(obj: Mapping[str, Any]) -> str:
    """The completion string the student learns to emit (compact, strict JSON)."""
    return json.dumps(obj, ensure_ascii=False)


def segments_of_reply(text: str) -> list[dict[str, Any]] | None:
    """The ``step3.segments`` (or top-level ``segments``) list of a single-pass reply, else None."""
    obj = parse_json_reply(text)
    if not isinstance(obj, dict):
        return None
    s3 = obj.get("step3")
    segs = s3.get("segments") if isinstance(s3, dict) else obj.get("segments")
    return segs if isinstance(segs, list) else None


@dataclass
class LiteExample:
    """One training/eval example: the Lite conversation and its single-pass target."""

    book_id: str
    unit_id: str
    n_sentences: int
    system: str
    user: str
    target: str
    segments: list[dict[str, Any]] = field(default_factory=list)
    target_source: str = "validated"  # or "fallback: <type>" (CPU demonstrations only, labelled)
    n_tokens: int = 0  # prompt + target tokens (0 = not counted)
    fingerprint: str = ""  # of the sentence-indexed unit (litseg_nb.lite.heldout.unit_fingerprint)
    length_reference: int = PAPER_LENGTH_REFERENCE  # the teacher's value for this unit, in the system prompt

    def prompt_messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    def sft_record(self) -> dict[str, Any]:
        """trl conversational prompt/completion record (loss on the completion only)."""
        return {"prompt": self.prompt_messages(),
                "completion": [{"role": "assistant", "content": self.target}]}

    def grpo_record(self) -> dict[str, Any]:
        """trl GRPO record: the prompt plus the columns the reward functions read."""
        return {"prompt": self.prompt_messages(), "book_id": self.book_id, "unit_id": self.unit_id,
                "n_sentences": self.n_sentences, "passage": self.user.split("\n", 1)[-1],
                "system_prompt": self.system}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DataReport:
    """What happened to every annotation record (for the notebook's data table)."""

    n_records: int = 0
    used: int = 0
    included_fallback: int = 0  # fallback units used anyway (fallback_units="include_if_needed")
    excluded: Counter = field(default_factory=Counter)  # reason -> count
    excluded_units: list[tuple[str, str, str]] = field(default_factory=list)  # (book, unit, reason)

    def exclude(self, book: str, unit: str, reason: str) -> None:
        self.excluded[reason] += 1
        self.excluded_units.append((book, unit, reason))

    def as_rows(self) -> list[dict[str, Any]]:
        rows = [{"outcome": "used: validated LitSeg annotation (paper recipe)",
                 "units": self.used - self.included_fallback}]
        if self.included_fallback:
            rows.append({"outcome": "used: needed a LitSeg fallback (NOT the paper's recipe; CPU demo only)",
                         "units": self.included_fallback})
        rows += [{"outcome": f"excluded: {k}", "units": v} for k, v in sorted(self.excluded.items())]
        rows.append({"outcome": "total annotation records", "units": self.n_records})
        return rows


def build_examples(records: Iterable[Mapping[str, Any]], books: Sequence[Book],
                   count_tokens=None, max_seq_tokens: int = 0, fallback_units: str = "exclude",
                   min_units: int = 0) -> tuple[list[LiteExample], DataReport]:
    """Reformat every validated, fallback-free annotation into a :class:`LiteExample`.

    Excluded (and counted by reason): records needing a fallback, units not in ``books``,
    sentence-count mismatches, targets the shared validator rejects, and examples longer than
    ``max_seq_tokens`` (when ``count_tokens`` is given).

    ``fallback_units``: ``"exclude"`` (the paper's recipe) or ``"include_if_needed"`` — only for
    CPU demonstrations with a tiny teacher: when fewer than ``min_units`` validated examples exist,
    units whose annotation needed a fallback are added with their *post-fallback* segments as the
    target, labelled ``target_source="fallback: ..."`` and counted separately.
    """

    if fallback_units not in ("exclude", "include_if_needed"):
        raise ValueError(f"fallback_units must be 'exclude' or 'include_if_needed', got {fallback_units!r}")
    by_id = {b.book_id: b for b in books}
    report = DataReport()
    out: list[LiteExample] = []
    reserve: list[tuple[LiteExample, str]] = []
    for rec in records:
        report.n_records += 1
        view = view_annotation(rec)
        book = by_id.get(view.book_id)
        if book is None:
            report.exclude(view.book_id, view.unit_id, "book not in corpus")
            continue
        try:
            unit = book.unit(view.unit_id)
        except KeyError:
            report.exclude(view.book_id, view.unit_id, "unit not in corpus")
            continue
        if unit.n_sentences != view.n_sentences:
            report.exclude(view.book_id, view.unit_id, "sentence count differs from corpus")
            continue
        content = rec.get("chapter_content")
        if content is not None and content != unit.indexed_text(book.text):
            report.exclude(view.book_id, view.unit_id, "unit text differs from the annotated text")
            continue
        try:
            target = single_pass_target(view, unit.title)
        except (KeyError, TypeError, ValueError):
            report.exclude(view.book_id, view.unit_id, "malformed segments")
            continue
        res = validate_segments({"segments": target["step3"]["segments"]}, unit.n_sentences)
        if not res.ok:
            report.exclude(view.book_id, view.unit_id, "target fails shared validator")
            continue
        ref = record_length_reference(rec)
        conv = lite_conversation(book, unit, length_reference=ref)
        ex = LiteExample(book.book_id, unit.unit_id, unit.n_sentences, conv[0]["content"],
                         conv[1]["content"], target_text(target), target["step3"]["segments"],
                         target_source="validated" if not view.fallback else f"fallback: {view.fallback}",
                         fingerprint=unit_fingerprint(book, unit), length_reference=ref)
        if count_tokens is not None:
            ex.n_tokens = count_tokens(ex.system) + count_tokens(ex.user) + count_tokens(ex.target)
            if max_seq_tokens and ex.n_tokens + CHAT_TEMPLATE_MARGIN > max_seq_tokens:
                report.exclude(view.book_id, view.unit_id, f"longer than max_seq_tokens={max_seq_tokens}")
                continue
        if view.fallback:
            reserve.append((ex, view.fallback))
            continue
        out.append(ex)
    need = max(0, min_units - len(out)) if fallback_units == "include_if_needed" else 0
    for k, (ex, why) in enumerate(reserve):
        if k < need:
            out.append(ex)
            report.included_fallback += 1
        else:
            report.exclude(ex.book_id, ex.unit_id, f"LitSeg fallback ({why})")
    report.used = len(out)
    return out, report


def data_statistics(examples: Sequence[LiteExample], split: str) -> dict[str, Any]:
    """One row of the training-data table for ``split``."""
    import statistics as st

    segs = [len(e.segments) for e in examples]
    sents = [e.n_sentences for e in examples]
    ctx = [sum(1 for s in e.segments if s["context_idx"]) for e in examples]
    overl = []
    for e in examples:
        ss = e.segments
        overl.append(sum(1 for a, b in zip(ss, ss[1:]) if b["from_idx"] <= a["to_idx"]))
    toks = [e.n_tokens for e in examples if e.n_tokens]
    mean = lambda xs: round(st.fmean(xs), 2) if xs else float("nan")  # noqa: E731
    return {
        "split": split, "books": len({e.book_id for e in examples}), "units": len(examples),
        "book_ids": ",".join(sorted({e.book_id for e in examples})),
        "sentences/unit": mean(sents), "segments/unit": mean(segs),
        "sentences/segment": round(sum(sents) / sum(segs), 2) if segs and sum(segs) else float("nan"),
        "segments with context": sum(ctx), "overlapping boundaries": sum(overl),
        "tokens/example": mean(toks), "max tokens": max(toks) if toks else 0,
    }


def record_length_reference(rec: Mapping[str, Any]) -> int:
    """The length reference the teacher's prompt carried for this annotation record."""
    ref = rec.get("length_reference")
    if ref is None:
        raise ValueError(f"annotation of book {rec.get('book_id')!r} unit {rec.get('unit_id')!r} was made "
                         "without a length reference (a calibration record?): not a training annotation")
    return int(ref)


def annotation_length_reference(records: Sequence[Mapping[str, Any]]) -> int | dict[str, int]:
    """The teacher's length references of a set of annotation records (teacher and student share them).

    Records made with the per-dataset calibration (:mod:`litseg_nb.litseg.calibrate`) give the mapping
    dataset -> value of their run (``length_references``; :func:`lite_conversation` and the segmenters
    take it and use each unit's dataset's value); records made with one value for every unit (no
    calibration) give that value. Raises ``ValueError`` when the records come from different
    calibrations (different values for one dataset, or mixed kinds), or when a record's own value
    is not its dataset's value in the mapping."""
    if not records:
        raise ValueError("no annotation records: no length reference")
    single: set[int] = set()
    mapping: dict[str, int] = {}
    where = lambda r: f"book {r.get('book_id')!r} unit {r.get('unit_id')!r}"  # noqa: E731
    for r in records:
        ref = record_length_reference(r)
        refs = r.get("length_references")
        if refs is None:
            single.add(ref)
            continue
        ds = r.get("length_reference_dataset")
        if ds not in refs or int(refs[ds]) != ref:
            raise ValueError(f"annotation of {where(r)}: its length reference {ref} is not dataset {ds!r}'s "
                             f"value in its run's calibration {dict(refs)}")
        for k, v in refs.items():
            if mapping.setdefault(str(k), int(v)) != int(v):
                raise ValueError(f"annotation records carry different length references for dataset {k!r} "
                                 f"({mapping[str(k)]} and {v}); rerun notebook 02 so that all annotations "
                                 "use the same calibration")
    if single and mapping:
        raise ValueError("annotation records mix one length reference for every unit with a per-dataset "
                         "calibration; rerun notebook 02 so that all annotations use the same calibration")
    if len(single) > 1:
        raise ValueError(f"annotation records carry different length references {sorted(single)}; rerun "
                         "notebook 02 so that all annotations use the same calibrated value")
    return mapping if mapping else single.pop()


def student_length_reference(profile: str) -> int | dict[str, int]:
    """The length references of ``profile``'s Lite student: the calibration its training annotations carry."""
    return annotation_length_reference(load_annotations(profile, "train"))
