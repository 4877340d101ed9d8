"""LitSeg inside the user's pipeline: a LangChain ``TextSplitter``, a LlamaIndex ``NodeParser`` and a chonkie
chunker, each wrapping any registered method on any backend through :func:`litseg_nb.segment`::

    from litseg_nb.integrations.langchain import LitSegTextSplitter
    from litseg_nb.integrations.llamaindex import LitSegNodeParser
    from litseg_nb.integrations.chonkie import LitSegChunker

One module per host library, imported only when its module is; here the :class:`Segmenter` they share.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import re
import warnings
from typing import Any, Mapping

from ..config import ConfigError
from ..core.schema import Book, Chunk
from ..segmenters.registry import get_method
from ..chunkers.library import check_options, is_library_method
from ..corpus import index_book
from ..api import build_models, require_llm, segment
from ..chunkers.base import blank_line_spans, trim_span
from ..chunkers.sizing import ChunkSizeWarning  # noqa: F401 (the adapters' warning, caught as theirs)
from ..chunkers.sizing import (BLANK_LINES, check_chunk_size, check_token_counter, count_tokens, in_text_order,
                               model_window, outside_chunks, outside_units, token_counter)

#: the adapters' own keywords (every other keyword is an override of the method's config)
ADAPTER_OPTIONS = {
    "chunk_size": "None: the method's chunks as they are, and a ChunkSizeWarning counts those longer than the "
                  "tokenizer's model reads (all-MiniLM-L6-v2: 256 tokens), which an embedder would truncate; "
                  "N: no chunk has more than N tokens of the tokenizer: a longer one is split at paragraph, "
                  "then sentence, then token boundaries (metadata split_from names the chunk it came from)",
    "keep_outside_units": "True: text outside the narrative units (title page, front or back matter) is chunked "
                          "too, in pieces of at most chunk_size tokens (unit_id 'outside', metadata "
                          "outside_units=True), so every word of the text is in a chunk; False: it is not "
                          "chunked and an OutsideUnitsWarning gives its word count",
    "nested_metadata": "False: metadata values are scalars (lists/dicts as JSON strings, as vector stores "
                       "want); True: spans and context_idx stay lists",
    "token_counter": "the tokenizer of chunk_size and of each chunk's token_count (metadata 'tokenizer' names "
                     "it): a packaged name, a local path or a hub id; None: the profile's embedding model "
                     "(test, smoke: all-MiniLM-L6-v2)",
}
#: the chunk metadata naming the version of the document text: its SHA-256's first 8 hex digits
TEXT_VERSION = "text_sha256_8"


class OutsideUnitsWarning(UserWarning):
    """Text of a document outside its narrative units was not chunked (``keep_outside_units=False``)."""


class RawGutenbergWarning(UserWarning):
    """A document still holds Project Gutenberg's licence header: it is chunked like the rest."""


_GUTENBERG_START = re.compile(r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK", re.I | re.M)


class Segmenter:
    """A document's text (not cleaned: every offset points into it) to chunks with ``method``; ``options`` are
    overrides of the method's config, the adapters' own keywords are :data:`ADAPTER_OPTIONS`, anything else is
    a :class:`~litseg_nb.config.ConfigError` naming the known ones. Every word of the text is in a chunk (unless
    ``keep_outside_units=False``). The models are built once, on first use."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", backend: Any = None, embedder: Any = None,
                 *, chunk_size: int | None = None, keep_outside_units: bool = True, nested_metadata: bool = False,
                 token_counter: str | None = None, **options: Any):
        self.method = method
        self.profile = profile
        self.options = dict(options)
        self.spec = get_method(method)
        for name, value in (("keep_outside_units", keep_outside_units), ("nested_metadata", nested_metadata)):
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False, got {value!r}")
        check_chunk_size(chunk_size)
        self.keep_outside_units = keep_outside_units
        self.nested_metadata = nested_metadata
        self.chunk_size = chunk_size
        cls = self.spec.config
        known = sorted(f.name for f in dataclasses.fields(cls) if f.init)
        # a lib: method takes its library's own options too: check_options below names a misspelt one
        unknown = [] if is_library_method(method) else sorted(k for k in self.options if k not in known)
        if unknown:  # one rule for every adapter: a keyword is a config override or an adapter option
            raise ConfigError(f"{method}: unknown option(s) {', '.join(map(repr, unknown))}; the adapters' own "
                              f"options: {', '.join(ADAPTER_OPTIONS)}; the config keys of {cls.__name__}: "
                              f"{', '.join(known)}")
        self.cfg = cls.for_profile(profile, **self.options)  # bad values raise here
        require_llm(self.spec, self.cfg, self.options, backend)
        if is_library_method(method):  # a misspelt library option: here, not on the first document
            check_options(method, self.cfg)
        self.token_counter = check_token_counter(token_counter, self.cfg)
        self._backend = backend
        self._embedder = embedder

    @functools.cached_property
    def tokenizer(self) -> Any:
        """The :class:`~litseg_nb.chunkers.base.Tokenizer` of ``chunk_size`` and ``token_count`` (loaded on
        first use)."""
        return token_counter(self.token_counter)

    @functools.cached_property
    def window(self) -> int | None:
        """The tokens the tokenizer's embedding model reads (None when unknown)."""
        return model_window(self.token_counter, self.tokenizer)

    def metadata(self, c: Chunk, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """:func:`chunk_metadata` with ``token_count`` / ``tokenizer``, scalar-only unless ``nested_metadata``."""
        md = chunk_metadata(c, extra)
        md["token_count"] = count_tokens(self.tokenizer, [c.text])[0]
        md["tokenizer"] = self.tokenizer.name
        return md if self.nested_metadata else flat_metadata(md)

    @property
    def backend(self) -> Any:
        self._backend, self._embedder = build_models(self.spec, self.cfg, self._backend, self._embedder)
        return self._backend

    def book(self, text: str, doc_id: str | None = None, title: str | None = None) -> Book:
        """The text as a unit-split, sentence-indexed book (offsets = offsets into ``text``)."""
        doc_id = document_id(text, doc_id)
        book = Book(book_id=doc_id, title=title or doc_id, dataset="text", text=text,
                    paragraphs=text_paragraphs(text), source=doc_id)
        return index_book(book, self.cfg.corpus.max_unit_words, self.cfg.corpus.sentence_splitter)

    def segment(self, text: str, doc_id: str | None = None, title: str | None = None) -> tuple[Book, list[Chunk]]:
        """``(book, chunks)`` of ``text``; an empty or whitespace-only text has no chunks. ``text`` must be
        a ``str`` (a :class:`TypeError` naming what was given otherwise: decode bytes first)."""
        check_text(text)
        if not text.strip():
            return Book(document_id(text, doc_id), title or "", "text", text), []
        book = self.book(text, doc_id, title)
        if _GUTENBERG_START.search(text[:100_000]):
            warnings.warn(f"{book.book_id}: the text holds Project Gutenberg's licence header and footer, which "
                          "are chunked like the rest; clean a Gutenberg file first: "
                          "litseg_nb.load_text(path).text", RawGutenbergWarning, stacklevel=3)
        chunks = []
        if any(u.n_sentences for u in book.units):
            backend = self.backend
            chunks = segment(book, self.method, profile=self.profile, backend=backend, embedder=self._embedder,
                             chunk_size=self.chunk_size, token_counter=self.token_counter, **self.options)
        chunks = self.outside(book, chunks)
        version = text_hash(text)[:8]  # in the chunk ids: one document id given to two texts never repeats them
        for c in chunks:
            c.metadata[TEXT_VERSION] = version
        return book, chunks

    def outside(self, book: Book, chunks: list[Chunk]) -> list[Chunk]:
        """``chunks`` with the text outside the narrative units added as chunks of their own (at most
        ``chunk_size`` tokens, or the model's window, each), in text order; with ``keep_outside_units=False``
        only reported (a :class:`OutsideUnitsWarning` with its word count)."""
        stretches = outside_units(book)
        if not stretches:
            return chunks
        words = sum(w for *_, w in stretches)
        if not self.keep_outside_units:
            warnings.warn(f"{book.book_id}: {words} word(s) in {len(stretches)} stretch(es) outside the narrative "
                          "units (title, author lines, front matter) are not chunked (keep_outside_units=False)",
                          OutsideUnitsWarning, stacklevel=4)
            return chunks

        return in_text_order(book, [*chunks, *outside_chunks(book, self.method, self.tokenizer,
                                                             self.chunk_size or self.window)])


def check_text(text: Any, what: str = "text") -> str:
    """``text`` when it is a ``str``; a :class:`TypeError` naming the type otherwise (an adapter never guesses
    an encoding or stringifies a value)."""
    if not isinstance(text, str):
        hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"LitSeg adapters segment a str {what}; got {type(text).__name__}{hint}")
    return text


def text_hash(text: str) -> str:
    """The SHA-256 of ``text`` (hex); a lone surrogate (a str that is no valid Unicode) hashes too."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def document_id(text: str, given: Any = None) -> str:
    """A document's id: ``given`` (the host's own) when there is one, else ``text:<sha256[:12]>`` of the text."""
    if given is not None and str(given) != "":
        return str(given)
    return "text:" + text_hash(text)[:12]


def unique_ids(ids: list[str]) -> list[str]:
    """``ids`` with repeats made unique in order (``a``, ``a`` -> ``a``, ``a#2``): documents never share chunk ids."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else f"{i}#{seen[i]}")
    return out


def text_paragraphs(text: str) -> list[tuple[int, int]]:
    """Spans of the blank-line separated paragraphs of ``text`` (whitespace-trimmed; text unchanged)."""
    return [t for a, b in blank_line_spans(text, 0, len(text), BLANK_LINES) if (t := trim_span(text, a, b))]


#: prefix of a chunk key whose name the document's own metadata already uses (the document's value is kept)
CLASH_PREFIX = "litseg_"


def chunk_key(key: str, extra: Mapping[str, Any] | None) -> str:
    """Where :func:`chunk_metadata` puts the chunk's ``key`` beside the document's own metadata ``extra``:
    ``key`` itself, or ``litseg_<key>`` (repeated) when ``extra`` already has that name."""
    while extra and key in extra:
        key = CLASH_PREFIX + key
    return key


def chunk_metadata(c: Chunk, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One chunk's metadata: ``doc_id``, ``chunk_id`` (:func:`chunk_uid`, unique across documents and calls),
    method, unit, sentence range, spans into the document text (``start_index`` / ``end_index``: the main
    text's; None for a chunk that is no span of it; the main text is ``text[start_index:end_index]``, or the
    spans joined), LitSeg's subtitle and context sentence indices. Beside the document's own metadata
    ``extra``, which is never overwritten: a name it already uses gets the chunk's value as ``litseg_<name>``."""
    spans = [list(s) for s in c.spans] if c.is_source_span else []
    md = {"doc_id": c.book_id, "chunk_id": chunk_uid(c), "local_chunk_id": c.chunk_id,
          "method": c.method, "unit_id": c.unit_id, "from_idx": c.from_idx,
          "to_idx": c.to_idx, "context_idx": list(c.context_idx), "subtitle": c.subtitle, "spans": spans,
          "start_index": spans[0][0] if spans else None, "end_index": spans[-1][1] if spans else None,
          "is_source_span": c.is_source_span}
    for k in ("fallback", "alignment", "outside_units", "unit_title", TEXT_VERSION):
        if k in c.metadata:
            md[k] = c.metadata[k]
    out = dict(extra or {})
    out.update({chunk_key(k, extra): v for k, v in md.items()})
    return out


def chunk_uid(c: Chunk) -> str:
    """A chunk's id across documents and calls: ``<doc_id>/<text sha256[:8]>/<unit>.<chunk>`` (the same text
    under the same id: the same ids; another text under that id: other ids)."""
    return "/".join(p for p in (c.book_id, c.metadata.get(TEXT_VERSION), c.chunk_id) if p)


def flat_metadata(md: Mapping[str, Any]) -> dict[str, Any]:
    """``md`` with every value that is not a str, int, float, bool or None as a JSON string (a set as its
    sorted list, a date or other object as its str): several vector stores reject anything else."""
    def scalar(v: Any) -> Any:
        if v is None or isinstance(v, (str, int, float, bool)):
            return v
        if isinstance(v, (set, frozenset)):
            v = sorted(v, key=repr)
        return json.dumps(v, ensure_ascii=False, default=lambda x: sorted(x, key=repr)
                          if isinstance(x, (set, frozenset)) else str(x))
    return {k: scalar(v) for k, v in md.items()}


_EXPORTS = {"LitSegTextSplitter": "langchain", "LitSegNodeParser": "llamaindex", "LitSegChunker": "chonkie"}
__all__ = ["Segmenter", *_EXPORTS]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
