"""The LitSeg-Lite chunker: ONE model call per unit, then LitSeg's validation, fallback, reconstruction.

:class:`LiteSegmenter` takes any backend of the LLM layer (normally an ``hf``/``vllm`` backend on the
merged Lite model folder written by :func:`litseg_nb.lite.train.save_merged_model`), sends the
Appendix E.2 system prompt plus the sentence-indexed unit, and reads ``step3.segments`` from the
reply. Everything after the call is shared with LitSeg: :func:`~litseg_nb.litseg.validate.validate_segments`
(dual-level validation), up to ``infer_retries`` retries of an invalid reply (sampled, new seed),
:func:`~litseg_nb.litseg.validate.finalize_segments` (the paper's fallback chain, counted by type)
and :func:`~litseg_nb.litseg.reconstruct.reconstruct_unit`. The chunks are in the shared result
schema with ``method="litseg-lite"``.

The system prompt carries the teacher's length reference of the unit's dataset (``length_reference``:
one value, or the teacher's per-dataset calibration read from the annotations with
:func:`~litseg_nb.lite.data.annotation_length_reference`; a unit of a dataset it lacks is refused,
naming the unit, before any model call). A segmenter on a trained
Lite model folder refuses the units that model was trained on (:mod:`litseg_nb.lite.heldout`).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from ..core.artifacts import artifact_path
from ..config import Options
from ..litseg.prompting import reference_for, single_pass_json_schema
from ..litseg.pipeline import reconstruct_unit
from ..litseg.validate import (ValidationResult, extract_json, finalize_segments, segmentation_object,
                               validate_segments)
from ..llm.base import LLMBackend, SamplingParams, UsageTag
from ..llm.replies import read_reply
from ..core.schema import Book, Chunk, Unit, assert_full_coverage, save_chunks
from .data import LITE_SYSTEM_TEMPLATE, PAPER_LENGTH_REFERENCE, lite_conversation
from .heldout import TrainedUnits, assert_not_trained, model_record, refuse_trained_chunks
from .rewards import format_reward_breakdown

METHOD = "litseg-lite"


@dataclass(frozen=True)
class LiteOptions(Options):
    """LitSeg-Lite's options as a registered method (``litseg-lite``): the reply cap, the retries of an
    invalid reply and the seed of the sampled retries, taken from a
    :class:`~litseg_nb.lite.config.LiteConfig` (``infer_max_new_tokens``, ``infer_retries``, ``seed``)."""

    max_new_tokens: int = 4096
    retries: int = 3
    seed: int = 0

    @classmethod
    def of(cls, cfg: Any) -> "LiteOptions":  # noqa: D102
        return cls(max_new_tokens=cfg.infer_max_new_tokens, retries=cfg.infer_retries, seed=cfg.seed)

    def segmenter(self, backend: LLMBackend) -> "LiteSegmenter":
        """The :class:`LiteSegmenter` of these options on ``backend``."""
        return LiteSegmenter(backend, max_new_tokens=self.max_new_tokens, retries=self.retries, seed=self.seed)


def validate_single_pass(text: str, n_sentences: int, max_new_tokens: int | None = None) -> ValidationResult:
    """Validate a single-pass (E.2 or E.4) reply with the shared validator (``segmentation_object``
    finds the segments under any step). With ``max_new_tokens`` a reply longer than that budget
    allows is not parsed (see :mod:`litseg_nb.llm.replies`)."""
    got = extract_json(text, max_new_tokens=max_new_tokens)
    res = validate_segments(segmentation_object(got.obj), n_sentences)
    if got.obj is None and got.error:  # say why: cut inside reasoning, oversize, empty, not JSON
        res.errors = [got.error]
    return res


@dataclass
class LiteUnitResult:
    """Per-unit record of one Lite run (validation/retry history and the fallback used)."""

    book_id: str
    unit_id: str
    n_sentences: int
    replies: list[str] = field(default_factory=list)
    errors: list[list[str]] = field(default_factory=list)
    first_try_valid: bool = False
    attempts: int = 0
    fallback: str = "none"
    fallback_types: list[str] = field(default_factory=list)
    n_segments: int = 0
    format_reward_first: float = 0.0
    completion_tokens: int = 0
    seconds: float = 0.0  # wall-clock share of this run (a request-cache hit takes ~0 s)
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0  # completion tokens spent in a <think> block
    model_seconds: float = 0.0  # model latency recorded when each reply was computed
    cache_hits: int = 0  # replies served from the persistent request cache
    truncated_in_reasoning: int = 0  # replies cut off inside their <think> block (no answer)
    structured_output: bool = False  # decoding constrained to the E.2 JSON schema

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class LiteSegmenter:
    """Single-pass Lite segmentation with LitSeg's validation, retry, fallback and reconstruction."""

    def __init__(self, backend: LLMBackend, max_new_tokens: int = 4096, retries: int = 3,
                 retry_temperature: float = 0.7, seed: int = 0, method: str = METHOD,
                 system_template: str = LITE_SYSTEM_TEMPLATE,
                 length_reference: int | Mapping[str, int] = PAPER_LENGTH_REFERENCE, trained: TrainedUnits | None = None,
                 stage: str = "single-pass", batch_by_book: bool = True, structured: bool | None = None):
        self.backend, self.max_new_tokens, self.retries = backend, max_new_tokens, retries
        # constrained decoding of the E.2 reply (``single_pass_json_schema``: indices bounded by each
        # unit's sentence count): None = as the backend was built (``llm.structured_output``). The
        # E.4 ablation prompts ask for other JSON shapes: they are never constrained.
        so = getattr(backend, "structured_output", False) if structured is None else bool(structured)
        if so and structured and getattr(backend, "structured_output", True) is False:
            raise ValueError(f"structured output requested but backend {getattr(backend, 'name', '?')} was "
                             "built without it; build it with make_backend(cfg.llm.replace(structured_output=True))")
        self.structured = bool(so) and system_template == LITE_SYSTEM_TEMPLATE
        self.retry_temperature, self.seed, self.method = retry_temperature, seed, method
        self.system_template = system_template  # E.2 by default; the E.4 prompts for ablations
        self.length_reference = (dict(length_reference) if isinstance(length_reference, Mapping)
                                 else int(length_reference))  # one value, or dataset -> value
        # usage-ledger stage: "single-pass" for the chunk set that §4.4 times; evaluation runs use
        # their own stage name so notebook 08 never mixes them in
        self.stage = stage
        # one chat call per book and attempt (usage per book), or one per attempt over every book
        # (batch_by_book=False: notebook 08's paired §4.4 measurement, the same request list as LitSeg's)
        self.batch_by_book = batch_by_book
        # the units the model was trained on: from its folder (a merged Lite model) plus any given
        self.trained = (model_record(getattr(backend, "model_id", "")) or TrainedUnits()).union(trained)

    def segment_units(self, pairs: Sequence[tuple[Book, Unit]], progress: bool = False
                      ) -> tuple[list[Chunk], list[LiteUnitResult]]:
        """Segment every ``(book, unit)``; attempts are batched across the units still invalid."""
        assert_not_trained(pairs, self.trained, f"{self.method} on {getattr(self.backend, 'model_id', '?')}")
        for book, unit in pairs:  # every unit's dataset has a length reference (else: an error naming it)
            reference_for(self.length_reference, book, unit)
        results = [LiteUnitResult(b.book_id, u.unit_id, u.n_sentences) for b, u in pairs]
        last: list[ValidationResult | None] = [None] * len(pairs)
        todo = list(range(len(pairs)))
        for attempt in tqdm(range(self.retries + 1), desc="litseg-lite attempts", disable=not progress):
            if not todo:
                break
            params = SamplingParams(max_new_tokens=self.max_new_tokens,
                                    temperature=0.0 if attempt == 0 else self.retry_temperature,
                                    seed=self.seed + attempt)
            schemas = {i: single_pass_json_schema(self.max_new_tokens, pairs[i][1].n_sentences) for i in todo} \
                if self.structured else {}
            t0 = time.perf_counter()
            by_book: dict[str, list[int]] = {}
            for i in todo:  # one call per unit, batched per book (usage tags carry the book)
                by_book.setdefault(pairs[i][0].book_id if self.batch_by_book else "", []).append(i)
            got: dict[int, Any] = {}
            for book_id, idx in by_book.items():
                tag = UsageTag(method=self.method, book=book_id, stage=self.stage)
                convs = [lite_conversation(*pairs[i], self.system_template, self.length_reference) for i in idx]
                call = replace(params, json_schemas=tuple(schemas[i] for i in idx)) if schemas else params
                gens_b = self.backend.chat(convs, call, tag)
                got.update(zip(idx, gens_b))
            gens = [got[i] for i in todo]
            dt = (time.perf_counter() - t0) / max(1, len(todo))
            still = []
            for i, gen in zip(todo, gens):
                r = results[i]
                res = validate_single_pass(gen.text, r.n_sentences, self.max_new_tokens)
                r.replies.append(gen.text)
                r.errors.append(list(res.errors))
                r.attempts += 1
                r.completion_tokens += gen.completion_tokens
                r.prompt_tokens += gen.prompt_tokens
                r.cached_prompt_tokens += gen.cached_prompt_tokens or 0
                r.reasoning_tokens += gen.reasoning_tokens
                r.model_seconds += gen.latency_s
                r.cache_hits += int(gen.cache_hit)
                r.truncated_in_reasoning += int(read_reply(gen.text).truncated_in_reasoning)
                r.seconds += dt
                if attempt == 0:
                    r.first_try_valid = res.ok
                    r.format_reward_first = format_reward_breakdown(gen.text, r.n_sentences,
                                                                    self.max_new_tokens)["total"]
                if last[i] is None or res.syntax_ok or not last[i].syntax_ok:
                    last[i] = res
                if not res.ok:
                    still.append(i)
            todo = still
        chunks: list[Chunk] = []
        for (book, unit), r, res in zip(pairs, results, last):
            final = finalize_segments(res, unit.n_sentences)
            r.fallback, r.fallback_types, r.n_segments = final.fallback, list(final.fallback_types), len(final.segments)
            r.structured_output = self.structured
            chunks.extend(reconstruct_unit(book, unit, final.segments, self.method,
                                           {"fallback": final.fallback, "attempts": r.attempts,
                                            "structured_output": self.structured}))
        return chunks, results


def check_and_save_chunks(profile: str, books: Sequence[Book], chunks: Sequence[Chunk],
                          name: str = METHOD):
    """Coverage proof for every segmented unit, then ``artifacts/chunks/<name>.jsonl``.

    Refuses (:class:`~litseg_nb.lite.heldout.TrainedUnitError`) a chunk set holding a unit any
    student of ``profile`` was trained on: the evaluated Lite chunk sets never contain one."""
    refuse_trained_chunks(name, chunks, profile, books)
    by_book: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_book.setdefault(c.book_id, []).append(c)
    for book in books:
        if book.book_id not in by_book:
            continue
        units = {c.unit_id for c in by_book[book.book_id]}
        sub = Book(book.book_id, book.title, book.dataset, book.text,
                   units=[u for u in book.units if u.unit_id in units])
        assert_full_coverage(sub, by_book[book.book_id], name)
    path = artifact_path(profile, "chunks", f"{name}.jsonl")
    save_chunks(path, list(chunks))
    return path


def results_frame(results: Sequence[LiteUnitResult]):
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in r.to_json().items() if k not in ("replies", "errors")}
                         for r in results])
