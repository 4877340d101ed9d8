"""The one registry of segmenters: ``get_chunker(name)`` and ``chunk_units``.

Every segmenter — the baselines of notebook 04, LitSeg (notebook 02) and LitSeg-Lite (notebook 03)
— is a :class:`ChunkerSpec`: what it needs (rules only, an embedder or an LLM), which config holds
its options, how it runs on ``(book, unit)`` pairs and which config fields change its result.
:data:`ALL_METHODS` (the baselines), :data:`LLM_METHODS` and :data:`SEGMENTERS` (:mod:`litseg_nb.methods`)
are checked against it. :func:`chunk_units` runs any of them (the public :func:`litseg_nb.segment` uses it); the
cached per-book runner of the baselines (``run_chunker``, ``run_methods``, ``RunReport``) is
:mod:`litseg_nb.chunkers.book_runs`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import methods as _methods
from ..methods import ALL_METHODS, LLM_METHODS, METHOD_NAMES, SEGMENTERS  # noqa: F401
from ..schema import Book, Chunk, Unit, check_coverage
from .base import ChunkerError, load_tokenizer
from .lumber import lumber_chunks_batch
from .margin import margin_chunks_batch
from .merge import merge_unit_chunks
from .paragraph import paragraph_chunks
from .perplexity import perplexity_chunks
from .proposition import proposition_chunks_batch
from .recursive import make_recursive_splitter, recursive_chunks
from .semantic import semantic_chunks_many
from .token import token_chunks
from .texttiling import texttiling_chunks
from .c99 import c99_chunks

if TYPE_CHECKING:
    from .config import BaselinesConfig

STAGE = "04"
NEEDS = ("text", "embedder", "llm")
BASELINES_CONFIG = "litseg_nb.chunkers.config:BaselinesConfig"


@dataclass(frozen=True, kw_only=True)
class ChunkerSpec:
    """One segmenter of the registry (keyword-only: every field is named where it is declared)."""

    name: str
    needs: str  # "text" (rules only) | "embedder" | "llm"
    # (items, cfg, backend, embedder) -> (chunks per unit, extra counters); None for a "+merge" variant
    run: Callable[..., tuple[list[list[Chunk]], dict[str, int]]] | None
    params: tuple[str, ...] = ()  # config fields that change the result (cache key)
    base: str | None = None  # for "+merge": the method whose chunks are merged (dynamic merge)
    config: str = BASELINES_CONFIG  # "module:Class" of the config holding its options
    internal: bool = False  # a building block of another method, not a method of its own

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise ValueError(f"{self.name}: needs must be one of {NEEDS}, got {self.needs!r}")
        if (self.run is None) == (self.base is None):
            raise ValueError(f"{self.name}: give exactly one of run and base")

    @property
    def needs_llm(self) -> bool:
        return self.needs == "llm"

    @property
    def needs_embedder(self) -> bool:
        return self.needs == "embedder"

    @property
    def is_baseline(self) -> bool:
        return self.config == BASELINES_CONFIG

    def config_class(self) -> type:
        import importlib

        module, name = self.config.split(":")
        return getattr(importlib.import_module(module), name)


def _per_unit(fn: Callable[[Book, Unit], list[Chunk]]):
    def run(items, cfg, backend, embedder):
        return [fn(b, u) for b, u in items], {}
    return run


def _token(items, cfg, backend, embedder):
    tok = load_tokenizer(cfg.tokenizer, backend)
    return [token_chunks(b, u, tok, cfg.token_chunk_size, cfg.token_chunk_overlap) for b, u in items], {}


def _recursive(items, cfg, backend, embedder):
    sp = make_recursive_splitter(cfg.recursive_chunk_size, cfg.recursive_chunk_overlap, cfg.recursive_separators)
    return [recursive_chunks(b, u, sp, cfg.recursive_chunk_overlap) for b, u in items], {}


def _semantic(items, cfg, backend, embedder):
    if embedder is None:
        raise ChunkerError("semantic chunker needs an embedder (litseg_nb.embeddings.load_embedder)")
    return semantic_chunks_many(items, embedder, cfg.semantic_breakpoint_percentile, cfg.semantic_buffer_size), {}


def _paragraph(items, cfg, backend, embedder):
    return [paragraph_chunks(b, u) for b, u in items], {}


def _counted(fn, knobs):
    """A per-unit rules-only segmenter taking config knobs, its ``too_short`` units counted."""
    def run(items, cfg, backend, embedder):
        stats: dict[str, int] = {}
        return [fn(b, u, *(getattr(cfg, k) for k in knobs), stats=stats) for b, u in items], stats
    return run


def _max_context(cfg: "BaselinesConfig") -> int:
    return cfg.perplexity_max_context or cfg.llm.max_model_len


def _perplexity_at(threshold_field: str, method: str):
    def run(items, cfg, backend, embedder):
        from ..llm.base import UsageTag

        thr = getattr(cfg, threshold_field)
        return [perplexity_chunks(b, u, thr, cfg.perplexity_dynamic_overlap, backend, _max_context(cfg),
                                  cfg.perplexity_block_tokens, UsageTag(method, b.book_id, STAGE), method=method)
                for b, u in items], {}
    return run


def _margin(items, cfg, backend, embedder):
    return margin_chunks_batch(items, backend, cfg.margin_threshold_window, cfg.margin_max_left_tokens,
                               STAGE), {}


def _lumber(items, cfg, backend, embedder):
    chunks, stats = lumber_chunks_batch(items, backend, cfg.lumber_budget_tokens, cfg.lumber_max_retries,
                                        cfg.lumber_retry_temperature, cfg.lumber_max_new_tokens,
                                        cfg.lumber_reference_mode, STAGE)
    return chunks, {"fallbacks": sum(s.fallbacks for s in stats),
                    "invalid_replies": sum(sum(s.invalid.values()) for s in stats)}


def _completion(items, cfg, backend, embedder):
    """Meta-Chunking's semantic completion (chunkers/completion.py) of perplexity+merge chunks."""
    from .completion import complete_book_chunks

    if cfg.completion_related_chunks and embedder is None:
        raise ChunkerError("perplexity+merge+completion picks related chunks by embedding: give an embedder "
                           "or set completion_related_chunks=0 (neighbouring chunks)")
    base, _ = chunk_units("perplexity+merge", items, cfg, backend, embedder)
    out, fallbacks, invalid = [], 0, 0
    for book in {id(b): b for b, _ in items}.values():
        done, st = complete_book_chunks(
            book, [c for c in base if c.book_id == book.book_id], backend, "perplexity+merge+completion", embedder,
            cfg.completion_max_new_tokens, cfg.completion_max_items, cfg.completion_min_score,
            cfg.completion_related_chunks, cfg.completion_context_chars, cfg.completion_index_summary, STAGE, cfg.seed)
        out.extend(done)
        fallbacks += st.rejected_rewrites + st.empty_summaries
        invalid += st.no_items + st.invalid_scores
    return _per_unit_lists(items, out), {"fallbacks": fallbacks, "invalid_replies": invalid}


def _proposition(items, cfg, backend, embedder):
    chunks, fallbacks = proposition_chunks_batch(items, backend, cfg.proposition_max_new_tokens,
                                                 cfg.proposition_max_retries, STAGE)
    return chunks, {"fallbacks": fallbacks}


def _per_unit_lists(items: Sequence[tuple[Book, Unit]], chunks: Sequence[Chunk]) -> list[list[Chunk]]:
    by_unit: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
    return [by_unit.get((b.book_id, u.unit_id), []) for b, u in items]


def _litseg(items, cfg, backend, embedder):
    """LitSeg (notebook 02's method): optional length calibration (per dataset, on a seeded sample), then 3 stages."""
    from ..litseg.calibrate import measure_length_reference
    from ..litseg.pipeline import annotate_units, records_to_chunks

    reference = cfg.length_reference
    if cfg.calibrate:
        reference = measure_length_reference(items, backend, cfg, progress=True)["length_reference"]
    run = annotate_units(items, backend, cfg, length_reference=reference, progress=True)
    books = list({id(b): b for b, _ in items}.values())
    chunks = records_to_chunks(books, run.records)
    return _per_unit_lists(items, chunks), {"fallbacks": sum(1 for r in run.records if r["fallback"] not in (None, "none")),
                                            "length_reference": reference}


def _lite(items, cfg, backend, embedder):
    """LitSeg-Lite (notebook 03's student): one pass with LitSeg's validation, retries and fallback."""
    from ..lite.segmenter import LiteSegmenter

    seg = LiteSegmenter(backend, max_new_tokens=cfg.infer_max_new_tokens, retries=cfg.infer_retries, seed=cfg.seed)
    chunks, results = seg.segment_units(items, progress=True)
    return _per_unit_lists(items, chunks), {"fallbacks": sum(1 for r in results if r.fallback != "none")}


_PPL = ("perplexity_dynamic_overlap", "perplexity_max_context", "perplexity_block_tokens")
_LUMBER = ("lumber_budget_tokens", "lumber_max_retries", "lumber_retry_temperature", "lumber_max_new_tokens",
           "lumber_reference_mode")
_SPECS = (
    ChunkerSpec(name="token", needs="text", run=_token, params=("tokenizer", "token_chunk_size", "token_chunk_overlap")),
    ChunkerSpec(name="recursive", needs="text", run=_recursive,
                params=("recursive_chunk_size", "recursive_chunk_overlap", "recursive_separators")),
    ChunkerSpec(name="semantic", needs="embedder", run=_semantic,
                params=("semantic_breakpoint_percentile", "semantic_buffer_size")),
    ChunkerSpec(name="paragraph", needs="text", run=_paragraph),
    ChunkerSpec(name="texttiling", needs="text", run=_counted(texttiling_chunks, ("texttiling_w", "texttiling_k")),
                params=("texttiling_w", "texttiling_k")),
    ChunkerSpec(name="c99", needs="text", run=_counted(c99_chunks, ("c99_mask", "c99_c")), params=("c99_mask", "c99_c")),
    ChunkerSpec(name="perplexity", needs="llm", run=_perplexity_at("perplexity_threshold", "perplexity"),
                params=("perplexity_threshold", *_PPL)),
    ChunkerSpec(name="margin", needs="llm", run=_margin, params=("margin_threshold_window", "margin_max_left_tokens")),
    ChunkerSpec(name="lumber", needs="llm", run=_lumber, params=_LUMBER),
    ChunkerSpec(name="perplexity+merge", needs="llm", run=None, base="perplexity@merge-base"),
    ChunkerSpec(name="margin+merge", needs="llm", run=None, base="margin"),
    ChunkerSpec(name="lumber+merge", needs="llm", run=None, base="lumber"),
    ChunkerSpec(name="proposition", needs="llm", run=_proposition,
                params=("proposition_max_new_tokens", "proposition_max_retries")),
    # Meta-Chunking §3.2 / App. C: semantic completion of the perplexity+merge chunks
    ChunkerSpec(name="perplexity+merge+completion", needs="llm", run=_completion,
                params=("perplexity_merge_threshold", *_PPL, "merge_target_tokens", "tokenizer", "seed",
                        "completion_max_new_tokens", "completion_max_items", "completion_min_score",
                        "completion_related_chunks", "completion_context_chars", "completion_index_summary")),
    # Meta-Chunking App. F: perplexity chunking at θ = 0 before the dynamic merge
    ChunkerSpec(name="perplexity@merge-base", needs="llm", internal=True,
                run=_perplexity_at("perplexity_merge_threshold", "perplexity"),
                params=("perplexity_merge_threshold", *_PPL)),
    ChunkerSpec(name="litseg", needs="llm", run=_litseg, config="litseg_nb.litseg.config:LitSegConfig"),
    ChunkerSpec(name="litseg-lite", needs="llm", run=_lite, config="litseg_nb.lite.config:LiteConfig"),
)
REGISTRY: dict[str, ChunkerSpec] = {s.name: s for s in _SPECS}
# the names (ALL_METHODS: notebook 04's baselines in table order, LLM_METHODS, SEGMENTERS: the paper's
# segmenters, METHOD_NAMES) live in litseg_nb.methods, below the configs; they must be what the specs give
_DERIVED = {"ALL_METHODS": tuple(s.name for s in _SPECS if s.is_baseline and not s.internal),
            "SEGMENTERS": tuple(s.name for s in _SPECS if not s.is_baseline)}
_DERIVED["LLM_METHODS"] = tuple(m for m in _DERIVED["ALL_METHODS"] if REGISTRY[m].needs_llm)
for _name, _names in _DERIVED.items():
    if getattr(_methods, _name) != _names:
        raise ImportError(f"litseg_nb.methods.{_name} {getattr(_methods, _name)} differs from the registry's "
                          f"specs {_names}: update litseg_nb/methods.py")


LIBRARY_CONFIG = "litseg_nb.chunkers.library:LibraryConfig"


def _library_spec(name: str) -> ChunkerSpec:
    """``lib:<preset>`` / ``lib:<library>.<Class>``: a third-party splitter (chunkers/library.py)."""
    from .library import library_chunks, needs_of

    def run(items, cfg, backend, embedder):
        return library_chunks(name, items, cfg, backend, embedder)

    return ChunkerSpec(name=name, needs=needs_of(name), run=run, config=LIBRARY_CONFIG)


def get_chunker(name: str) -> ChunkerSpec:
    """The registered segmenter ``name`` (one of :data:`METHOD_NAMES`, or a library splitter
    ``lib:<preset>`` / ``lib:<library>.<Class>``: :mod:`litseg_nb.chunkers.library`)."""
    if isinstance(name, str) and name.startswith("lib:"):
        return _library_spec(name)
    spec = REGISTRY.get(name)
    if spec is None or spec.internal:
        raise ChunkerError(f"unknown chunker {name!r}; known: {', '.join(METHOD_NAMES)}, or lib:<preset> / "
                           f"lib:<library>.<Class> (python -m litseg_nb segment --help)")
    return spec


def chunk_units(name: str, items: Sequence[tuple[Book, Unit]], cfg: Any, backend: Any = None,
                embedder: Any = None, tokenizer: Any = None) -> tuple[list[Chunk], dict[str, Any]]:
    """Run segmenter ``name`` on ``(book, unit)`` pairs with ``cfg`` (its spec's config class); no cache.

    Returns the chunks (coverage of every unit checked) and the method's counters (fallbacks, ...).
    """
    spec = get_chunker(name)
    if not isinstance(cfg, spec.config_class()):
        raise ChunkerError(f"{name} takes a {spec.config.split(':')[1]}, got {type(cfg).__name__}")
    runner = REGISTRY[spec.base] if spec.base else spec
    if runner.needs_llm and backend is None:
        raise ChunkerError(f"{name} needs an LLM backend (litseg_nb.llm.make_backend(cfg.llm))")
    if runner.needs_embedder and embedder is None:
        raise ChunkerError(f"{name} needs an embedder (litseg_nb.embeddings.load_embedder(cfg.embedding))")
    per_unit, extra = runner.run(list(items), cfg, backend, embedder)
    if spec.base:
        tok = tokenizer or load_tokenizer(cfg.tokenizer, backend)
        per_unit = [merge_unit_chunks(b, u, cs, cfg.merge_target_tokens, tok.count, name)
                    for (b, u), cs in zip(items, per_unit)]
    chunks = []
    for (b, u), cs in zip(items, per_unit):
        rep = check_coverage(u, cs)
        if not rep.ok:
            raise ChunkerError(f"{name} on book {b.book_id!r} unit {u.unit_id}: missing sentences "
                               f"{list(rep.missing)[:20]} invalid {list(rep.out_of_range)[:20]}")
        chunks.extend(cs)
    return chunks, extra
