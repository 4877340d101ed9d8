"""What the three host-library adapters share: one :class:`Segmenter` per adapter instance.

It turns a document's text into a :class:`~litseg_nb.core.schema.Book` *without cleaning* (so every
offset points into the text the host library holds), runs :func:`litseg_nb.segment` with the method,
profile and config overrides it was given, and builds the backend / embedder once, on first use, for
all the documents it sees.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from ..core.schema import Book, Chunk
from ..segmenters.registry import get_method
from ..llm import make_backend
from ..llm.embeddings import load_embedder
from ..corpus import index_book
from ..api import segment
from ..chunkers.base import trim_span


class Segmenter:
    """``Segmenter(method, profile, **options)``: ``options`` are overrides of the method's config
    (``llm={"backend": "openai", "base_urls": ("http://host:8000/v1",), "model": "Qwen/Qwen3-8B"}``,
    ``lumber_budget_tokens=400``, a ``lib:`` preset's ``chunk_size=...``). ``backend`` / ``embedder``
    reuse models already built."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", backend: Any = None, embedder: Any = None,
                 **options: Any):
        self.method = method
        self.profile = profile
        self.options = dict(options)
        self.spec = get_method(method)
        self.cfg = self.spec.config_class().for_profile(profile, **self.options)  # unknown keys raise here
        self._backend = backend
        self._embedder = embedder

    @property
    def backend(self) -> Any:
        if self._backend is None and self.spec.needs_llm:
            self._backend = make_backend(self.cfg.llm)
        return self._backend

    @property
    def embedder(self) -> Any:
        if self._embedder is None and self.spec.needs_embedder:
            self._embedder = load_embedder(self.cfg.embedding)
        return self._embedder

    def book(self, text: str, doc_id: str | None = None, title: str | None = None) -> Book:
        """The text as a unit-split, sentence-indexed book (offsets = offsets into ``text``)."""
        doc_id = doc_id or "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        book = Book(book_id=doc_id, title=title or doc_id, dataset="text", text=text,
                    paragraphs=text_paragraphs(text), source=doc_id)
        return index_book(book, self.cfg.corpus.max_unit_words, self.cfg.corpus.sentence_splitter)

    def segment(self, text: str, doc_id: str | None = None, title: str | None = None) -> tuple[Book, list[Chunk]]:
        """``(book, chunks)`` of ``text``; an empty or whitespace-only text has no chunks."""
        if not text.strip():
            return Book(doc_id or "text:empty", title or "", "text", text), []
        book = self.book(text, doc_id, title)
        if not any(u.n_sentences for u in book.units):
            return book, []
        chunks = segment(book, self.method, profile=self.profile, backend=self.backend, embedder=self.embedder,
                         **self.options)
        return book, chunks


def text_paragraphs(text: str) -> list[tuple[int, int]]:
    """Spans of the blank-line separated paragraphs of ``text`` (whitespace-trimmed; text unchanged)."""
    out, pos = [], 0
    for m in [*re.finditer(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)", text), None]:  # LF, CRLF or CR files
        end = m.start() if m else len(text)
        span = trim_span(text, pos, end)
        if span:
            out.append(span)
        pos = m.end() if m else pos
    return out


def chunk_metadata(c: Chunk, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Flat metadata of one chunk: method, unit, sentence range, spans into the document text
    (``start_index``/``end_index``: first and last character of the main text; None for a chunk that
    is not a span of the text), LitSeg's subtitle and context sentence indices."""
    spans = [list(s) for s in c.spans] if c.is_source_span else []
    md = {"method": c.method, "chunk_id": c.chunk_id, "unit_id": c.unit_id, "from_idx": c.from_idx,
          "to_idx": c.to_idx, "context_idx": list(c.context_idx), "subtitle": c.subtitle, "spans": spans,
          "start_index": spans[0][0] if spans else None, "end_index": spans[-1][1] if spans else None,
          "main_text": c.main_text, "is_source_span": c.is_source_span}
    for k in ("fallback", "alignment"):
        if k in c.metadata:
            md[k] = c.metadata[k]
    return {**(extra or {}), **md}
