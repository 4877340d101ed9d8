"""Notebook 04's runs of the baselines (cached per method and book: a run resumes) and of the ``lib:`` presets."""
from __future__ import annotations

import dataclasses
import hashlib
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..core.cache import StepCache
from ..chunk_sets import chunk_set_path
from ..chunkers.base import ChunkerError
from ..chunkers.library import PREFIX, LibraryConfig, is_library_method, needs_of, resolve
from ..llm.base import UsageTag
from ..core.schema import Book, Chunk, Unit, assert_full_coverage, save_chunks
from .registry import (STAGE, Method, Models, Segmentation, chunk_units, dynamic_merge, get_method, per_unit_lists,
                       segment_units)
from ..corpus import book_matches, select_units

if TYPE_CHECKING:
    from ..chunkers.config import BaselinesConfig


@dataclass
class BookRun:
    method: str
    book_id: str
    units: int
    sentences: int
    chunks: int
    seconds: float
    cached: bool
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallbacks: int = 0
    invalid_replies: int = 0


@dataclass
class RunReport:
    rows: list[BookRun] = field(default_factory=list)

    def to_frame(self):
        import pandas as pd

        cols = [f.name for f in dataclasses.fields(BookRun)]
        return pd.DataFrame([dataclasses.asdict(r) for r in self.rows], columns=cols)


def _unit_fingerprint(book: Book, unit: Unit) -> str:
    h = hashlib.sha256(unit.text(book.text).encode("utf-8"))
    h.update(repr((unit.start, [(s.start, s.end) for s in unit.sentences], list(unit.paragraphs))).encode())
    return h.hexdigest()


def _ledger_rows(backend: Any, method: str, book_id: str) -> dict[str, dict[str, Any]]:
    ledger = getattr(backend, "ledger", None)
    if ledger is None:
        return {}
    return {r["stage"]: r for r in ledger.rows() if r["method"] == method and r["book"] == book_id}


def _usage_delta(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for stage, row in after.items():
        old = before.get(stage, {})
        d = {k: v - old.get(k, 0) for k, v in row.items() if isinstance(v, (int, float)) and k != "cache_hits"}
        if d.get("calls"):
            out.append({"stage": stage, **d})
    return out


# ledger -> the step-cache keys whose usage it holds: a base reused by its +merge variant is counted once
_ACCOUNTED: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()


def _run_base(spec: Method, book: Book, units: list[Unit], cfg: "BaselinesConfig", backend: Any,
              embedder: Any, report: RunReport | None, report_as: str) -> list[Chunk]:
    models = Models(backend, embedder)
    cache = StepCache(
        f"chunks-{spec.name}",
        config=spec.key_parts(cfg, models),
        inputs={"book": book.book_id, "units": [(u.unit_id, _unit_fingerprint(book, u)) for u in units]},
        required=("chunks", "run"),
    )
    ledger = getattr(backend, "ledger", None)
    accounted = _ACCOUNTED.setdefault(ledger, set()) if ledger is not None else set()
    tag_method = spec.name.split("@")[0]
    if cache.exists():
        stored = cache.load()
        chunks = [Chunk.from_json(d) for d in stored["chunks"]]
        run = BookRun(**{**stored["run"], "method": report_as, "cached": True})
        if ledger is not None and (cache.key not in accounted or not _ledger_rows(backend, tag_method, book.book_id)):
            # a warm rerun keeps the cost recorded when the chunks were computed, flagged as cached
            for row in stored.get("usage") or []:
                ledger.replay(UsageTag(tag_method, book.book_id, row["stage"]), row)
            accounted.add(cache.key)
    else:
        rows_before = _ledger_rows(backend, tag_method, book.book_id)
        t0 = time.perf_counter()
        result = segment_units(spec, [(book, u) for u in units], cfg, models)  # coverage of every unit checked
        secs = time.perf_counter() - t0
        usage = _usage_delta(rows_before, _ledger_rows(backend, tag_method, book.book_id))
        d = next((row for row in usage if row["stage"] == STAGE), {})
        chunks = result.chunks
        run = BookRun(report_as, book.book_id, len(units), sum(u.n_sentences for u in units), len(chunks),
                      secs, False, d.get("calls", 0), d.get("prompt_tokens", 0), d.get("completion_tokens", 0),
                      result.fallbacks, result.invalid_replies)
        cache.save({"chunks": [c.to_json() for c in chunks], "run": dataclasses.asdict(run), "usage": usage})
        accounted.add(cache.key)
    if report is not None:
        report.rows.append(run)
    return chunks


def run_chunker(name: str, books: Sequence[Book], cfg: "BaselinesConfig", backend: Any = None,
                embedder: Any = None, report: RunReport | None = None) -> list[Chunk]:
    """Chunks of baseline ``name`` for ``books`` (every unit, or the unit selection), cached per (method, book)."""
    spec = get_method(name)
    if not spec.baseline:
        raise ChunkerError(f"{name} is not a notebook-04 baseline (use chunk_units or litseg_nb.segment)")
    semantic = "semantic" in (name, spec.base and spec.base.name)
    on_selection = spec.needs_llm or (semantic and cfg.semantic_units == "selection")
    if on_selection:
        by_book: dict[str, list[Unit]] = {}
        for b, u in select_units(books, cfg.selection):
            by_book.setdefault(b.book_id, []).append(u)
    else:
        by_book = {b.book_id: [u for u in b.units if u.n_sentences] for b in books
                   if not (cfg.semantic_books and semantic)
                   or book_matches(b, cfg.semantic_books)}
    out: list[Chunk] = []
    for book in books:
        units = by_book.get(book.book_id)
        if not units:
            continue
        chunks = _run_base(spec.base or spec, book, units, cfg, backend, embedder, report, name)
        if spec.base is not None:  # a +merge variant: the dynamic merge of its base's (cached) chunks
            items = [(book, u) for u in units]
            base = Segmentation(per_unit_lists(items, chunks))
            chunks = dynamic_merge(spec, items, base, spec.options_of(cfg), Models(backend)).chunks
        if not on_selection:  # (segment_units checked every unit's coverage either way)
            assert_full_coverage(book, chunks, name)
        out.extend(chunks)
    return out


def run_methods(books: Sequence[Book], cfg: "BaselinesConfig", backend: Any = None, embedder: Any = None,
                methods: Sequence[str] | None = None, report: RunReport | None = None,
                save_profile: str | None = None) -> dict[str, list[Chunk]]:
    from tqdm.auto import tqdm

    # deferred: tests patch litseg_nb.core.schema.save_chunks (read at call time)
    from ..core.schema import save_chunks

    out: dict[str, list[Chunk]] = {}
    for m in tqdm(list(methods or cfg.methods), desc="baselines"):
        out[m] = run_chunker(m, books, cfg, backend=backend, embedder=embedder, report=report)
        if save_profile:
            save_chunks(chunk_set_path(save_profile, m), out[m])
    return out


RUN_COLUMNS = ("method", "library", "needs", "books", "units", "chunks", "pieces", "exact", "normalised", "fuzzy",
               "not_found", "gap_chunks", "library_coverage", "overlap", "llm_calls", "llm_fallbacks",
               "invalid_replies", "seconds", "note")


def run_library_presets(books: Sequence[Book], cfg: LibraryConfig, presets: Sequence[str], backend: Any = None,
                        embedder: Any = None, llm_items: Sequence[tuple[Book, Unit]] = (),
                        save_profile: str | None = None):
    """Run the ``lib:`` presets on the books ``cfg.books`` names, LLM presets on ``llm_items``: (sets, table)."""
    import pandas as pd
    from tqdm.auto import tqdm

    sets, rows = {}, []
    for name in tqdm(list(presets), desc="library presets"):
        name = name if is_library_method(name) else PREFIX + name
        need = needs_of(name)
        if need == "llm" or (need == "embedder" and cfg.embedding_units == "selection"):
            items = list(llm_items)
        else:
            items = [(b, u) for b in books if not cfg.books or book_matches(b, cfg.books)
                     for u in b.units if u.n_sentences]
        if not items:  # e.g. a chunkers subset without LLM methods: no unit selection was made
            rows.append({"method": name, "library": resolve(name)[0], "needs": need, "units": 0, "chunks": 0,
                         "note": "not run: no units (the LLM unit selection is empty)"})
            continue
        t0 = time.perf_counter()
        chunks, extra = chunk_units(name, items, cfg, backend=backend, embedder=embedder)
        sets[name] = chunks
        al = extra.get("alignment", {})
        rows.append({"method": name, "library": resolve(name)[0], "needs": need,
                     "books": len({b.book_id for b, _ in items}), "units": len(items), "chunks": len(chunks),
                     **{k: al.get(k) for k in ("pieces", "exact", "normalised", "not_found", "gap_chunks", "overlap")},
                     "fuzzy": al.get("anchored"), "library_coverage": al.get("coverage"),
                     "llm_calls": extra.get("genie_calls", 0),
                     "llm_fallbacks": extra.get("genie_fallbacks", 0),
                     "invalid_replies": extra.get("invalid_replies", 0), "seconds": time.perf_counter() - t0,
                     "note": "unit selection" if len(items) == len(llm_items) and need != "text" else ""})
        if save_profile:
            save_chunks(chunk_set_path(save_profile, name), chunks)
    return sets, pd.DataFrame(rows, columns=RUN_COLUMNS)
