"""Any library's chunker as a method: ``--method lib:<preset>`` or ``--method lib:<module>.<Class>``.

The splitter runs on each unit with the profile's models; its pieces are aligned back with the
``import-chunks`` aligner (unaligned pieces kept and flagged, uncovered sentences become gap chunks).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import itertools
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..config import ConfigError, StageConfig, between, one_of
from ..core.progress import bar
from ..core.schema import Book, Chunk, Unit, check_coverage
from .base import ChunkerError, TokenizerOption, boundary_positions, chunks_from_spans, load_tokenizer, where
from ..llm.base import LLMError, SamplingParams, UsageTag
from ..core.chunk_align import _coverage, BookAligner  # the import-chunks coverage measure
from .splitters import RecursiveOptions
from .stats import chunk_token_lengths

log = logging.getLogger(__name__)


class LibraryMethodError(ConfigError, ChunkerError):
    """A ``lib:`` method that cannot be resolved or built (the CLI prints one line)."""


PREFIX = "lib:"


@dataclass(frozen=True)
class LibraryPreset:
    """A named library splitter (``target`` "<module>.<Class>", its kwargs) and our counterpart method."""

    target: str
    kwargs: tuple[tuple[str, Any], ...] = ()
    ours: str | None = None  # this project's counterpart (faithfulness table), None = no counterpart
    needs: str = "text"  # "text" | "embedder" | "llm" (what the registry's spec needs)
    note: str = ""


# sizes chosen to match our token, recursive and semantic chunkers
PRESETS: dict[str, LibraryPreset] = {
    "chonkie-token": LibraryPreset("chonkie.TokenChunker", (("chunk_size", 400), ("chunk_overlap", 40)), "token",
                                   note="400-token windows, 40 overlap (MiniLM tokens)"),
    "chonkie-sentence": LibraryPreset("chonkie.SentenceChunker", (("chunk_size", 400), ("chunk_overlap", 0)),
                                      "recursive", note="sentences packed to 400 tokens"),
    "chonkie-recursive": LibraryPreset("chonkie.RecursiveChunker", (("chunk_size", 400),), "recursive",
                                       note="chonkie's default rules, 400 tokens"),
    "chonkie-semantic": LibraryPreset("chonkie.SemanticChunker", (("chunk_size", 400),), "semantic", needs="embedder",
                                      note="chonkie's similarity threshold 0.8, window 3, profile embedder"),
    "chonkie-slumber": LibraryPreset("chonkie.SlumberChunker", (("chunk_size", 550), ("extract_mode", "text"),
                                                                ("verbose", False)), "lumber", needs="llm",
                                     note="LumberChunker-style: the profile's LLM picks the split (budget 550 tokens)"),
    "llamaindex-sentence": LibraryPreset("llama_index.SentenceSplitter", (("chunk_size", 400), ("chunk_overlap", 40)),
                                         "token", note="LlamaIndex SentenceSplitter, 400 tokens, 40 overlap"),
    "llamaindex-semantic": LibraryPreset("llama_index.SemanticSplitterNodeParser",
                                         (("buffer_size", 1), ("breakpoint_percentile_threshold", 95)), "semantic",
                                         needs="embedder", note="95th-percentile breakpoints, buffer 1, profile embedder"),
    "langchain-recursive": LibraryPreset("langchain.RecursiveCharacterTextSplitter",
                                         (("chunk_size", 1800), ("chunk_overlap", 200),
                                          ("separators", list(RecursiveOptions.recursive_separators)),
                                          ("keep_separator", "end")),
                                         "recursive", note="our recursive settings (1,800 chars, 200 overlap, "
                                                           "separators kept at the end of a piece)"),
    "langchain-semantic": LibraryPreset("langchain.SemanticChunker",
                                        (("breakpoint_threshold_type", "percentile"),
                                         ("breakpoint_threshold_amount", 95.0), ("buffer_size", 1)), "semantic",
                                        needs="embedder", note="langchain-experimental, 95th percentile, profile embedder"),
    "langchain-token": LibraryPreset("langchain.TokenTextSplitter", (("chunk_size", 400), ("chunk_overlap", 40)),
                                     "token", note="LangChain's token windows on MiniLM tokens (tiktoken needs a "
                                                   "download, see docs/guide/adapters.md)"),
    "semchunk": LibraryPreset("semchunk.chunkerify", (("chunk_size", 400),), "recursive",
                              note="semchunk, 400 MiniLM tokens"),
}
# library aliases of ``lib:<alias>.<Class>``: the modules searched, in order
ALIASES: dict[str, tuple[str, ...]] = {
    "chonkie": ("chonkie",),
    "langchain": ("langchain_text_splitters", "langchain_experimental.text_splitter"),
    "llama_index": ("llama_index.core.node_parser",),
    "llamaindex": ("llama_index.core.node_parser",),
    "semchunk": ("semchunk",),
}
PRESET_NAMES: tuple[str, ...] = tuple(PREFIX + p for p in PRESETS)
EMBED_PARAMS = {"embeddings", "embed_model", "embedding_model"}


def is_library_method(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


@dataclass(frozen=True)
class LibraryOptions(TokenizerOption):
    min_score: float = between(0.8, 0.0, 1.0)  # lowest similarity accepted as a fuzzy alignment
    fill_gaps: bool = True  # sentences no piece covers become flagged gap chunks (False: error)
    options: tuple[tuple[str, Any], ...] = ()  # the library's keyword arguments (over the preset's)
    genie_max_new_tokens: int = 16  # chonkie-slumber: reply cap of the LLM (an index is asked for)


@dataclass(frozen=True)
class LibraryConfig(LibraryOptions, StageConfig):
    """Config of a ``lib:`` method and notebook 04's preset settings. Keys that are not fields are the
    library's own keyword arguments (``--set chunk_size=400``), checked against its constructor."""

    # notebook 04: the presets it runs, on ``books`` (ids or title substrings; empty = every corpus book)
    presets: tuple[str, ...] = one_of(PRESET_NAMES, *PRESET_NAMES)
    books: tuple[str, ...] = ()
    # the units the embedding presets run on (the LLM preset always runs on the unit selection)
    embedding_units: str = one_of("all", "selection", "all")

    @classmethod
    def like(cls, cfg: Any, **overrides: Any) -> "LibraryConfig":
        """The config of notebook 04's BaselinesConfig ``cfg`` (same profile, seed, models, corpus, tokenizer)."""
        return cls.for_profile(cfg.profile, seed=cfg.seed, llm=cfg.llm.to_dict(), embedding=cfg.embedding.to_dict(),
                               corpus=cfg.corpus.to_dict(), selection=cfg.selection.to_dict(),
                               tokenizer=cfg.tokenizer, **overrides)

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any):
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        ours = {k: v for k, v in overrides.items() if k in known}
        lib = {k: v for k, v in overrides.items() if k not in known}
        if lib:
            ours["options"] = tuple(tuple(kv) for kv in ours.get("options", ())) + tuple(sorted(lib.items()))
        return super().for_profile(profile, **ours)

    def describe(self) -> str:  # noqa: D102
        return super().describe() + f" | tokenizer={self.tokenizer}"

    def presets_note(self) -> str:
        """Where notebook 04 ran the presets, with the library versions (table captions)."""
        from importlib.metadata import PackageNotFoundError, version

        found = []
        for dist in ("chonkie", "llama-index-core", "langchain-text-splitters", "langchain-experimental", "semchunk"):
            with contextlib.suppress(PackageNotFoundError):
                found.append(f"{dist}=={version(dist)}")
        versions = ", ".join(found)
        return (f"library presets on {','.join(self.books) or 'every book'}; embedding presets on "
                f"{self.embedding_units} units; LLM preset on the unit selection | {versions}")


def _import_target(target: str) -> Any:
    module, _, attr = target.rpartition(".")
    if not module or not attr or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", target):
        raise LibraryMethodError(f"lib:{target}: give <library>.<Class>, e.g. lib:chonkie.TokenChunker, or a preset "
                           f"({', '.join(PRESETS)})")
    candidates = ALIASES.get(module, (module,))
    errors = []
    for mod in candidates:
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            errors.append(f"{mod}: {e}")
            continue
        if hasattr(m, attr):
            return getattr(m, attr)
        errors.append(f"{mod} has no {attr!r}")
    raise LibraryMethodError(f"lib:{target}: cannot load ({'; '.join(errors)}); install the library "
                       f"(see docs/guide/adapters.md, the lib: presets)")


def resolve(name: str) -> tuple[str, dict[str, Any], LibraryPreset | None]:
    """``(target, preset keyword arguments, preset)`` of method ``name`` (``lib:...``)."""
    key = name[len(PREFIX):]
    preset = PRESETS.get(key)
    if preset is not None:
        return preset.target, dict(preset.kwargs), preset
    if "." not in key:
        raise LibraryMethodError(f"unknown library preset {key!r}; presets: {', '.join(PRESETS)}; or give "
                           f"lib:<library>.<Class> (libraries: {', '.join(ALIASES)})")
    return key, {}, None


def accepted_params(obj: Any) -> set[str] | None:
    """Keyword arguments ``obj`` (a class or function) accepts; None when it takes any."""
    fields = getattr(obj, "model_fields", None)  # pydantic (LlamaIndex node parsers)
    if isinstance(fields, Mapping):
        # fields, plus what an explicit __init__ takes (SentenceSplitter's tokenizer is a private attribute)
        init = inspect.signature(obj.__init__).parameters.values()
        return set(fields) | {p.name for p in init if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                       p.KEYWORD_ONLY)}
    names: set[str] = set()
    classes = [c for c in getattr(obj, "__mro__", ()) if "__init__" in vars(c) and c is not object] or [obj]
    for c in classes:
        try:
            sig = inspect.signature(c.__init__ if isinstance(c, type) else c)
        except (TypeError, ValueError):
            return None
        params = [p for p in sig.parameters.values() if p.name != "self"]
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
    return names if len(classes) > 1 or not isinstance(obj, type) else None


def needs_of(name: str) -> str:
    """"text", "embedder" or "llm": what the splitter of ``name`` needs."""
    target, kwargs, preset = resolve(name)
    if preset is not None:
        return preset.needs
    params = accepted_params(_import_target(target)) or set()
    if "genie" in params:
        return "llm"
    return "embedder" if params & EMBED_PARAMS else "text"


class PositionTokenizer:
    """Token ids are positions: ``decode`` returns the exact source slice, not a lossy re-decoding."""

    def __init__(self, tok: Any):
        self.tok = tok
        self._where: list[tuple[int, int, int]] = []  # id -> (text index, start, end)
        self._texts: list[str] = []

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
        k = len(self._texts)
        self._texts.append(text)
        base = len(self._where)
        offs = self.tok.offsets(text)
        self._where.extend((k, a, b) for a, b in offs)
        return list(range(base, base + len(offs)))

    def decode(self, ids: Sequence[int], *args: Any, **kwargs: Any) -> str:
        ids = list(ids)
        if not ids:
            return ""
        k, a, _ = self._where[ids[0]]
        k2, _, b = self._where[ids[-1]]
        if k2 != k:
            raise ChunkerError("PositionTokenizer: token ids of two texts decoded together")
        return self._texts[k][a:b]

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self.tok.count_many(list(texts))

    def tokenize(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.tok.offsets(text)]


def chonkie_tokenizer(tok: Any) -> Any:
    from chonkie.tokenizer import Tokenizer as ChonkieTokenizer

    class _ChonkiePositionTokenizer(PositionTokenizer, ChonkieTokenizer):
        def __init__(self, inner: Any):
            ChonkieTokenizer.__init__(self)
            PositionTokenizer.__init__(self, inner)

        def __repr__(self) -> str:
            return f"PositionTokenizer({self.tok.name})"

    return _ChonkiePositionTokenizer(tok)


def langchain_embeddings(embedder: Any) -> Any:
    from langchain_core.embeddings import Embeddings

    class LitSegEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.encode(list(texts), "sentence").tolist() if texts else []

        def embed_query(self, text: str) -> list[float]:
            return embedder.encode([text], "sentence")[0].tolist()

    return LitSegEmbeddings()


def llamaindex_embedding(embedder: Any) -> Any:
    from llama_index.core.embeddings import BaseEmbedding

    class LitSegEmbedding(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.encode([text], "sentence")[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embedder.encode(list(texts), "sentence").tolist() if texts else []

        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.encode([query], "query")[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return LitSegEmbedding(model_name=getattr(embedder, "model_id", "litseg-embedder"))


def chonkie_embeddings(embedder: Any, tok: Any) -> Any:
    from chonkie.embeddings import BaseEmbeddings

    class LitSegChonkieEmbeddings(BaseEmbeddings):
        def embed(self, text: str) -> np.ndarray:
            return embedder.encode([text], "sentence")[0]

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            return list(embedder.encode(list(texts), "sentence")) if texts else []

        @property
        def dimension(self) -> int:
            return embedder.dim

        def get_tokenizer(self) -> Any:
            return chonkie_tokenizer(tok)

        @classmethod
        def _is_available(cls) -> bool:
            return True

        def __repr__(self) -> str:
            return f"LitSegChonkieEmbeddings({getattr(embedder, 'model_id', '?')})"

    return LitSegChonkieEmbeddings()


@dataclass
class GenieStats:
    """What chonkie's SlumberChunker asked the LLM; a repeated prompt is a window kept together after a bad reply."""

    calls: int = 0
    prompts: dict[str, int] = dataclasses.field(default_factory=dict)
    # chonkie swallows every exception of ``generate``: a backend failure is kept and re-raised after the unit
    error: BaseException | None = None

    @property
    def repeated_prompts(self) -> int:
        return sum(1 for n in self.prompts.values() if n > 1)


def chonkie_genie(backend: Any, method: str, max_new_tokens: int, stats: GenieStats, book_id: Callable[[], str]) -> Any:
    """The profile's LLM backend (request cache, usage ledger) as a chonkie ``BaseGenie`` (text mode)."""
    from chonkie.genie import BaseGenie

    class LitSegGenie(BaseGenie):
        def generate(self, prompt: str) -> str:
            if stats.error is not None:  # the server already failed: ask it nothing more
                raise stats.error
            try:
                gen = backend.chat([[{"role": "user", "content": prompt}]],
                                   SamplingParams(max_new_tokens=max_new_tokens),
                                   tag=UsageTag(method, book_id(), "04"))[0]
            except LLMError as e:
                stats.error = e
                raise
            stats.calls += 1
            stats.prompts[prompt] = stats.prompts.get(prompt, 0) + 1
            return gen.text

    return LitSegGenie()


def _langchain_token_splitter(tok: Any, **kwargs: Any) -> Any:
    """LangChain's ``TokenTextSplitter`` on a local tokenizer (tiktoken downloads its encodings)."""
    from langchain_text_splitters import TextSplitter, TokenTextSplitter

    class LocalTokenTextSplitter(TokenTextSplitter):
        def __init__(self, **kw: Any):
            TextSplitter.__init__(self, **kw)
            self._tokenizer = PositionTokenizer(tok)
            self._allowed_special = set()
            self._disallowed_special = ()

    return LocalTokenTextSplitter(**kwargs)


@dataclass
class Splitter:
    target: str
    obj: Any
    split: Callable[[str], list[str]]
    genie: GenieStats | None = None
    current_book: list[str] = dataclasses.field(default_factory=lambda: [""])


def check_options(name: str, cfg: LibraryOptions) -> tuple[str, dict[str, Any], Any, set[str]]:
    """``(target, keyword arguments, class or function, the keyword arguments it accepts)`` of the splitter of
    ``name``; an unknown keyword raises :class:`ConfigError`."""
    target, kwargs, _ = resolve(name)
    kwargs.update(dict(cfg.options))
    obj = _import_target(target)
    params = accepted_params(obj)
    if params is not None:
        bad = sorted(set(kwargs) - params)
        if bad:
            ours = sorted(f.name for f in dataclasses.fields(LibraryConfig) if f.init)
            raise ConfigError(f"{name}: {target} takes no option(s) {', '.join(map(repr, bad))}; it takes: "
                              f"{', '.join(sorted(p for p in params if not p.startswith('_')))} "
                              f"(LibraryConfig's own keys: {', '.join(ours)})")
    return target, kwargs, obj, params or set()


def build_splitter(name: str, cfg: LibraryOptions, backend: Any = None, embedder: Any = None) -> Splitter:
    """The splitter of method ``name`` with its keyword arguments and the profile's models injected."""
    target, kwargs, obj, params = check_options(name, cfg)
    root = target.split(".")[0]
    tok = load_tokenizer(cfg.tokenizer, backend)
    current = [""]
    genie_stats = None
    if params & EMBED_PARAMS and not (params & EMBED_PARAMS & set(kwargs)):
        if embedder is None:
            raise ChunkerError(f"{name} needs an embedder (litseg_nb.llm.embeddings.load_embedder(cfg.embedding))")
        if "embeddings" in params:
            kwargs["embeddings"] = langchain_embeddings(embedder)
        elif "embed_model" in params:
            kwargs["embed_model"] = llamaindex_embedding(embedder)
        else:
            kwargs["embedding_model"] = chonkie_embeddings(embedder, tok)
    if "genie" in params and "genie" not in kwargs:  # needs "llm": the registry checked the backend
        genie_stats = GenieStats()
        kwargs["genie"] = chonkie_genie(backend, name, cfg.genie_max_new_tokens, genie_stats, lambda: current[0])
    if root == "chonkie" and "tokenizer" in params and "tokenizer" not in kwargs:
        kwargs["tokenizer"] = chonkie_tokenizer(tok)
    elif root in ("llama_index", "llamaindex") and "tokenizer" in params and "tokenizer" not in kwargs:
        kwargs["tokenizer"] = lambda text: tok.hf(text, add_special_tokens=False, verbose=False)["input_ids"]
    try:
        if getattr(obj, "__name__", "") == "TokenTextSplitter" and root == "langchain":
            built = _langchain_token_splitter(tok, **{k: v for k, v in kwargs.items()
                                                      if k not in ("encoding_name", "model_name")})
        else:
            if target == "semchunk.chunkerify":
                kwargs.setdefault("tokenizer_or_token_counter", tok.count)
            built = obj(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{name}: {target}({', '.join(f'{k}=...' for k in kwargs)}) failed: {e}") from e

    if hasattr(built, "split_text"):  # LangChain TextSplitter
        split = built.split_text
    elif hasattr(built, "get_nodes_from_documents"):  # LlamaIndex NodeParser
        from llama_index.core import Document

        def split(text: str) -> list[str]:
            return [n.get_content() for n in built.get_nodes_from_documents([Document(text=text)])]
    elif hasattr(built, "chunk") and root == "chonkie":
        def split(text: str) -> list[str]:
            return [c.text for c in built.chunk(text)]
    elif callable(built):  # semchunk's Chunker, any text -> list[str] callable
        def split(text: str) -> list[str]:
            return list(built(text))
    else:
        raise LibraryMethodError(f"{name}: {target} is neither a LangChain TextSplitter, a LlamaIndex NodeParser, a "
                           f"chonkie chunker nor a text -> list[str] callable")
    return Splitter(target, built, split, genie_stats, current)


@dataclass
class AlignmentCounts:
    pieces: int = 0
    exact: int = 0
    normalised: int = 0
    anchored: int = 0
    not_found: int = 0
    out_of_order: int = 0
    gap_chunks: int = 0
    gap_sentences: int = 0
    chars: int = 0  # non-whitespace characters of the units
    covered_chars: int = 0  # ... inside some aligned piece
    multi_chars: int = 0  # ... inside more than one aligned piece

    @property
    def coverage(self) -> float:
        return self.covered_chars / self.chars if self.chars else 0.0

    @property
    def overlap(self) -> float:
        return self.multi_chars / self.covered_chars if self.covered_chars else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "coverage": self.coverage, "overlap": self.overlap}

    def summary(self) -> str:
        return (f"{self.pieces} pieces: exact {self.exact}, normalised {self.normalised}, fuzzy {self.anchored}, "
                f"not found {self.not_found} (kept, flagged) | library coverage {100 * self.coverage:.2f}% of "
                f"non-whitespace characters, overlap {100 * self.overlap:.2f}% | gap chunks {self.gap_chunks} "
                f"({self.gap_sentences} sentences no piece covered)")


def align_unit(book: Book, unit: Unit, method: str, pieces: Sequence[str], counts: AlignmentCounts,
               min_score: float = 0.8, fill_gaps: bool = True, source: str = "") -> list[Chunk]:
    """Chunks of ``unit`` from a library's output ``pieces`` (in order), aligned to the unit text."""
    text = book.text[unit.start:unit.end]
    pieces = [p for p in pieces if p and p.strip()]
    als = BookAligner(text, min_score=min_score).align(pieces) if pieces else []
    spans, mds, lost = [], [], []
    for al, piece in zip(als, pieces):
        counts.pieces += 1
        md = {"library": source, "piece": al.index, "alignment": al.quality, "alignment_method": al.method,
              "alignment_score": al.score}
        if al.quality == "not_found":
            counts.not_found += 1
            lost.append(Chunk(book.book_id, "", f"{unit.unit_id}.lib{al.index:05d}", method, 0, 0, [], piece, "",
                              is_source_span=False, metadata={**md, "unit": unit.unit_id, "fallback": "not_found"}))
            continue
        counts.exact += al.method == "exact"
        counts.normalised += al.method == "normalised"
        counts.anchored += al.method == "anchored"
        counts.out_of_order += al.out_of_order
        md["out_of_order"] = al.out_of_order
        spans.append((unit.start + al.start, unit.start + al.end))
        mds.append(md)
    total = sum(1 for ch in text if not ch.isspace())
    cov, ovl = _coverage(text, [(a - unit.start, b - unit.start) for a, b in spans]) if spans else (0.0, 0.0)
    covered = round(cov * total)
    counts.chars += total
    counts.covered_chars += covered
    counts.multi_chars += round(ovl * covered)
    first = chunks_from_spans(book, unit, method, spans, mds) if spans else []
    missing = list(check_coverage(unit, first).missing)
    if missing:
        if not fill_gaps:
            raise ChunkerError(f"{method}: {where(book, unit)}: the library's pieces cover no part of sentences "
                               f"{missing[:20]} (fill_gaps=False)")
        for _, run in itertools.groupby(enumerate(missing), lambda t: t[1] - t[0]):  # runs of consecutive sentences
            r = [i for _, i in run]
            s0, s1 = unit.sentences[r[0] - 1], unit.sentences[r[-1] - 1]
            spans.append((s0.start, s1.end))
            mds.append({"library": source, "alignment": "gap", "gap": True, "gap_sentences": [r[0], r[-1]],
                        "fallback": "gap"})
            counts.gap_chunks += 1
            counts.gap_sentences += len(r)
        order = sorted(range(len(spans)), key=lambda k: spans[k])
        first = chunks_from_spans(book, unit, method, [spans[k] for k in order], [mds[k] for k in order])
    return first + lost


def library_chunks(name: str, items: Sequence[tuple[Book, Unit]], cfg: LibraryOptions, backend: Any = None,
                   embedder: Any = None, progress: bool = True) -> tuple[list[list[Chunk]], dict[str, Any]]:
    """Run library method ``name`` on each ``(book, unit)``: chunks per unit and the counters."""

    sp = build_splitter(name, cfg, backend, embedder)
    counts = AlignmentCounts()
    out = []
    for b, u in bar(items, progress=progress, desc=name, leave=False):
        sp.current_book[0] = b.book_id
        kept_before = sp.genie.repeated_prompts if sp.genie is not None else 0
        try:
            pieces = sp.split(b.text[u.start:u.end])
        except LLMError:  # a failing server is the run's error, not the library's
            raise
        except Exception as e:
            raise ChunkerError(f"{name} ({sp.target}) failed on {where(b, u)}: {type(e).__name__}: {e}") from e
        if sp.genie is not None and sp.genie.error is not None:  # swallowed by the library: never a result
            raise sp.genie.error
        unit_chunks = align_unit(b, u, name, pieces, counts, cfg.min_score, cfg.fill_gaps, sp.target)
        if sp.genie is not None and sp.genie.repeated_prompts > kept_before:
            # chonkie kept windows of this unit together after invalid LLM replies: the unit fell back
            for c in unit_chunks:
                c.metadata.setdefault("fallback", "genie_kept_together")
        out.append(unit_chunks)
    extra: dict[str, Any] = {"fallbacks": counts.gap_chunks + counts.not_found, "alignment": counts.to_dict()}
    msg = f"[litseg_nb] {name}: {counts.summary()}"
    if sp.genie is not None:
        extra["invalid_replies"] = sp.genie.calls - len(sp.genie.prompts) + sp.genie.repeated_prompts
        extra["genie_calls"] = sp.genie.calls
        extra["genie_fallbacks"] = sp.genie.repeated_prompts  # windows chonkie kept together after failures
        extra["fallbacks"] += sp.genie.repeated_prompts
        msg += f" | LLM calls {sp.genie.calls}, windows kept together after invalid replies {sp.genie.repeated_prompts}"
    (log.warning if extra["fallbacks"] else log.info)(msg)
    return out, extra


COMPARISON_COLUMNS = ("library_method", "ours", "units", "chunks_library", "chunks_ours", "mean_tokens_library",
                      "mean_tokens_ours", "boundary_f1", "boundary_f1_pm1", "precision", "recall", "note")


def boundary_f1(ours: Sequence[Chunk], theirs: Sequence[Chunk], units: set, tolerance: int = 0
                ) -> tuple[float, float, float]:
    """Precision, recall and F1 of the library's chunk starts against ours (within ``tolerance`` sentences)."""
    tp = n_ours = n_theirs = 0
    for key in sorted(units):
        a = boundary_positions(ours, *key)
        b = boundary_positions(theirs, *key)
        n_ours += len(a)
        n_theirs += len(b)
        free = list(a)
        for x in b:
            hit = next((y for y in free if abs(x - y) <= tolerance), None)
            if hit is not None:
                free.remove(hit)
                tp += 1
    p = tp / n_theirs if n_theirs else float("nan")
    r = tp / n_ours if n_ours else float("nan")
    f1 = 2 * p * r / (p + r) if n_theirs and n_ours and (p + r) else (1.0 if not n_theirs and not n_ours else 0.0)
    return p, r, f1


def library_comparison(library_sets: Mapping[str, Sequence[Chunk]], our_sets: Mapping[str, Sequence[Chunk]],
                       tok: Any) -> Any:
    """Each library splitter next to its preset's ``ours``: chunks, mean tokens and boundary F1."""
    import pandas as pd

    rows = []
    for name, theirs in library_sets.items():
        preset = PRESETS.get(name[len(PREFIX):])
        ours_name = preset.ours if preset else None
        ours = list(our_sets.get(ours_name, ())) if ours_name else []
        keys = ({(c.book_id, c.unit_id) for c in theirs if c.is_source_span}
                & {(c.book_id, c.unit_id) for c in ours if c.is_source_span})
        t = [c for c in theirs if (c.book_id, c.unit_id) in keys]
        o = [c for c in ours if (c.book_id, c.unit_id) in keys]
        lt, lo = chunk_token_lengths(t, tok), chunk_token_lengths(o, tok)
        (p, r, f0), (_, _, f1) = boundary_f1(o, t, keys, 0), boundary_f1(o, t, keys, 1)
        rows.append({"library_method": name, "ours": ours_name or "(none)", "units": len(keys),
                     "chunks_library": len(t), "chunks_ours": len(o),
                     "mean_tokens_library": float(lt.mean()) if len(lt) else float("nan"),
                     "mean_tokens_ours": float(lo.mean()) if len(lo) else float("nan"),
                     "boundary_f1": f0 if keys else float("nan"),
                     "boundary_f1_pm1": f1 if keys else float("nan"),
                     "precision": p, "recall": r,
                     "note": preset.note if preset else ""})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
