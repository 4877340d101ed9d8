"""The LitSeg annotation pipeline (paper section 3.1.2, prompts of Appendix E.1).

For every unit (a sentence-indexed chapter or recursive part of one) three stages run, each
seeing the previous stages' outputs:

1. ``stage1`` – valid events (``{"step_1_events": str}``);
2. ``stage2`` – narrative threads (``{"step_2_threads": str}``), given the stage-1 result;
3. ``stage3`` – turning points and segments, given both results.

Stages are BATCHED across units: for a group of units (``cfg.unit_group_size``, default all),
all units' stage 1 runs, then stage 2, then stage 3; one ``backend.chat`` call per book and
attempt (the backend batches internally).

Retries. A reply that fails validation (see :mod:`.validate`) is retried up to
``max_retries`` times, batched over the still-invalid units. Retries use the same prompt with
sampling at ``retry_temperature`` and seed ``cfg.seed + attempt`` (greedy decoding would repeat
the same reply). A backend error (:class:`~litseg_nb.llm.base.LLMError`, e.g.
:class:`~litseg_nb.llm.base.BackendUnavailableError` after the backend's own bounded connection
retries) is not a reply: it is never answered by a fallback, it stops the run (units finished in
earlier unit groups are already in the annotations file; a rerun resumes after them).

Fallbacks (all counted in the annotation record):

* stage 1/2 still invalid after the retries → the last non-empty raw reply is passed on verbatim
  as ``{step_k_result}`` (``fallback = "raw_passthrough"``); with no non-empty reply an empty
  string is passed on (``"empty"``). The pipeline continues: stage 3 is what
  produces segments, and it is validated on its own.
* stage 3 after the retries → :func:`.validate.finalize_segments` on the last attempt that had
  readable segments (else the last attempt): index sanitising, the paper's left-adjacent coverage
  repair, or the whole unit as one chunk when nothing is usable.

Reading replies. Every reply goes through :mod:`litseg_nb.llm.replies`: reasoning blocks
(``<think>...</think>``) are removed before extraction and only the answer is ever passed on; a reply
cut off inside its reasoning is an invalid attempt, counted (``truncated_in_reasoning`` per attempt,
stage and record); a reply longer than the stage's token budget allows is not parsed, is stored
cropped and says so; unpaired surrogates are replaced so every record can be written.

Annotations. One JSON record per unit is appended to the annotations file as soon as the unit is
finished (all three raw stage replies of every attempt, validation errors, the segments used, the
fallback, token counts). A rerun skips units whose record has the same key (config, prompts,
model, unit text) and ``status == "done"``; records of older versions that ended with backend
errors (``status == "backend_error"``) are redone. At the end the file is rewritten in unit order with
exactly this run's records. LLM calls also go through the backend's request cache.

Length reference. ``length_reference`` is one value for every unit, ``None`` (calibration: no length
constraint) or the per-dataset calibration (dataset -> value, :mod:`.calibrate`): each unit's system
prompt then carries its book's dataset's value (a dataset without one is an error naming the unit),
the units are run grouped by their system prompt, and every record says which value it used
(``length_reference``), whose it is (``length_reference_dataset``: the dataset, or ``None`` for one
value given for every unit) and the run's whole mapping (``length_references``), so that Lite reads
the teacher's calibration from its training records (:func:`litseg_nb.lite.data.annotation_length_reference`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..llm.base import LLMError, SamplingParams, UsageTag
from ..llm.replies import answer_text, replace_lone_surrogates
from ..llm.request_cache import reject_replies
from ..core.schema import Book, Chunk, Unit, assert_full_coverage, write_jsonl
from .config import LitSegConfig
from .prompting import (PAPER_LENGTH_REFERENCE, SCHEMA_VERSION, STAGES, LengthReference, reference_for,
                        segment_budget, segment_floor, stage_conversation, stage_json_schema, stage_result_text,
                        system_prompt)
from .reconstruct import reconstruct_unit
from .validate import (FinalSegmentation, Segment, ValidationResult, extract_json, finalize_segments,
                       parse_json_reply, validate_segments, validate_stage1, validate_stage2)
from ..core.prompts import load_prompt
from ..corpus import load_corpus

log = logging.getLogger(__name__)

ANNOTATION_VERSION = 1


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class AnnotationRun:
    """Result of :func:`annotate_units`: one record per unit (input order) plus run statistics."""

    records: list[dict[str, Any]]
    wall_s: float
    llm_calls: int  # backend.chat calls made by this run (not counting resumed units)
    resumed: int  # units taken from the annotations file without any LLM call
    path: Path | None
    length_reference: LengthReference  # as given: one value, None, or dataset -> value
    structured_output: bool
    method: str

    def by_unit(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["book_id"], r["unit_id"]): r for r in self.records}


@dataclass
class _Job:
    book: Book
    unit: Unit
    key: str
    content: str
    record: dict[str, Any]
    system: str = ""  # the system prompt (carries the unit's length reference)
    passed: dict[str, str] = field(default_factory=dict)  # step_1_result / step_2_result
    conv: list[dict[str, str]] | None = None
    last_validation: ValidationResult | None = None
    usable_validation: ValidationResult | None = None
    usable_text: str = ""  # stage-3 reply whose validation is used for the final segments


def run_key(cfg: LitSegConfig, backend: Any, system: str, structured: bool, max_retries: int) -> str:
    """Hash of everything that determines a unit's annotation except the unit itself."""
    blob = {
        "v": ANNOTATION_VERSION,
        "backend": getattr(backend, "name", ""),
        "model": getattr(backend, "model_id", ""),
        "system": system,
        "templates": [load_prompt(f"litseg/{s}") for s in STAGES],
        "temperature": cfg.llm.temperature,
        "top_p": cfg.llm.top_p,
        "seed": cfg.seed,
        "max_new_tokens": [cfg.stage_max_new_tokens(s) for s in STAGES],
        "max_retries": max_retries,
        "retry_temperature": cfg.retry_temperature,
        "structured": structured,
    }
    if structured:  # the schemas constrain the replies (keys of unconstrained runs unchanged)
        blob["schema_version"] = SCHEMA_VERSION
        if cfg.min_segments:  # the segment floor (keys of runs without it unchanged)
            blob["min_segments"] = cfg.min_segments
    return _sha(json.dumps(blob, sort_keys=True))[:20]


def stage3_floor(cfg: LitSegConfig, n_sentences: int, length_reference: int | None) -> int:
    """The fewest segments stage 3's schema lets a unit of ``n_sentences`` decode under ``cfg`` (constrained
    decoding; :func:`.prompting.segment_floor` capped by the segments stage 3's token budget holds); 0 = no
    floor (``cfg.min_segments`` is 0). Recorded per unit as ``segment_floor``."""
    floor = segment_floor(n_sentences, length_reference, cfg.min_segments)
    return min(floor, segment_budget(cfg.stage_max_new_tokens("stage3"))[1]) if floor else 0


def unit_key(rkey: str, book: Book, unit: Unit, content: str) -> str:
    return _sha(f"{rkey}|{book.book_id}|{unit.unit_id}|{_sha(content)}")[:24]


def read_annotations(path: Path) -> list[dict[str, Any]]:
    """Records of an annotations file; a truncated last line (a crash mid-write) is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    # split on "\n" only: str.splitlines() also splits on U+0085/U+2028 inside JSON strings, which
    # json.dumps(ensure_ascii=False) writes raw (a model's subtitle may hold them)
    lines = path.read_text(encoding="utf-8").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if lineno == len(lines):
                log.warning("%s: ignoring truncated last line %d (interrupted write)", path, lineno)
                continue
            raise ValueError(f"{path}:{lineno}: invalid JSON in LitSeg annotations ({e})") from e
    return out


def _append(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()


def _validate_stage(stage: str, text: str, n: int, max_new_tokens: int | None = None
                    ) -> tuple[Any, list[str], ValidationResult | None, dict[str, Any]]:
    """Parse (:mod:`litseg_nb.llm.replies`: reasoning removed, size capped by the stage's token budget,
    surrogates replaced) and validate one stage reply; ``info`` is what the record says about the
    reading (notes, cut inside reasoning, the text to store)."""
    got = extract_json(text, max_new_tokens=max_new_tokens)
    obj = got.obj
    info = {"reply_notes": got.notes, "truncated_in_reasoning": got.reply.truncated_in_reasoning,
            "oversize": got.reply.oversize, "text": stored_reply_text(text, got.reply.char_limit if got.reply.oversize else None)}
    unread = [got.error or "reply is not parsable JSON"] if obj is None else []
    if stage == "stage1":
        return obj, unread or validate_stage1(obj), None, info
    if stage == "stage2":
        return obj, unread or validate_stage2(obj), None, info
    res = validate_segments(obj, n)
    if unread:
        res.errors = unread
    return obj, res.errors, res, info


def annotate_units(
    items: Sequence[tuple[Book, Unit]],
    backend: Any,
    cfg: LitSegConfig,
    *,
    length_reference: LengthReference = PAPER_LENGTH_REFERENCE,
    annotations_path: Path | None = None,
    method: str = "litseg",
    structured_output: bool | None = None,
    max_retries: int | None = None,
    progress: bool = True,
    batch_by_book: bool = True,
) -> AnnotationRun:
    """Run LitSeg on ``items`` (``(book, unit)`` pairs) and return one record per unit.

    ``length_reference=None`` uses the no-length-constraint prompt (calibration); a mapping
    dataset -> value gives each unit its dataset's value (see the module docstring).
    ``structured_output`` / ``max_retries`` default to ``cfg.llm.structured_output`` /
    ``cfg.max_retries``. With ``annotations_path`` the run is incremental and resumable.
    ``batch_by_book=False`` sends each stage attempt of a unit group as ONE ``backend.chat`` call over
    all its books (usage tagged with an empty book): notebook 08's paired §4.4 measurement, where every
    method gets the same request list per stage or pass (:mod:`litseg_nb.evaluation.paired_timing`).
    """
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    structured = cfg.llm.structured_output if structured_output is None else bool(structured_output)
    retries = cfg.max_retries if max_retries is None else int(max_retries)
    if retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {retries}")
    if structured and getattr(backend, "structured_output", True) is False:
        raise ValueError(
            f"structured output requested but backend {getattr(backend, 'name', '?')} "
            f"({getattr(backend, 'model_id', '?')}) was built without it; build it with "
            "make_backend(cfg.llm.replace(structured_output=True))")
    per_dataset = isinstance(length_reference, Mapping)
    references = ({str(k): int(v) for k, v in sorted(length_reference.items())} if per_dataset else None)
    prompts: dict[int | None, tuple[str, str]] = {}  # reference -> (system prompt, run key)

    jobs: list[_Job] = []
    seen: set[tuple[str, str]] = set()
    for book, unit in items:
        if (book.book_id, unit.unit_id) in seen:
            raise ValueError(f"unit {unit.unit_id} of book {book.book_id} given twice")
        seen.add((book.book_id, unit.unit_id))
        if unit.n_sentences < 1:
            raise ValueError(f"unit {unit.unit_id} of book {book.book_id} has no sentences")
        ref = reference_for(length_reference, book, unit)  # a dataset without a reference raises here
        if ref not in prompts:
            system = system_prompt(ref)
            prompts[ref] = (system, run_key(cfg, backend, system, structured, retries))
        system, rkey = prompts[ref]
        content = unit.indexed_text(book.text)
        key = unit_key(rkey, book, unit, content)
        record = _new_record(book, unit, key, rkey, content, method, backend, structured, ref, retries)
        record["segment_floor"] = stage3_floor(cfg, unit.n_sentences, ref) if structured else 0
        record.update(_reference_fields(book, per_dataset, references))
        jobs.append(_Job(book, unit, key, content, record, system))

    done: dict[str, dict[str, Any]] = {}
    if annotations_path is not None:
        fields = {j.key: _reference_fields(j.book, per_dataset, references) for j in jobs}
        for rec in read_annotations(annotations_path):
            if rec.get("status") == "done" and rec.get("key") in fields:
                # the key fixes the prompt (its value) and the unit; the fields say whose value it is
                # in THIS run (records of older versions lack them)
                done[rec["key"]] = {**rec, **fields[rec["key"]]}
    todo = [j for j in jobs if j.key not in done]
    ledger = getattr(backend, "ledger", None)
    if ledger is not None:  # resumed units keep the cost recorded when they were annotated (as cached)
        for job in jobs:
            if job.key in done:
                replay_record_usage(ledger, done[job.key], method)
    group = cfg.unit_group_size or len(todo) or 1
    bar = tqdm(total=len(todo) * 3, desc=f"{method} stages", disable=not progress or not todo)
    by_system: dict[str, list[_Job]] = {}  # units grouped by their system prompt (length reference)
    for job in todo:
        by_system.setdefault(job.system, []).append(job)
    calls = 0
    try:
        if hasattr(backend, "annotate_books"):  # an executor elsewhere (Ray): whole books, their records back
            keys = {(j.book.book_id, j.unit.unit_id): j.key for j in todo}

            def keep(records: list[dict[str, Any]]) -> None:
                for rec in records:
                    done[keys[(rec["book_id"], rec["unit_id"])]] = rec
                    if annotations_path is not None:
                        _append(annotations_path, rec)
                bar.update(3 * len(records))

            calls = backend.annotate_books([(j.book, j.unit) for j in todo], cfg, keep, method=method,
                                           length_reference=length_reference, structured_output=structured_output,
                                           max_retries=max_retries)
        else:
            for sjobs in by_system.values():
                calls += _run_groups(sjobs, group, backend, cfg, structured, retries, method, bar, done,
                                     annotations_path, batch_by_book)
    finally:
        bar.close()
    records = [done[j.key] for j in jobs]
    if annotations_path is not None:
        write_jsonl(Path(annotations_path), records)
    return AnnotationRun(records, time.perf_counter() - t0, calls, len(jobs) - len(todo),
                         Path(annotations_path) if annotations_path is not None else None,
                         length_reference, structured, method)


def _run_groups(todo: list[_Job], group: int, backend: Any, cfg: LitSegConfig, structured: bool,
                retries: int, method: str, bar: Any, done: dict[str, dict[str, Any]],
                annotations_path: Path | None, batch_by_book: bool = True) -> int:
    """The three stages per group of units; each finished unit's record is appended at once (so a
    backend error in a later group loses nothing finished). Returns the chat calls made."""
    calls = 0
    for g in range(0, len(todo), group):
        batch = todo[g:g + group]
        g0 = time.perf_counter()
        for stage in STAGES:
            calls += _run_stage(stage, batch, backend, cfg, structured, retries, method, batch_by_book)
            bar.update(len(batch))
        group_wall = time.perf_counter() - g0
        for job in batch:
            _finish(job, group_wall / len(batch))
            done[job.key] = job.record
            if annotations_path is not None:
                _append(annotations_path, job.record)
    return calls


def record_usage_rows(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per stage, the usage a finished annotation record cost when it was computed (attempts that
    got a reply; backend errors recorded nothing)."""
    out: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        atts = [a for a in record["stages"][stage]["attempts"] if a.get("text") is not None]
        if atts:
            out[stage] = {"calls": len(atts),
                          "prompt_tokens": sum(int(a.get("prompt_tokens") or 0) for a in atts),
                          "cached_prompt_tokens": sum(int(a.get("cached_prompt_tokens") or 0) for a in atts),
                          "completion_tokens": sum(int(a.get("completion_tokens") or 0) for a in atts),
                          "reasoning_tokens": sum(int(a.get("reasoning_tokens") or 0) for a in atts),
                          "latency_s": sum(float(a.get("latency_s") or 0.0) for a in atts)}
    return out


def annotate_with(annotator: Any, items: Sequence[tuple[Book, Unit]], cfg: LitSegConfig, **kwargs: Any
                  ) -> AnnotationRun:
    """:func:`annotate_units` on ``annotator``: an LLM backend (this process) or an object with
    ``annotate(items, cfg, **kwargs)`` that runs it elsewhere
    (:class:`~litseg_nb.litseg.ray_annotate.RayAnnotator`; :func:`~litseg_nb.litseg.ray_annotate.annotator_for`)."""
    if hasattr(annotator, "annotate") and not hasattr(annotator, "chat"):
        return annotator.annotate(items, cfg, **kwargs)
    return annotate_units(items, annotator, cfg, **kwargs)


def replay_record_usage(ledger: Any, record: dict[str, Any], method: str) -> None:
    """Put a resumed unit's recorded cost into ``ledger`` (flagged as cache hits), so a resumed
    run's usage table equals the cold run's."""
    for stage, row in record_usage_rows(record).items():
        ledger.replay(UsageTag(method, record["book_id"], stage), row)


def _reference_fields(book: Book, per_dataset: bool, references: dict[str, int] | None) -> dict[str, Any]:
    """Whose length reference a unit's record carries: its dataset's (per-dataset calibration) or one
    value given for every unit (``length_reference_dataset = None``), and the run's whole mapping."""
    return {"dataset": book.dataset, "length_reference_dataset": book.dataset if per_dataset else None,
            "length_references": references}


def _new_record(book: Book, unit: Unit, key: str, rkey: str, content: str, method: str, backend: Any,
                structured: bool, length_reference: int | None, retries: int) -> dict[str, Any]:
    return {
        "version": ANNOTATION_VERSION,
        "key": key,
        "run_key": rkey,
        "method": method,
        "book_id": book.book_id,
        "unit_id": unit.unit_id,
        "unit_title": unit.title,
        "unit_ordinal": unit.ordinal,
        "n_sentences": unit.n_sentences,
        "chapter_content": content,
        "model": getattr(backend, "model_id", ""),
        "backend": getattr(backend, "name", ""),
        "structured_output": structured,
        "length_reference": length_reference,
        "max_retries": retries,
        "status": "running",
        "stages": {s: {"attempts": []} for s in STAGES},
    }


def _run_stage(stage: str, jobs: list[_Job], backend: Any, cfg: LitSegConfig,
               structured: bool, retries: int, method: str, batch_by_book: bool = True) -> int:
    """Run one stage for all ``jobs`` with batched retries; returns the number of chat calls (one per
    book and attempt, or one per attempt with ``batch_by_book=False``)."""
    calls = 0
    for job in jobs:
        job.conv = stage_conversation(job.system, stage, job.content, job.unit.n_sentences,
                                      job.passed.get("step_1_result", ""), job.passed.get("step_2_result", ""))
        job.last_validation = job.usable_validation = None
        job.usable_text = ""
    pending = list(jobs)
    for attempt in range(retries + 1):
        if not pending:
            break
        temperature = cfg.llm.temperature if attempt == 0 else max(cfg.llm.temperature, cfg.retry_temperature)
        params = SamplingParams(
            max_new_tokens=cfg.stage_max_new_tokens(stage),
            temperature=temperature,
            top_p=cfg.llm.top_p,
            seed=cfg.seed + attempt,
        )
        by_book: dict[str, list[_Job]] = {}
        for job in pending:
            by_book.setdefault(job.book.book_id if batch_by_book else "", []).append(job)
        still: list[_Job] = []
        for book_id, bjobs in by_book.items():
            calls += 1
            # constrained decoding: each unit's own schema (stage 3: indices bounded by its sentence count, at
            # least its segment floor of segments when cfg.min_segments is set)
            call_params = dataclasses.replace(params, json_schemas=tuple(
                stage_json_schema(stage, params.max_new_tokens, j.unit.n_sentences, j.record["segment_floor"])
                for j in bjobs)) if structured else params
            # a backend error (LLMError: a dead or failing server, an over-long prompt) is not a
            # reply: it propagates and stops the run, never a fallback
            gens = backend.chat([j.conv for j in bjobs], call_params, UsageTag(method, book_id, stage))
            if len(gens) != len(bjobs):
                raise LLMError(f"backend returned {len(gens)} generations for {len(bjobs)} prompts")
            for job, gen in zip(bjobs, gens):
                obj, errors, vres, info = _validate_stage(stage, gen.text, job.unit.n_sentences,
                                                          params.max_new_tokens)
                valid = not errors
                entry = {"attempt": attempt, "text": info["text"], "error": None, "valid": valid,
                         "errors": errors, "prompt_tokens": gen.prompt_tokens,
                         "completion_tokens": gen.completion_tokens,
                         "cached_prompt_tokens": gen.cached_prompt_tokens or 0,
                         "reasoning_tokens": gen.reasoning_tokens,
                         "latency_s": gen.latency_s, "cache_hit": bool(gen.cache_hit),
                         "finish_reason": gen.finish_reason, "temperature": temperature,
                         "seed": params.seed, "reply_notes": info["reply_notes"],
                         "truncated_in_reasoning": info["truncated_in_reasoning"],
                         "oversize": info["oversize"]}
                if stage != "stage3":
                    entry["parsed"] = obj if valid else None
                else:
                    job.last_validation = vres
                    if vres is not None and (vres.segments or valid):
                        job.usable_validation, job.usable_text = vres, info["text"]
                job.record["stages"][stage]["attempts"].append(entry)
                if not valid:
                    still.append(job)
            # replies that failed validation leave the request cache: a rerun asks again (a server that
            # answered nonsense may be fixed by then); this run keeps them (retry, repair, fallback)
            reject_replies(backend, [j.conv for j in bjobs if j in still], params)
        pending = [j for j in pending if j in still]
    for job in jobs:
        _close_stage(stage, job)
    return calls


def _close_stage(stage: str, job: _Job) -> None:
    st = job.record["stages"][stage]
    attempts = st["attempts"]
    valid = [a for a in attempts if a["valid"]]
    st["valid"] = bool(valid)
    st["first_try_valid"] = bool(attempts) and attempts[0]["valid"]
    st["retries"] = max(0, len(attempts) - 1)
    st["backend_errors"] = sum(a["error"] is not None for a in attempts)
    st["truncated_in_reasoning"] = sum(bool(a.get("truncated_in_reasoning")) for a in attempts)
    if stage == "stage3":
        return
    if valid:
        st["fallback"] = "none"
        passed = stage_result_text(valid[-1]["parsed"], valid[-1]["text"])
    else:
        # the reply's answer is passed on, never its reasoning block (nor an oversize reply)
        texts = [answer_text(a["text"]) for a in attempts if a["text"] and not _oversize(a)]
        texts = [t for t in texts if t.strip()]
        st["fallback"] = "raw_passthrough" if texts else "empty"
        passed = texts[-1].strip() if texts else ""
    st["passed_on"] = passed
    job.passed["step_1_result" if stage == "stage1" else "step_2_result"] = passed


def _finish(job: _Job, wall_share: float) -> None:
    rec = job.record
    n = job.unit.n_sentences
    st3 = rec["stages"]["stage3"]
    used = job.usable_validation or job.last_validation
    final: FinalSegmentation = finalize_segments(used, n)
    st3["validation"] = used.to_json() if used is not None else None
    rec["segments"] = [s.to_json() for s in final.segments]
    rec["fallback"] = final.fallback
    rec["fallback_types"] = final.fallback_types
    rec["repair_actions"] = final.actions
    rec["repaired_indices"] = final.repaired_indices
    parsed3 = parse_json_reply(job.usable_text or (_last_text(st3) or ""))
    rec["chapter_title"] = parsed3.get("chapter_title") if isinstance(parsed3, dict) else None
    tps = parsed3.get("step_3_turning_points") if isinstance(parsed3, dict) else None
    rec["turning_points"] = tps if isinstance(tps, list) else None
    rec["raw_outputs"] = {s: _last_text(rec["stages"][s]) for s in STAGES}
    all_attempts = [a for s in STAGES for a in rec["stages"][s]["attempts"]]
    rec["tokens"] = {
        "calls": len(all_attempts),
        "prompt": sum(a["prompt_tokens"] for a in all_attempts),
        "completion": sum(a["completion_tokens"] for a in all_attempts),
        "cached_prompt": sum(a["cached_prompt_tokens"] for a in all_attempts),
        "cache_hits": sum(a["cache_hit"] for a in all_attempts),
        "latency_s": round(sum(a["latency_s"] for a in all_attempts), 4),
    }
    rec["first_try_valid"] = {s: rec["stages"][s]["first_try_valid"] for s in STAGES}
    rec["retries"] = sum(rec["stages"][s]["retries"] for s in STAGES)
    rec["truncated_in_reasoning"] = sum(rec["stages"][s]["truncated_in_reasoning"] for s in STAGES)
    rec["stage_fallbacks"] = {s: rec["stages"][s]["fallback"] for s in ("stage1", "stage2")}
    any_reply = any(a["text"] is not None for a in st3["attempts"])
    rec["status"] = "done" if any_reply else "backend_error"
    rec["group_wall_share_s"] = round(wall_share, 4)


def _oversize(attempt: dict[str, Any]) -> bool:
    return bool(attempt.get("oversize"))


def stored_reply_text(text: str, crop_at: int | None = None) -> str:
    """A reply as the annotation record stores it: unpaired surrogates replaced (the record must be
    UTF-8), an oversize reply cropped to ``crop_at`` characters with a marker saying so."""
    clean, _ = replace_lone_surrogates(text)
    if crop_at is not None and len(clean) > crop_at:
        return clean[:crop_at] + f"\n[... cropped: the reply had {len(clean):,} characters]"
    return clean


def _last_text(st: dict[str, Any]) -> str | None:
    texts = [a["text"] for a in st["attempts"] if a["text"] is not None]
    return texts[-1] if texts else None


# ----------------------------------------------------------------------------------- Lite's training units
TRAIN_METHOD = "litseg-train"  # usage tag of the training annotations (not part of the §4.4 timing)


def training_items(cfg: LitSegConfig) -> tuple[list[Book], list[tuple[Book, Unit]]]:
    """LitSeg-Lite's training units: every unit of ``cfg.train_corpus`` (first ``cfg.max_train_units``).

    In ``full`` that is the LiteraryQA train split (``<data>/literaryqa/annotations/train.jsonl`` and
    ``texts/train/``); the CPU profiles use another book than the evaluated ones (a book-level split).
    """
    books = load_corpus(cfg.train_corpus)
    items = [(b, u) for b in books for u in b.units if u.n_sentences]
    if cfg.max_train_units:
        items = items[:cfg.max_train_units]
    if not items:
        raise ValueError(f"LitSeg-Lite's training corpus ({cfg.train_data()}) has no units")
    return books, items


# ----------------------------------------------------------------------------------- chunks
def record_segments(record: dict[str, Any]) -> list[Segment]:
    return [Segment.from_json(s) for s in record["segments"]]


def records_to_chunks(books: Iterable[Book], records: Sequence[dict[str, Any]],
                      method: str = "litseg") -> list[Chunk]:
    """Reconstruct the chunk set of annotated units; checks full coverage per book."""
    by_id = {b.book_id: b for b in books}
    chunks: list[Chunk] = []
    per_book: dict[str, list[Chunk]] = {}
    for rec in records:
        book = by_id.get(rec["book_id"])
        if book is None:
            raise KeyError(f"annotation for unknown book {rec['book_id']!r}")
        unit = book.unit(rec["unit_id"])
        meta = {"fallback": rec["fallback"], "fallback_types": rec["fallback_types"],
                "model": rec["model"], "structured_output": rec["structured_output"]}
        cs = reconstruct_unit(book, unit, record_segments(rec), method, meta)
        chunks.extend(cs)
        per_book.setdefault(book.book_id, []).extend(cs)
    for book_id, cs in per_book.items():
        book = by_id[book_id]
        units = {c.unit_id for c in cs}
        partial = Book(book.book_id, book.title, book.dataset, book.text,
                       units=[u for u in book.units if u.unit_id in units])
        assert_full_coverage(partial, cs, method)
    return chunks
