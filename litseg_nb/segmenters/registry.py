"""Every segmentation method behind one contract (needs, options, one segment entry), and the one registry.
A method's cache key is derived from its options, those of what it builds on, and its models.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..chunkers.base import ChunkerError, MergeOptions, load_tokenizer, merge_unit_chunks
from ..chunkers.llm_chunkers import (CompletionOptions, LumberOptions, MarginOptions, PropositionOptions,
                                     complete_book_chunks, lumber_chunks_batch, margin_chunks_batch,
                                     proposition_chunks_batch)
from ..chunkers.config import ALL_METHODS, BaselinesConfig
from ..chunkers.library import PRESETS, LibraryConfig, LibraryOptions, library_chunks, needs_of
from ..chunkers.boundary_model import (BoundaryModelOptions, boundary_model_chunks, load_model, weights_path,
                                       with_digest)
from ..chunkers.topic import C99Options, TextTilingOptions, c99_chunks, texttiling_chunks
from ..chunkers.splitters import (ParagraphOptions, RecursiveOptions, SemanticOptions, TokenOptions,
                                  make_recursive_splitter, paragraph_chunks, recursive_chunks, semantic_chunks_many,
                                  token_chunks)
from ..chunkers.perplexity import PerplexityOptions, perplexity_chunks
from ..config import Options
from ..lite.config import LiteConfig
from ..lite.segmenter import METHOD as LITE, LiteOptions
from ..litseg import segmenter as litseg_segmenter
from ..litseg.config import LitSegConfig
from ..litseg.segmenter import METHOD as LITSEG, LitSegOptions
from ..llm.base import UsageTag
from ..core.schema import Book, Chunk, Unit, check_coverage

Items = Sequence[tuple[Book, Unit]]


@dataclass(frozen=True)
class Models:
    """What a method is given besides its options; None = not given."""

    backend: Any = None
    embedder: Any = None

    def identity(self, needs: str, cfg: Any = None) -> dict[str, Any]:
        if needs == "text":
            return {}
        role, model = ("llm", self.backend) if needs == "llm" else ("embedding", self.embedder)
        return {role: getattr(model, "model_id", None) or getattr(getattr(cfg, role, None), "model", None)}


@dataclass
class Segmentation:
    """A method's result: ``per_unit[i]`` are the chunks of the i-th ``(book, unit)`` pair, with its counters."""

    per_unit: list[list[Chunk]]
    fallbacks: int = 0
    invalid_replies: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def chunks(self) -> list[Chunk]:
        return [c for cs in self.per_unit for c in cs]


@dataclass(frozen=True, kw_only=True)
class Method:
    """One registered method; a ``+merge`` variant has a ``base`` (whose chunks it merges) instead of a ``run``."""

    name: str
    needs: str
    options: type[Options]
    config: type = BaselinesConfig
    run: Callable[..., Segmentation] | None = None  # (items, options, models, *segmentations of uses)
    base: "Method | None" = None
    uses: tuple["Method", ...] = ()  # methods whose chunks ``run`` also gets
    build: Callable[[Any], Options] | None = None
    check: Callable[[Any, Models], None] | None = None
    prepare: Callable[[Items, Any, Models], Any] | None = None
    # when the prepare step depends on the input, given the stage config (None: whenever there is one)
    prepares_when: Callable[[Any], bool] | None = None
    internal: bool = False  # a building block of another method, not a method of its own

    @property
    def baseline(self) -> bool:
        return self.config is BaselinesConfig and not self.internal

    @property
    def needs_llm(self) -> bool:
        return self.needs == "llm"

    @property
    def needs_embedder(self) -> bool:
        return self.needs == "embedder"

    def whole_input(self, cfg: Any) -> bool:
        return self.prepare is not None and (self.prepares_when is None or bool(self.prepares_when(cfg)))

    def options_of(self, cfg: Any) -> Options:
        return (self.build or self.options.of)(cfg)

    def key_parts(self, cfg: Any, models: Models | None = None) -> dict[str, Any]:
        parts: dict[str, Any] = {"method": self.name, "options": self.options_of(cfg).to_dict()}
        deps = ([self.base] if self.base is not None else []) + list(self.uses)
        if deps:
            parts["builds_on"] = [dep.key_parts(cfg) for dep in deps]
        if models is not None:
            parts["models"] = models.identity(self.needs, cfg)
        return parts


def per_unit_lists(items: Items, chunks: Sequence[Chunk]) -> list[list[Chunk]]:
    by_unit: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
    return [by_unit.get((b.book_id, u.unit_id), []) for b, u in items]


STAGE = "04"

SEGMENTERS: tuple[str, ...] = (LITSEG, LITE)
#: every method name a chunk set can carry (also the order chunk sets are evaluated and tabled in)
METHOD_NAMES: tuple[str, ...] = ALL_METHODS + SEGMENTERS


def _token(items: Items, o: TokenOptions, models: Models) -> Segmentation:
    tok = load_tokenizer(o.tokenizer, models.backend)
    return Segmentation([token_chunks(b, u, tok, o.token_chunk_size, o.token_chunk_overlap) for b, u in items])


def _recursive(items: Items, o: RecursiveOptions, models: Models) -> Segmentation:
    sp = make_recursive_splitter(o.recursive_chunk_size, o.recursive_chunk_overlap, o.recursive_separators)
    return Segmentation([recursive_chunks(b, u, sp, o.recursive_chunk_overlap) for b, u in items])


def _semantic(items: Items, o: SemanticOptions, models: Models) -> Segmentation:
    return Segmentation(semantic_chunks_many(items, models.embedder, o.semantic_breakpoint_percentile,
                                             o.semantic_buffer_size))


def _texttiling(items: Items, o: TextTilingOptions, models: Models) -> Segmentation:
    stats: dict[str, int] = {}  # too_short: units too short for TextTiling's blocks (one chunk)
    return Segmentation([texttiling_chunks(b, u, o.texttiling_w, o.texttiling_k, stats=stats) for b, u in items],
                        details=stats)


def _c99(items: Items, o: C99Options, models: Models) -> Segmentation:
    stats: dict[str, int] = {}
    return Segmentation([c99_chunks(b, u, o.c99_mask, o.c99_c, stats=stats) for b, u in items], details=stats)


def _boundary_model_options(cfg: Any) -> BoundaryModelOptions:
    o = BoundaryModelOptions.of(cfg)
    return o.replace(boundary_model_weights=with_digest(o.boundary_model_weights))


def _boundary_model(items: Items, o: BoundaryModelOptions, models: Models) -> Segmentation:
    model = load_model(weights_path(o.boundary_model_weights))
    return Segmentation([boundary_model_chunks(b, u, o.boundary_target_words, o.boundary_min_sentences, model)
                         for b, u in items])


def _perplexity_options(cfg: Any, merge_base: bool = False) -> PerplexityOptions:
    o = PerplexityOptions.of(cfg)
    return o.replace(perplexity_max_context=o.perplexity_max_context or cfg.llm.max_model_len,
                     perplexity_threshold=o.perplexity_merge_threshold if merge_base else o.perplexity_threshold)


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


def dynamic_merge(method: Method, items: Items, base: Segmentation, o: MergeOptions, models: Models) -> Segmentation:
    tok = load_tokenizer(o.tokenizer, models.backend)
    return Segmentation([merge_unit_chunks(b, u, cs, o.merge_target_tokens, tok.count, method.name)
                         for (b, u), cs in zip(items, base.per_unit)],
                        base.fallbacks, base.invalid_replies, dict(base.details))


# the internal building block of perplexity+merge (Meta-Chunking App. F: θ = 0 before the dynamic merge)
PERPLEXITY_MERGE_BASE = Method(name="perplexity@merge-base", needs="llm", options=PerplexityOptions, run=_perplexity,
                               build=lambda cfg: _perplexity_options(cfg, merge_base=True), internal=True)
_PERPLEXITY = Method(name="perplexity", needs="llm", options=PerplexityOptions, run=_perplexity,
                     build=_perplexity_options)
_MARGIN = Method(name="margin", needs="llm", options=MarginOptions, run=_margin)
_LUMBER = Method(name="lumber", needs="llm", options=LumberOptions, run=_lumber)
_PERPLEXITY_MERGE = Method(name="perplexity+merge", needs="llm", options=MergeOptions, base=PERPLEXITY_MERGE_BASE)


def _completion_check(o: CompletionOptions, models: Models) -> None:
    if o.completion_related_chunks and models.embedder is None:
        raise ChunkerError("perplexity+merge+completion picks related chunks by embedding: give an embedder "
                           "or set completion_related_chunks=0 (neighbouring chunks)")


def _completion(items: Items, o: CompletionOptions, models: Models, base: Segmentation) -> Segmentation:
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


def _litseg(items: Items, o: LitSegOptions, models: Models) -> Segmentation:
    chunks, results, used = litseg_segmenter.segment_units(items, o, models.backend)
    return Segmentation(per_unit_lists(items, chunks), fallbacks=sum(1 for r in results if r.fallback != "none"),
                        details={"length_reference": used.length_reference})


def _lite(items: Items, o: LiteOptions, models: Models) -> Segmentation:
    chunks, results = o.segmenter(models.backend).segment_units(items, progress=True)
    return Segmentation(per_unit_lists(items, chunks), fallbacks=sum(1 for r in results if r.fallback != "none"))


_METHODS: tuple[Method, ...] = (
    Method(name="token", needs="text", options=TokenOptions, run=_token),
    Method(name="recursive", needs="text", options=RecursiveOptions, run=_recursive),
    Method(name="semantic", needs="embedder", options=SemanticOptions, run=_semantic),
    Method(name="paragraph", needs="text", options=ParagraphOptions,
           run=lambda items, o, models: Segmentation([paragraph_chunks(b, u) for b, u in items])),
    Method(name="texttiling", needs="text", options=TextTilingOptions, run=_texttiling),
    Method(name="c99", needs="text", options=C99Options, run=_c99),
    Method(name="boundary-model", needs="text", options=BoundaryModelOptions, run=_boundary_model,
           build=_boundary_model_options),
    _PERPLEXITY,
    _MARGIN,
    _LUMBER,
    _PERPLEXITY_MERGE,
    Method(name="margin+merge", needs="llm", options=MergeOptions, base=_MARGIN),
    Method(name="lumber+merge", needs="llm", options=MergeOptions, base=_LUMBER),
    Method(name="proposition", needs="llm", options=PropositionOptions, run=_proposition),
    # Meta-Chunking §3.2 / App. C: semantic completion of the perplexity+merge chunks
    Method(name="perplexity+merge+completion", needs="llm", options=CompletionOptions, run=_completion,
           check=_completion_check, uses=(_PERPLEXITY_MERGE,)),
    PERPLEXITY_MERGE_BASE,
    Method(name=LITSEG, needs="llm", options=LitSegOptions, config=LitSegConfig,
           run=_litseg, prepare=lambda items, o, models: litseg_segmenter.prepare(items, o, models.backend),
           prepares_when=litseg_segmenter.calibrates),
    Method(name=LITE, needs="llm", options=LiteOptions, config=LiteConfig, run=_lite),
)
REGISTRY: dict[str, Method] = {m.name: m for m in _METHODS}


def _library_method(name: str) -> Method:
    def run(items: Items, o: LibraryOptions, models: Models) -> Segmentation:
        per_unit, extra = library_chunks(name, items, o, models.backend, models.embedder)
        return Segmentation(per_unit, fallbacks=extra.pop("fallbacks", 0),
                            invalid_replies=extra.pop("invalid_replies", 0), details=extra)

    return Method(name=name, needs=needs_of(name), options=LibraryOptions, config=LibraryConfig, run=run)


def get_method(name: str) -> Method:
    if isinstance(name, str) and name.startswith("lib:"):
        return _library_method(name)
    method = REGISTRY.get(name)
    if method is None or method.internal:
        raise ChunkerError(f"unknown chunker {name!r}; known: {', '.join(METHOD_NAMES)}, or lib:<preset> / "
                           f"lib:<library>.<Class> (python -m litseg_nb segment --help)")
    return method


def _check(method: Method, cfg: Any, models: Models) -> None:
    if not isinstance(cfg, method.config):
        raise ChunkerError(f"{method.name} takes a {method.config.__name__}, got {type(cfg).__name__}")
    if method.needs_llm and models.backend is None:
        raise ChunkerError(f"{method.name} needs an LLM backend (litseg_nb.llm.make_backend(cfg.llm))")
    if method.needs_embedder and models.embedder is None:
        raise ChunkerError(f"{method.name} needs an embedder (litseg_nb.llm.embeddings.load_embedder(cfg.embedding))")


def prepare(method: Method, items: Items, cfg: Any, models: Models) -> Any:
    _check(method, cfg, models)
    options = method.options_of(cfg)
    return method.prepare(items, options, models) if method.prepare is not None else options


def run_prepared(method: Method, items: Items, cfg: Any, options: Any, models: Models) -> Segmentation:
    if method.base is not None:
        base = run_prepared(method.base, items, cfg, method.base.options_of(cfg), models)
        return dynamic_merge(method, items, base, options, models)
    if method.check is not None:
        method.check(options, models)
    inputs = [segment_units(dep, items, cfg, models) for dep in method.uses]
    return method.run(items, options, models, *inputs)


def segment_units(method: Method | str, items: Items, cfg: Any, models: Models | None = None,
                  options: Any = None) -> Segmentation:
    """Run ``method`` on ``(book, unit)`` pairs with its stage config (no cache; every unit's coverage checked)."""
    method = get_method(method) if isinstance(method, str) else method
    models = models or Models()
    items = list(items)
    options = prepare(method, items, cfg, models) if options is None else options
    result = run_prepared(method, items, cfg, options, models)
    for (b, u), cs in zip(items, result.per_unit):
        rep = check_coverage(u, cs)
        if not rep.ok:
            raise ChunkerError(f"{method.name} on book {b.book_id!r} unit {u.unit_id}: missing sentences "
                               f"{list(rep.missing)[:20]} invalid {list(rep.out_of_range)[:20]}")
    return result


def chunk_units(name: str, items: Sequence[tuple[Book, Unit]], cfg: Any, backend: Any = None,
                embedder: Any = None) -> tuple[list[Chunk], dict[str, Any]]:
    result = segment_units(name, items, cfg, Models(backend, embedder))
    return result.chunks, {"fallbacks": result.fallbacks, "invalid_replies": result.invalid_replies, **result.details}


DESCRIPTIONS: dict[str, str] = {
    "token": "fixed windows of token_chunk_size tokens of the statistics tokenizer",
    "recursive": "recursive character splitting on paragraph, line, sentence and word separators",
    "semantic": "breaks where neighbouring sentence embeddings differ most (LangChain's SemanticChunker idea)",
    "paragraph": "one chunk per paragraph of the unit",
    "texttiling": "TextTiling (Hearst 1997, NLTK's defaults): cuts at the deepest lexical-cohesion valleys, at paragraph starts",
    "c99": "C99 (Choi 2000): rank-transformed sentence similarity, divisive clustering until the density gain is small",
    "boundary-model": "our narrative boundary model (trained on gutenberg_train's own breaks): top-scored paragraph starts",
    "perplexity": "Meta-Chunking's perplexity chunking: splits at perplexity minima of the LLM",
    "margin": "Meta-Chunking's margin sampling: the LLM decides, sentence by sentence, whether to split",
    "lumber": "LumberChunker: the LLM picks where the content shifts in a window of lumber_budget_tokens",
    "perplexity+merge": "perplexity chunks, then Meta-Chunking's dynamic merge up to a length",
    "margin+merge": "margin-sampling chunks, then the dynamic merge",
    "lumber+merge": "LumberChunker chunks, then the dynamic merge",
    "proposition": "propositions written by the LLM (Chen et al.'s propositionizer; not spans of the text)",
    "perplexity+merge+completion": "perplexity+merge chunks with Meta-Chunking's semantic completion",
    "litseg": "LitSeg: narrative-aware segmentation with a subtitle and context per chunk (the paper's method)",
    "litseg-lite": "LitSeg-Lite: the one-stage student prompt (point llm.model at a distilled model)",
}

_NEEDS_LABEL = {"text": "rules", "embedder": "embedder", "llm": "LLM"}


def methods_text() -> str:
    """The ``methods`` subcommand's listing: every registered method, then every ``lib:`` preset."""
    rows = [(n, f"[{_NEEDS_LABEL[get_method(n).needs]}]", DESCRIPTIONS[n]) for n in METHOD_NAMES]
    libs = [(f"lib:{n}", f"[{_NEEDS_LABEL[p.needs]}]", f"{p.target}: {p.note}") for n, p in PRESETS.items()]
    width = max(len(n) for n, *_ in rows + libs)
    out = ["Methods (python -m litseg_nb segment BOOK --method NAME; needs: rules = no model, LLM = the "
           "profile's LLM or --base-url, embedder = the profile's embedding model):", ""]
    out += [f"  {n:<{width}}  {needs:<10}  {d}" for n, needs, d in rows]
    out += ["", "Library presets (the libraries' own splitters, chunks aligned to the text; options with "
                "--set KEY=VALUE, e.g. --set chunk_size=300; any lib:<library>.<Class> works too):", ""]
    out += [f"  {n:<{width}}  {needs:<10}  {d}" for n, needs, d in libs]
    return "\n".join(out)
