"""The LitSeg annotation pipeline (paper section 3.1.2, prompts of Appendix E.1).

Three stages per unit, batched across units; an invalid reply is retried, then the paper's fallbacks apply
(counted). A backend error stops the run. One record per unit is appended when finished, so a rerun resumes."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..llm.base import LLMError, SamplingParams, UsageTag
from ..llm.replies import answer_text, replace_lone_surrogates
from ..llm.request_cache import reject_replies
from ..core.schema import Book, Chunk, Span, Unit, assert_full_coverage, chunk_id, write_jsonl
from .config import LitSegConfig
from .prompting import (PAPER_LENGTH_REFERENCE, SCHEMA_VERSION, STAGES, LengthReference, reference_for,
                        segment_budget, segment_floor, stage_json_schema, stage_user_prompt, system_prompt)
from .validate import (FinalSegmentation, Segment, ValidationResult, extract_json, finalize_segments,
                       parse_json_reply, validate_segments, validate_stage1, validate_stage2)
from ..core.progress import bar as progress_bar
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
    structured_output: bool


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
    """Hash of everything that decides a unit's annotation except the unit itself."""
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
    """Run LitSeg on ``(book, unit)`` pairs and return one record per unit (resumable with ``annotations_path``).

    ``length_reference``: one value, ``None`` (no length constraint: calibration) or dataset -> value.
    ``batch_by_book=False`` sends each stage attempt as ONE chat call over all books (paired §4.4 timing).
    """

    t0 = time.perf_counter()
    if hasattr(backend, "annotate_books"):  # Ray: the engine is the annotator's
        cfg = cfg.replace(llm=backend.cfg.llm.to_dict())
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
        key = _sha(f"{rkey}|{book.book_id}|{unit.unit_id}|{_sha(content)}")[:24]
        # stage 3's schema: the fewest segments a unit may decode (0 = no floor), capped by its token budget
        floor = segment_floor(unit.n_sentences, ref, cfg.min_segments) if structured else 0
        record = {
            "version": ANNOTATION_VERSION, "key": key, "run_key": rkey, "method": method, "book_id": book.book_id,
            "unit_id": unit.unit_id, "unit_title": unit.title, "unit_ordinal": unit.ordinal,
            "n_sentences": unit.n_sentences, "chapter_content": content, "model": getattr(backend, "model_id", ""),
            "backend": getattr(backend, "name", ""), "structured_output": structured, "length_reference": ref,
            "max_retries": retries, "status": "running", "stages": {s: {"attempts": []} for s in STAGES},
            "segment_floor": min(floor, segment_budget(cfg.stage_max_new_tokens("stage3"))[1]) if floor else 0,
            **_reference_fields(book, per_dataset, references)}
        jobs.append(_Job(book, unit, key, content, record, system))

    done: dict[str, dict[str, Any]] = {}
    if annotations_path is not None:
        fields = {j.key: _reference_fields(j.book, per_dataset, references) for j in jobs}
        for rec in read_annotations(annotations_path):
            if rec.get("status") == "done" and rec.get("key") in fields:
                # the key fixes the prompt and the unit; the fields say whose value it is in THIS run
                done[rec["key"]] = {**rec, **fields[rec["key"]]}
    todo = [j for j in jobs if j.key not in done]
    ledger = getattr(backend, "ledger", None)
    # resumed units keep the cost recorded when they were annotated, as cache hits: the usage equals a cold run's
    for rec, stage in ((done[j.key], s) for j in jobs if ledger is not None and j.key in done for s in STAGES):
        atts = [a for a in rec["stages"][stage]["attempts"] if a.get("text") is not None]
        if atts:
            ledger.replay(UsageTag(method, rec["book_id"], stage), {"calls": len(atts), **{
                k: sum(int(a.get(k) or 0) for a in atts)
                for k in ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")},
                "latency_s": sum(float(a.get("latency_s") or 0.0) for a in atts)})
    group = cfg.unit_group_size or len(todo) or 1
    bar = progress_bar(total=len(todo) * 3, progress=progress and bool(todo), desc=f"{method} stages")
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
                for g in range(0, len(sjobs), group):
                    batch = sjobs[g:g + group]
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
    finally:
        bar.close()
    records = [done[j.key] for j in jobs]
    if annotations_path is not None:
        write_jsonl(Path(annotations_path), records)
    return AnnotationRun(records, time.perf_counter() - t0, calls, len(jobs) - len(todo), structured)


def _reference_fields(book: Book, per_dataset: bool, references: dict[str, int] | None) -> dict[str, Any]:
    return {"dataset": book.dataset, "length_reference_dataset": book.dataset if per_dataset else None,
            "length_references": references}


def _run_stage(stage: str, jobs: list[_Job], backend: Any, cfg: LitSegConfig,
               structured: bool, retries: int, method: str, batch_by_book: bool = True) -> int:
    calls = 0
    for job in jobs:
        job.conv = [{"role": "system", "content": job.system},
                    {"role": "user", "content": stage_user_prompt(stage, job.content, job.unit.n_sentences,
                                                                  job.passed.get("step_1_result", ""),
                                                                  job.passed.get("step_2_result", ""))}]
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
            # constrained decoding: each unit's own schema (stage 3: indices bounded, its segment floor)
            call_params = dataclasses.replace(params, json_schemas=tuple(
                stage_json_schema(stage, params.max_new_tokens, j.unit.n_sentences, j.record["segment_floor"])
                for j in bjobs)) if structured else params
            # a backend error (LLMError) is not a reply: it propagates and stops the run, never a fallback
            gens = backend.chat([j.conv for j in bjobs], call_params, UsageTag(method, book_id, stage))
            if len(gens) != len(bjobs):
                raise LLMError(f"backend returned {len(gens)} generations for {len(bjobs)} prompts")
            for job, gen in zip(bjobs, gens):
                got = extract_json(gen.text, max_new_tokens=params.max_new_tokens)
                text, _ = replace_lone_surrogates(gen.text)  # as the record stores it (UTF-8), an oversize one cropped
                if got.reply.oversize and len(text) > got.reply.char_limit:
                    text = text[:got.reply.char_limit] + f"\n[... cropped: the reply had {len(text):,} characters]"
                unread = [got.error or "reply is not parsable JSON"] if got.obj is None else []
                vres = validate_segments(got.obj, job.unit.n_sentences) if stage == "stage3" else None
                if vres is not None and unread:
                    vres.errors = unread
                validator = validate_stage1 if stage == "stage1" else validate_stage2
                errors = vres.errors if vres is not None else unread or validator(got.obj)
                valid = not errors
                entry = {"attempt": attempt, "text": text, "error": None, "valid": valid,
                         "errors": errors, "prompt_tokens": gen.prompt_tokens,
                         "completion_tokens": gen.completion_tokens,
                         "cached_prompt_tokens": gen.cached_prompt_tokens or 0,
                         "reasoning_tokens": gen.reasoning_tokens,
                         "latency_s": gen.latency_s, "cache_hit": bool(gen.cache_hit),
                         "finish_reason": gen.finish_reason, "temperature": temperature,
                         "seed": params.seed, "reply_notes": got.notes,
                         "truncated_in_reasoning": got.reply.truncated_in_reasoning, "oversize": got.reply.oversize}
                if vres is None:
                    entry["parsed"] = got.obj if valid else None
                else:
                    job.last_validation = vres
                    if vres.segments or valid:
                        job.usable_validation, job.usable_text = vres, text
                job.record["stages"][stage]["attempts"].append(entry)
                if not valid:
                    still.append(job)
            # invalid replies leave the request cache (a rerun asks again); this run keeps them. Their keys
            # hold the params they were asked with (each unit's own schema under constrained decoding)
            bad = [k for k, j in enumerate(bjobs) if j in still]
            reject_replies(backend, [bjobs[k].conv for k in bad], call_params.subset(bad))
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
        passed = json.dumps(valid[-1]["parsed"], ensure_ascii=False)  # what the next stage sees: its JSON
    else:
        # the reply's answer is passed on, never its reasoning block (nor an oversize reply)
        texts = [answer_text(a["text"]) for a in attempts if a["text"] and not a.get("oversize")]
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
    parsed3 = parse_json_reply(job.usable_text or st3["attempts"][-1]["text"])
    rec["chapter_title"] = parsed3.get("chapter_title") if isinstance(parsed3, dict) else None
    tps = parsed3.get("step_3_turning_points") if isinstance(parsed3, dict) else None
    rec["turning_points"] = tps if isinstance(tps, list) else None
    rec["raw_outputs"] = {s: rec["stages"][s]["attempts"][-1]["text"] for s in STAGES}  # every stage has an attempt
    all_attempts = [a for s in STAGES for a in rec["stages"][s]["attempts"]]
    rec["tokens"] = {"calls": len(all_attempts), **{
        k: sum(a[f] for a in all_attempts)
        for k, f in (("prompt", "prompt_tokens"), ("completion", "completion_tokens"),
                     ("cached_prompt", "cached_prompt_tokens"), ("cache_hits", "cache_hit"))},
        "latency_s": round(sum(a["latency_s"] for a in all_attempts), 4)}
    rec["first_try_valid"] = {s: rec["stages"][s]["first_try_valid"] for s in STAGES}
    rec["retries"] = sum(rec["stages"][s]["retries"] for s in STAGES)
    rec["truncated_in_reasoning"] = sum(rec["stages"][s]["truncated_in_reasoning"] for s in STAGES)
    rec["stage_fallbacks"] = {s: rec["stages"][s]["fallback"] for s in ("stage1", "stage2")}
    rec["status"] = "done"  # a backend error raises: every attempt holds a reply
    rec["group_wall_share_s"] = round(wall_share, 4)


# ----------------------------------------------------------------------------------- Lite's training units
TRAIN_METHOD = "litseg-train"  # usage tag of the training annotations (not part of the §4.4 timing)


def training_items(cfg: LitSegConfig) -> tuple[list[Book], list[tuple[Book, Unit]]]:
    """LitSeg-Lite's training units: every unit of ``cfg.train_corpus`` (first ``cfg.max_train_units``)."""
    books = load_corpus(cfg.train_corpus)
    items = [(b, u) for b in books for u in b.units if u.n_sentences]
    if cfg.max_train_units:
        items = items[:cfg.max_train_units]
    if not items:
        raise ValueError(f"LitSeg-Lite's training corpus ({cfg.train_data()}) has no units")
    return books, items


# ----------------------------------------------------------------------------------- chunks
def _merge_spans(unit: Unit, indices: Sequence[int]) -> list[Span]:
    """One span per run of consecutive sentences (``indices`` sorted, distinct)."""
    runs = [list(g) for _, g in itertools.groupby(indices, key=lambda i, c=itertools.count(): i - next(c))]
    return [(unit.sentences[r[0] - 1].start, unit.sentences[r[-1] - 1].end) for r in runs]


def reconstruct_unit(book: Book, unit: Unit, segments: Sequence[Segment], method: str = "litseg",
                     metadata: dict[str, Any] | None = None) -> list[Chunk]:
    """A chunk per valid segment (3.1.2): subtitle, context before, main text (verbatim), context after."""
    return [_reconstruct_segment(book, unit, s, k, method, metadata) for k, s in enumerate(segments)]


def _reconstruct_segment(book: Book, unit: Unit, seg: Segment, ordinal: int, method: str,
                         metadata: dict[str, Any] | None) -> Chunk:
    n = unit.n_sentences
    if not 1 <= seg.from_idx <= seg.to_idx <= n:
        raise ValueError(f"{method}: segment {seg.from_idx}-{seg.to_idx} invalid for unit "
                         f"{unit.unit_id} of book {book.book_id} ({n} sentences)")
    ctx = sorted({c for c in seg.context_idx if not seg.from_idx <= c <= seg.to_idx})
    bad = [c for c in ctx if not 1 <= c <= n]
    if bad:
        raise ValueError(f"{method}: context indices {bad} invalid for unit {unit.unit_id} of book {book.book_id}")
    before = [c for c in ctx if c < seg.from_idx]
    after = [c for c in ctx if c > seg.to_idx]
    main_start = unit.sentences[seg.from_idx - 1].start
    main_end = unit.sentences[seg.to_idx - 1].end
    main_text = book.text[main_start:main_end]

    def ctx_text(indices: list[int]) -> str:
        return " ".join(unit.sentence_text(book.text, i) for i in indices)

    body = "\n".join(p for p in (ctx_text(before), main_text, ctx_text(after)) if p)
    subtitle = seg.subtitle.strip()
    text = f"{subtitle}\n{body}" if subtitle else body
    spans = _merge_spans(unit, before) + [(main_start, main_end)] + _merge_spans(unit, after)
    meta = {"main_span": [main_start, main_end], **(metadata or {})}
    return Chunk(
        book_id=book.book_id,
        unit_id=unit.unit_id,
        chunk_id=chunk_id(unit.unit_id, ordinal),
        method=method,
        from_idx=seg.from_idx,
        to_idx=seg.to_idx,
        spans=spans,
        text=text,
        main_text=main_text,
        context_idx=ctx,
        subtitle=subtitle or None,
        metadata=meta,
    )


def records_to_chunks(books: Iterable[Book], records: Sequence[dict[str, Any]],
                      method: str = "litseg") -> list[Chunk]:
    """Reconstruct the chunk set of annotated units; checks full coverage per book."""
    by_id = {b.book_id: b for b in books}
    chunks: list[Chunk] = []
    for rec in records:
        book = by_id.get(rec["book_id"])
        if book is None:
            raise KeyError(f"annotation for unknown book {rec['book_id']!r}")
        unit = book.unit(rec["unit_id"])
        meta = {"fallback": rec["fallback"], "fallback_types": rec["fallback_types"],
                "model": rec["model"], "structured_output": rec["structured_output"]}
        chunks.extend(reconstruct_unit(book, unit, [Segment.from_json(s) for s in rec["segments"]], method, meta))
    assert_units_covered(by_id.values(), chunks, method)
    return chunks


def assert_units_covered(books: Iterable[Book], chunks: Sequence[Chunk], method: str) -> None:
    """Full coverage of every unit that has chunks (:class:`~litseg_nb.core.schema.CoverageError` otherwise)."""
    by_book: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_book.setdefault(c.book_id, []).append(c)
    for book in books:
        if book.book_id in by_book:
            units = {c.unit_id for c in by_book[book.book_id]}
            partial = dataclasses.replace(book, units=[u for u in book.units if u.unit_id in units])
            assert_full_coverage(partial, by_book[book.book_id], method)
