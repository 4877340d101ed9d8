"""LitSeg-Lite training data: LitSeg annotations reformatted into the single-pass schema of Appendix E.2.

A unit annotated without a fallback becomes one example whose target merges the three stage outputs,
checked by the shared validator; excluded units are counted. Lite is never evaluated on a trained unit."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.artifacts import artifact_path
from ..core.prompts import fill_prompt, load_prompt
from ..core.safe_io import write_text_atomic
from ..core.schema import Book, Unit, read_jsonl
from ..errors import UsageError
from ..litseg.prompting import PAPER_LENGTH_REFERENCE, reference_for, with_length_reference
from ..litseg.validate import Segment, parse_json_reply, validate_segments

LITE_SYSTEM_TEMPLATE = "lite/system"
LITE_USER_TEMPLATE = "lite/user"
CHAT_TEMPLATE_MARGIN = 32  # tokens the chat template adds around the three messages (upper bound)


class AnnotationsMissingError(UsageError, FileNotFoundError):
    """Notebook 02's LitSeg annotations artifact is not there (run notebook 02 first)."""


def annotations_path(profile: str, split: str = "eval") -> Path:
    """Notebook 02's LitSeg annotations of ``profile``: the evaluated units (``eval``) or Lite's (``train``)."""
    return artifact_path(profile, "litseg", "annotations.jsonl" if split == "eval" else "train_annotations.jsonl")


def load_annotations(profile: str, split: str = "eval") -> list[dict[str, Any]]:
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
    """The Appendix E.2 (or an E.4 ablation) system prompt with ``{last_index}`` and the length reference."""
    return fill_prompt(with_length_reference(load_prompt(template), length_reference), last_index=n_sentences)


def lite_conversation(book: Book, unit: Unit, template: str = LITE_SYSTEM_TEMPLATE,
                      length_reference: int | Mapping[str, int] = PAPER_LENGTH_REFERENCE) -> list[dict[str, str]]:
    """System + user messages of one Lite call for ``unit``; ``length_reference``: one value or dataset -> value."""
    ref = reference_for(length_reference, book, unit)
    user = fill_prompt(load_prompt(LITE_USER_TEMPLATE), chapter_content=unit.indexed_text(book.text))
    return [{"role": "system", "content": lite_system_prompt(unit.n_sentences, template, ref)},
            {"role": "user", "content": user}]


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
    parsed = parse_json_reply(obj) if isinstance(obj, str) else obj
    return parsed if isinstance(parsed, dict) else {}


def _valid_stage_output(stage: Mapping[str, Any]) -> dict[str, Any]:
    """The last valid reply of a LitSeg stage (what the pipeline passed on), parsed."""
    for att in reversed(stage.get("attempts") or []):
        if att.get("valid"):
            got = _parse(att.get("parsed")) or _parse(att.get("text"))
            if got:
                return got
    return _parse(stage.get("passed_on"))


def view_annotation(rec: Mapping[str, Any]) -> AnnotationView:
    """Normalise one annotation record; ``ValueError`` naming the unit when a needed field is absent."""
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
            "segments": [Segment.from_json(s).to_json() for s in view.segments],
        },
    }


def target_text(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)


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
    fingerprint: str = ""  # of the sentence-indexed unit (unit_fingerprint)
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
    """Reformat every validated, fallback-free annotation into a :class:`LiteExample`; the rest is counted.
    ``fallback_units="include_if_needed"`` (CPU demos) tops up to ``min_units`` with fallback units, labelled."""
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
    import statistics as st

    segs = [len(e.segments) for e in examples]
    sents = [e.n_sentences for e in examples]
    ctx = [sum(1 for s in e.segments if s["context_idx"]) for e in examples]
    overl = [sum(1 for a, b in zip(e.segments, e.segments[1:]) if b["from_idx"] <= a["to_idx"]) for e in examples]
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
    ref = rec.get("length_reference")
    if ref is None:
        raise ValueError(f"annotation of book {rec.get('book_id')!r} unit {rec.get('unit_id')!r} was made "
                         "without a length reference (a calibration record?): not a training annotation")
    return int(ref)


def annotation_length_reference(records: Sequence[Mapping[str, Any]]) -> int | dict[str, int]:
    """The teacher's length reference(s) of annotation records (dataset -> value, or one value);
    ``ValueError`` when the records come from different calibrations."""
    if not records:
        raise ValueError("no annotation records: no length reference")
    single: set[int] = set()
    mapping: dict[str, int] = {}
    for r in records:
        ref = record_length_reference(r)
        refs = r.get("length_references")
        if refs is None:
            single.add(ref)
            continue
        ds = r.get("length_reference_dataset")
        if ds not in refs or int(refs[ds]) != ref:
            raise ValueError(f"annotation of book {r.get('book_id')!r} unit {r.get('unit_id')!r}: its length reference "
                             f"{ref} is not dataset {ds!r}'s value in its run's calibration {dict(refs)}")
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
    return annotation_length_reference(load_annotations(profile, "train"))


# --------------------------------------------------------------------------- held-out units
TRAINED_UNITS_FILE = "lite_trained_units.json"


class TrainedUnitError(UsageError, ValueError):
    """A Lite evaluation would include a unit the student was trained on."""


def unit_fingerprint(book: Book, unit: Unit) -> str:
    """Hash of the sentence-indexed unit text (what the student sees)."""
    return hashlib.sha256(unit.indexed_text(book.text).encode("utf-8")).hexdigest()[:24]


@dataclass
class TrainedUnits:

    entries: list[dict[str, str]] = field(default_factory=list)  # book_id, unit_id, title, fingerprint

    @property
    def keys(self) -> set[tuple[str, str]]:
        return {(e["book_id"], e["unit_id"]) for e in self.entries}

    @property
    def fingerprints(self) -> set[str]:
        return {e["fingerprint"] for e in self.entries if e.get("fingerprint")}

    def __len__(self) -> int:
        return len(self.entries)

    def union(self, other: "TrainedUnits | None") -> "TrainedUnits":
        if other is None:
            return self
        seen = {(e["book_id"], e["unit_id"], e.get("fingerprint")) for e in self.entries}
        extra = [e for e in other.entries if (e["book_id"], e["unit_id"], e.get("fingerprint")) not in seen]
        return TrainedUnits(self.entries + extra)

    def overlap(self, pairs: Iterable[tuple[Book, Unit]]) -> list[str]:
        """``book/unit`` of every pair that is a trained unit (by id or by text)."""
        keys, fps = self.keys, self.fingerprints
        return [f"{b.book_id}/{u.unit_id}" for b, u in pairs
                if (b.book_id, u.unit_id) in keys or unit_fingerprint(b, u) in fps]

    def to_json(self) -> dict[str, Any]:
        return {"n_units": len(self.entries), "units": self.entries}

    def save(self, path: Path) -> Path:
        """Write the record to ``path``; a file that already holds it is left as it is (its stamp kept)."""
        path = Path(path)
        text = json.dumps(self.to_json(), indent=2)
        try:
            if path.read_text(encoding="utf-8") == text:
                return path
        except (OSError, UnicodeDecodeError):  # absent or unreadable: (re)written below
            pass
        return write_text_atomic(path, text)

    @classmethod
    def load(cls, path: Path) -> "TrainedUnits":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls([dict(e) for e in data["units"]])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TrainedUnitError(f"cannot read the trained-units record {path}: {e}") from e


def trained_units_of(examples: Sequence[Any]) -> TrainedUnits:
    return TrainedUnits([{"book_id": e.book_id, "unit_id": e.unit_id, "fingerprint": e.fingerprint}
                         for e in examples])


def save_profile_record(profile: str, trained: TrainedUnits) -> Path:
    """``artifacts/lite/trained_units.json``: accumulates every unit any student of the profile saw."""
    return trained.union(profile_record(profile)).save(artifact_path(profile, "lite", "trained_units.json"))


def profile_record(profile: str) -> TrainedUnits:
    path = artifact_path(profile, "lite", "trained_units.json")
    return TrainedUnits.load(path) if path.is_file() else TrainedUnits()


def model_record(model: str | Path) -> TrainedUnits | None:
    """The trained units stored in a model or adapter folder (``None``: not a Lite-trained folder)."""
    path = Path(str(model)) / TRAINED_UNITS_FILE
    return TrainedUnits.load(path) if path.is_file() else None


def assert_not_trained(pairs: Sequence[tuple[Book, Unit]], trained: TrainedUnits | None, what: str) -> None:
    bad = trained.overlap(pairs) if trained else []
    if bad:
        raise TrainedUnitError(
            f"{what}: {len(bad)} unit(s) were in the student's training data and cannot be used to "
            f"evaluate it: {', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}")


def refuse_trained_chunks(method: str, chunks: Sequence[Any], profile_or_record: str | TrainedUnits,
                          books: Sequence[Book] = ()) -> None:
    """Evaluation guard for a ``litseg-lite*`` chunk set: no chunk of a trained unit (by id, or by text)."""
    if not str(method).startswith("litseg-lite"):
        return
    trained = (profile_or_record if isinstance(profile_or_record, TrainedUnits)
               else profile_record(profile_or_record))
    if not trained:
        return
    units = {(c.book_id, c.unit_id) for c in chunks}
    by_id = {b.book_id: b for b in books}
    bad = sorted(f"{b}/{u}" for b, u in units & trained.keys) + trained.overlap(  # the others: by text
        (by_id[b], x) for b, u in sorted(units - trained.keys) if b in by_id for x in by_id[b].units if x.unit_id == u)
    if bad:
        raise TrainedUnitError(
            f"chunk set {method!r} contains {len(bad)} unit(s) the student was trained on "
            f"({', '.join(bad[:10])}); Lite is never evaluated on its training units")


def refuse_trained_chunk_file(method: str, path: Path, chunks: Sequence[Any]) -> None:
    """:func:`refuse_trained_chunks` for ``<artifacts>/chunks/<method>.jsonl`` against that folder's record."""
    record = Path(path).resolve().parent.parent / "lite" / "trained_units.json"
    if str(method).startswith("litseg-lite") and record.is_file():
        refuse_trained_chunks(method, chunks, TrainedUnits.load(record))
