"""The one registry of segmentation methods: :func:`get_method` and :func:`segment_units`.

Every method — notebook 04's baselines, LitSeg (notebook 02), LitSeg-Lite (notebook 03) and any
library splitter ``lib:<preset>`` / ``lib:<library>.<Class>`` — is a :class:`~.contract.Method` of the
same shape (:mod:`.contract`): its options class (beside the method), one segment entry returning a
typed :class:`~.contract.Segmentation`, a cache key derived from its options. This module binds each
method's code to that shape; it sits above every method package (chunkers, litseg, lite) and imports
them, none of them imports it. The baselines' names and needs are declared once, below, in
:data:`litseg_nb.chunkers.config.BASELINES` (the configs and chunk sets need them); every one of them
is registered here, and a method registered without a declared name (or the reverse) stops the import.

:func:`segment_units` runs any method on ``(book, unit)`` pairs (the public :func:`litseg_nb.segment`
uses it; :func:`chunk_units` is the same as ``(chunks, counters)``); the cached per-book runner of the
baselines is :mod:`.book_runs`.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..chunkers.base import ChunkerError, MergeOptions, load_tokenizer, merge_unit_chunks
from ..chunkers.config import ALL_METHODS, BASELINES
from ..chunkers.library import LibraryOptions, library_chunks, needs_of
from ..chunkers.llm_chunkers import (CompletionOptions, LumberOptions, MarginOptions, PropositionOptions,
                                     complete_book_chunks, lumber_chunks_batch, margin_chunks_batch,
                                     proposition_chunks_batch)
from ..chunkers.boundary_model import (BoundaryModelOptions, boundary_model_chunks, load_model, weights_path,
                                       with_digest)
from ..chunkers.perplexity import PerplexityOptions, perplexity_chunks
from ..chunkers.splitters import (ParagraphOptions, RecursiveOptions, SemanticOptions, TokenOptions,
                                  make_recursive_splitter, paragraph_chunks, recursive_chunks, semantic_chunks_many,
                                  token_chunks)
from ..chunkers.topic import C99Options, TextTilingOptions, c99_chunks, texttiling_chunks
from ..lite.segmenter import METHOD as LITE, LiteOptions
from ..litseg import segmenter as litseg_segmenter
from ..litseg.segmenter import METHOD as LITSEG, LitSegOptions
from ..llm.base import UsageTag
from ..core.schema import Book, Chunk, Unit, check_coverage
from .contract import Items, Method, Models, Segmentation, per_unit_lists

STAGE = "04"
BASELINES_CONFIG = "litseg_nb.chunkers.config:BaselinesConfig"
LIBRARY_CONFIG = "litseg_nb.chunkers.library:LibraryConfig"

#: the paper's segmenters (notebooks 02 and 03)
SEGMENTERS: tuple[str, ...] = (LITSEG, LITE)
#: every method name a chunk set can carry (also the order chunk sets are evaluated and tabled in)
METHOD_NAMES: tuple[str, ...] = ALL_METHODS + SEGMENTERS


def _tokenizer(options: Any, models: Models):
    return models.tokenizer or load_tokenizer(options.tokenizer, models.backend)


# ------------------------------------------------------------------ the segment entries of the baselines
def _token(items: Items, o: TokenOptions, models: Models) -> Segmentation:
    tok = _tokenizer(o, models)
    return Segmentation([token_chunks(b, u, tok, o.token_chunk_size, o.token_chunk_overlap) for b, u in items])


def _recursive(items: Items, o: RecursiveOptions, models: Models) -> Segmentation:
    sp = make_recursive_splitter(o.recursive_chunk_size, o.recursive_chunk_overlap, o.recursive_separators)
    return Segmentation([recursive_chunks(b, u, sp, o.recursive_chunk_overlap) for b, u in items])


def _semantic(items: Items, o: SemanticOptions, models: Models) -> Segmentation:
    if models.embedder is None:
        raise ChunkerError("semantic chunker needs an embedder (litseg_nb.llm.embeddings.load_embedder)")
    return Segmentation(semantic_chunks_many(items, models.embedder, o.semantic_breakpoint_percentile,
                                             o.semantic_buffer_size))


def _paragraph(items: Items, o: ParagraphOptions, models: Models) -> Segmentation:
    return Segmentation([paragraph_chunks(b, u) for b, u in items])


def _texttiling(items: Items, o: TextTilingOptions, models: Models) -> Segmentation:
    stats: dict[str, int] = {}  # too_short: units too short for TextTiling's blocks (one chunk)
    return Segmentation([texttiling_chunks(b, u, o.texttiling_w, o.texttiling_k, stats=stats) for b, u in items],
                        details=stats)


def _c99(items: Items, o: C99Options, models: Models) -> Segmentation:
    stats: dict[str, int] = {}
    return Segmentation([c99_chunks(b, u, o.c99_mask, o.c99_c, stats=stats) for b, u in items], details=stats)


def _boundary_model_options(cfg: Any) -> BoundaryModelOptions:
    """The boundary model's options, its weights file with the file's digest (part of the key)."""
    o = BoundaryModelOptions.of(cfg)
    return o.replace(boundary_model_weights=with_digest(o.boundary_model_weights))


def _boundary_model(items: Items, o: BoundaryModelOptions, models: Models) -> Segmentation:
    model = load_model(weights_path(o.boundary_model_weights))
    return Segmentation([boundary_model_chunks(b, u, o.boundary_target_words, o.boundary_min_sentences, model)
                         for b, u in items])


def _perplexity_options(merge_base: bool):
    """Perplexity's options from BaselinesConfig: the context 0 resolved to the LLM's ``max_model_len``
    (the key holds the value used); the merge base splits at ``perplexity_merge_threshold``."""
    def build(cfg: Any) -> PerplexityOptions:
        o = PerplexityOptions.of(cfg)
        changes: dict[str, Any] = {"perplexity_max_context": o.perplexity_max_context or cfg.llm.max_model_len}
        if merge_base:
            changes["perplexity_threshold"] = o.perplexity_merge_threshold
        return o.replace(**changes)
    return build


def _perplexity(items: Items, o: PerplexityOptions, models: Models) -> Segmentation:
    return Segmentation([perplexity_chunks(b, u, o.perplexity_threshold, o.perplexity_dynamic_overlap, models.backend,
                                           o.perplexity_max_context, o.perplexity_block_tokens,
                                           UsageTag("perplexity", b.book_id, STAGE), method="perplexity")
                         for b, u in items])


def _margin(items: Items, o: MarginOptions, models: Models) -> Segmentation:
    return Segmentation(margin_chunks_batch(items, models.backend, o.margin_threshold_window,
                                            o.margin_max_left_tokens, STAGE))


def _lumber(items: Items, o: LumberOptions, models: Models) -> Segmentation:
    chunks, stats = lumber_chunks_batch(items, models.backend, o.lumber_budget_tokens, o.lumber_max_retries,
                                        o.lumber_retry_temperature, o.lumber_max_new_tokens,
                                        o.lumber_reference_mode, STAGE)
    return Segmentation(chunks, fallbacks=sum(s.fallbacks for s in stats),
                        invalid_replies=sum(sum(s.invalid.values()) for s in stats))


def _proposition(items: Items, o: PropositionOptions, models: Models) -> Segmentation:
    chunks, fallbacks = proposition_chunks_batch(items, models.backend, o.proposition_max_new_tokens,
                                                 o.proposition_max_retries, STAGE)
    return Segmentation(chunks, fallbacks=fallbacks)


def _merge(method: Method, items: Items, base: Segmentation, o: MergeOptions, models: Models) -> Segmentation:
    """The dynamic merge of a ``+merge`` variant over its base method's chunks."""
    tok = _tokenizer(o, models)
    return Segmentation([merge_unit_chunks(b, u, cs, o.merge_target_tokens, tok.count, method.name)
                         for (b, u), cs in zip(items, base.per_unit)],
                        base.fallbacks, base.invalid_replies, dict(base.details))


# the internal building block of perplexity+merge (Meta-Chunking App. F: θ = 0 before the dynamic merge)
PERPLEXITY_MERGE_BASE = Method(name="perplexity@merge-base", needs="llm", options=PerplexityOptions,
                               config=BASELINES_CONFIG, run=_perplexity, build=_perplexity_options(True),
                               internal=True)
_PERPLEXITY = Method(name="perplexity", needs="llm", options=PerplexityOptions, config=BASELINES_CONFIG,
                     run=_perplexity, build=_perplexity_options(False), baseline=True)
_MARGIN = Method(name="margin", needs="llm", options=MarginOptions, config=BASELINES_CONFIG, run=_margin,
                 baseline=True)
_LUMBER = Method(name="lumber", needs="llm", options=LumberOptions, config=BASELINES_CONFIG, run=_lumber,
                 baseline=True)
_PERPLEXITY_MERGE = Method(name="perplexity+merge", needs="llm", options=MergeOptions, config=BASELINES_CONFIG,
                           base=PERPLEXITY_MERGE_BASE, baseline=True)


def _completion_check(o: CompletionOptions, models: Models) -> None:
    if o.completion_related_chunks and models.embedder is None:
        raise ChunkerError("perplexity+merge+completion picks related chunks by embedding: give an embedder "
                           "or set completion_related_chunks=0 (neighbouring chunks)")


def _completion(items: Items, o: CompletionOptions, models: Models, base: Segmentation) -> Segmentation:
    """Meta-Chunking's semantic completion (chunkers/llm_chunkers.py) of the perplexity+merge chunks (``base``)."""
    out, fallbacks, invalid = [], 0, 0
    for book in {id(b): b for b, _ in items}.values():
        done, st = complete_book_chunks(
            book, [c for c in base.chunks if c.book_id == book.book_id], models.backend, "perplexity+merge+completion",
            models.embedder, o.completion_max_new_tokens, o.completion_max_items, o.completion_min_score,
            o.completion_related_chunks, o.completion_context_chars, o.completion_index_summary, STAGE, o.seed)
        out.extend(done)
        fallbacks += st.rejected_rewrites + st.empty_summaries
        invalid += st.no_items + st.invalid_scores
    return Segmentation(per_unit_lists(items, out), fallbacks=fallbacks, invalid_replies=invalid)


# ------------------------------------------------------------------ the paper's segmenters
def _litseg(items: Items, o: LitSegOptions, models: Models) -> Segmentation:
    """LitSeg (notebook 02's method): the length reference resolved once (:func:`litseg.segmenter.prepare`)."""
    chunks, results, used = litseg_segmenter.segment_units(items, o, models.backend)
    return Segmentation(per_unit_lists(items, chunks), fallbacks=sum(1 for r in results if r.fallback != "none"),
                        details={"length_reference": used.length_reference})


def _litseg_prepare(items: Items, o: LitSegOptions, models: Models) -> LitSegOptions:
    return litseg_segmenter.prepare(items, o, models.backend)


def _lite(items: Items, o: LiteOptions, models: Models) -> Segmentation:
    """LitSeg-Lite (notebook 03's student): one pass with LitSeg's validation, retries and fallback."""
    chunks, results = o.segmenter(models.backend).segment_units(items, progress=True)
    return Segmentation(per_unit_lists(items, chunks), fallbacks=sum(1 for r in results if r.fallback != "none"))


_METHODS: tuple[Method, ...] = (
    Method(name="token", needs="text", options=TokenOptions, config=BASELINES_CONFIG, run=_token, baseline=True),
    Method(name="recursive", needs="text", options=RecursiveOptions, config=BASELINES_CONFIG, run=_recursive,
           baseline=True),
    Method(name="semantic", needs="embedder", options=SemanticOptions, config=BASELINES_CONFIG, run=_semantic,
           baseline=True),
    Method(name="paragraph", needs="text", options=ParagraphOptions, config=BASELINES_CONFIG, run=_paragraph,
           baseline=True),
    Method(name="texttiling", needs="text", options=TextTilingOptions, config=BASELINES_CONFIG, run=_texttiling,
           baseline=True),
    Method(name="c99", needs="text", options=C99Options, config=BASELINES_CONFIG, run=_c99, baseline=True),
    Method(name="boundary-model", needs="text", options=BoundaryModelOptions, config=BASELINES_CONFIG,
           run=_boundary_model, build=_boundary_model_options, baseline=True),
    _PERPLEXITY,
    _MARGIN,
    _LUMBER,
    _PERPLEXITY_MERGE,
    Method(name="margin+merge", needs="llm", options=MergeOptions, config=BASELINES_CONFIG, base=_MARGIN,
           baseline=True),
    Method(name="lumber+merge", needs="llm", options=MergeOptions, config=BASELINES_CONFIG, base=_LUMBER,
           baseline=True),
    Method(name="proposition", needs="llm", options=PropositionOptions, config=BASELINES_CONFIG, run=_proposition,
           baseline=True),
    # Meta-Chunking §3.2 / App. C: semantic completion of the perplexity+merge chunks
    Method(name="perplexity+merge+completion", needs="llm", options=CompletionOptions, config=BASELINES_CONFIG,
           run=_completion, check=_completion_check, uses=(_PERPLEXITY_MERGE,), baseline=True),
    PERPLEXITY_MERGE_BASE,
    Method(name=LITSEG, needs="llm", options=LitSegOptions, config="litseg_nb.litseg.config:LitSegConfig",
           run=_litseg, prepare=_litseg_prepare, prepares_when=litseg_segmenter.calibrates),
    Method(name=LITE, needs="llm", options=LiteOptions, config="litseg_nb.lite.config:LiteConfig", run=_lite),
)
REGISTRY: dict[str, Method] = {m.name: m for m in _METHODS}

# the baselines' names and needs are declared once, below the registry (chunkers.config.BASELINES); what
# is registered must be exactly that, in that order (a method added on one side only stops the import)
_registered = {m.name: m.needs for m in _METHODS if m.baseline}
if list(_registered.items()) != list(BASELINES.items()) or len(REGISTRY) != len(_METHODS):
    raise ImportError(f"the registry's baselines {_registered} differ from litseg_nb.chunkers.config.BASELINES "
                      f"{BASELINES} (names, needs or order), or a name is registered twice: register one "
                      "method for each declared baseline")


def _library_method(name: str) -> Method:
    """``lib:<preset>`` / ``lib:<library>.<Class>``: a third-party splitter (chunkers/library.py)."""
    def run(items: Items, o: LibraryOptions, models: Models) -> Segmentation:
        per_unit, extra = library_chunks(name, items, o, models.backend, models.embedder)
        extra = dict(extra)
        return Segmentation(per_unit, fallbacks=extra.pop("fallbacks", 0),
                            invalid_replies=extra.pop("invalid_replies", 0), details=extra)

    return Method(name=name, needs=needs_of(name), options=LibraryOptions, config=LIBRARY_CONFIG, run=run)


def get_method(name: str) -> Method:
    """The registered method ``name`` (one of :data:`METHOD_NAMES`, or a library splitter
    ``lib:<preset>`` / ``lib:<library>.<Class>``: :mod:`litseg_nb.chunkers.library`)."""
    if isinstance(name, str) and name.startswith("lib:"):
        return _library_method(name)
    method = REGISTRY.get(name)
    if method is None or method.internal:
        raise ChunkerError(f"unknown chunker {name!r}; known: {', '.join(METHOD_NAMES)}, or lib:<preset> / "
                           f"lib:<library>.<Class> (python -m litseg_nb segment --help)")
    return method


#: the former name of :func:`get_method`
get_chunker = get_method


def check_models(method: Method, models: Models) -> None:
    """A :class:`ChunkerError` when ``method`` (or its base) needs a model it was not given."""
    runner = method.base or method
    if runner.needs_llm and models.backend is None:
        raise ChunkerError(f"{method.name} needs an LLM backend (litseg_nb.llm.make_backend(cfg.llm))")
    if runner.needs_embedder and models.embedder is None:
        raise ChunkerError(f"{method.name} needs an embedder (litseg_nb.llm.embeddings.load_embedder(cfg.embedding))")


def _check(method: Method, cfg: Any, models: Models) -> None:
    if not isinstance(cfg, method.config_class()):
        raise ChunkerError(f"{method.name} takes a {method.config.split(':')[1]}, got {type(cfg).__name__}")
    check_models(method, models)


def prepare(method: Method, items: Items, cfg: Any, models: Models) -> Any:
    """The method's options for ``items`` (its prepare step over the whole input, if it has one)."""
    _check(method, cfg, models)
    options = method.options_of(cfg)
    return method.prepare(items, options, models) if method.prepare is not None else options


def run_prepared(method: Method, items: Items, cfg: Any, options: Any, models: Models) -> Segmentation:
    """One segment call with already prepared ``options`` (a ``+merge`` variant: its base, then the merge)."""
    if method.base is not None:
        base = run_prepared(method.base, items, cfg, method.base.options_of(cfg), models)
        return _merge(method, items, base, options, models)
    if method.check is not None:
        method.check(options, models)
    inputs = [segment_units(dep, items, cfg, models) for dep in method.uses]
    return method.run(items, options, models, *inputs)


def segment_units(method: Method | str, items: Items, cfg: Any, models: Models | None = None,
                  options: Any = None) -> Segmentation:
    """Run ``method`` on ``(book, unit)`` pairs with its stage config ``cfg``; no cache.

    ``options`` are the method's prepared options (:func:`prepare`; default: prepared here, on these
    items). The coverage of every unit is checked."""
    method = get_method(method) if isinstance(method, str) else method
    models = models or Models()
    _check(method, cfg, models)
    items = list(items)
    if options is None:
        options = prepare(method, items, cfg, models)
    result = run_prepared(method, items, cfg, options, models)
    for (b, u), cs in zip(items, result.per_unit):
        rep = check_coverage(u, cs)
        if not rep.ok:
            raise ChunkerError(f"{method.name} on book {b.book_id!r} unit {u.unit_id}: missing sentences "
                               f"{list(rep.missing)[:20]} invalid {list(rep.out_of_range)[:20]}")
    return result


def chunk_units(name: str, items: Sequence[tuple[Book, Unit]], cfg: Any, backend: Any = None,
                embedder: Any = None, tokenizer: Any = None) -> tuple[list[Chunk], dict[str, Any]]:
    """:func:`segment_units` as ``(chunks, counters)`` (coverage of every unit checked)."""
    result = segment_units(name, items, cfg, Models(backend, embedder, tokenizer))
    return result.chunks, result.counters()
