"""Shared helpers of the baseline chunkers: tokenizers, unit paragraphs, chunk assembly, dynamic merge.

Chunks carry exact character ``spans`` into ``Book.text`` and the unit's 1-based sentences they overlap.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config import Options
from ..errors import LitsegError
from ..core.schema import Book, Chunk, Span, Unit, make_sentence_chunk, make_span_chunk
from ..llm.models import load_tokenizer as load_hf_tokenizer


class ChunkerError(LitsegError, RuntimeError):
    """A chunker failed on a unit (the message names method, book and unit)."""


def where(book: Book, unit: Unit) -> str:
    return f"book {book.book_id!r} unit {unit.unit_id!r}"


class Tokenizer:
    """A Hugging Face fast tokenizer with the two things chunkers need: counts and offsets."""

    def __init__(self, hf_tokenizer: Any, name: str):
        self.hf = hf_tokenizer
        self.name = name

    def count(self, text: str) -> int:
        return len(self.hf(text, add_special_tokens=False, verbose=False)["input_ids"])

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        enc = self.hf(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [len(x) for x in enc]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self.hf(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [tuple(o) for o in enc["offset_mapping"]]


class MemoTokenizer:
    """A tokenizer's counts, each text counted once (keyed by its BLAKE2b digest)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = getattr(inner, "name", "tokenizer")
        self._counts: dict[bytes, int] = {}

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        keys = [self._key(t) for t in texts]
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in self._counts:
                todo.setdefault(k, t)
        self._counts.update(zip(todo, self.inner.count_many(list(todo.values()))))
        return [self._counts[k] for k in keys]


@functools.lru_cache(maxsize=8)
def _load_hf_tokenizer(name: str):
    tok = load_hf_tokenizer(name)
    if not getattr(tok, "is_fast", False):
        raise ChunkerError(f"tokenizer {name!r} is not a fast tokenizer (character offsets are needed)")
    return tok


def load_tokenizer(name: str, backend: Any = None) -> Tokenizer:
    """Tokenizer by name: a packaged model name, a local path, or ``"llm"`` (the backend's)."""
    if name == "llm":
        tok = getattr(backend, "tokenizer", None)
        if tok is None:
            raise ChunkerError("tokenizer='llm' needs an LLM backend that exposes a Hugging Face tokenizer")
        return Tokenizer(tok, f"llm:{getattr(backend, 'model_id', '?')}")
    return Tokenizer(_load_hf_tokenizer(name), name)


@dataclass(frozen=True)
class TokenizerOption(Options):
    """The statistics tokenizer: a packaged name, a local path, or "llm" (the backend's own)."""

    tokenizer: str = "all-MiniLM-L6-v2"


def boundary_positions(chunks: Sequence[Any], book_id: str, unit_id: str) -> list[int]:
    """Sentence indices where a chunk of the unit starts, except the unit's first sentence."""
    return sorted({c.from_idx for c in chunks if c.book_id == book_id and c.unit_id == unit_id
                   and c.is_source_span and c.from_idx > 1})


_BLANK_LINES = re.compile(r"\n[ \t]*\n")


def blank_line_spans(text: str, start: int, end: int, blank: re.Pattern = _BLANK_LINES) -> list[Span]:
    """The (untrimmed) spans of ``text[start:end]`` between the matches of ``blank``."""
    cuts = [start, *(i for m in blank.finditer(text, start, end) for i in m.span()), end]
    return list(zip(cuts[::2], cuts[1::2]))


def trim_span(text: str, start: int, end: int) -> Span | None:
    piece = text[start:end]
    a = start + len(piece) - len(piece.lstrip())
    b = a + len(piece.strip())
    return (a, b) if a < b else None


def unit_paragraphs(book: Book, unit: Unit) -> list[Span]:
    """Trimmed paragraph spans of ``unit``: its own, else the book's overlapping it, else blank lines."""
    spans: list[Span] = list(unit.paragraphs)
    if not spans and book.paragraphs:
        spans = [(max(a, unit.start), min(b, unit.end)) for a, b in book.paragraphs
                 if a < unit.end and b > unit.start]
    if not spans:
        spans = blank_line_spans(book.text, unit.start, unit.end)
    return [t for a, b in sorted(spans) if (t := trim_span(book.text, max(a, unit.start), min(b, unit.end)))]


def chunks_from_spans(book: Book, unit: Unit, method: str, spans: Sequence[Span],
                      metadata: Sequence[dict[str, Any]] | None = None) -> list[Chunk]:
    """Chunks for character spans of the unit; a span overlapping no sentence joins a neighbouring one."""
    sents = unit.sentences
    items: list[list[Any]] = []  # [start, end, metadata]
    pending_start: int | None = None
    for i, (a, b) in enumerate(spans):
        t = trim_span(book.text, a, b)
        if t is None:
            continue
        a, b = t
        md = dict(metadata[i]) if metadata else {}
        if pending_start is not None:
            a, pending_start = min(a, pending_start), None
        if not any(s.start < b and s.end > a for s in sents):
            if items:
                items[-1][1] = max(items[-1][1], b)
            else:
                pending_start = a
            continue
        items.append([a, b, md])
    if pending_start is not None:
        raise ChunkerError(f"{method}: {where(book, unit)} has text but no sentence overlaps it")
    return [make_span_chunk(book, unit, method, k, a, b, md) for k, (a, b, md) in enumerate(items)]


def chunks_from_boundaries(book: Book, unit: Unit, method: str, starts: Sequence[int],
                           metadata: dict[str, Any] | None = None,
                           overlap_prev: Sequence[bool] = ()) -> list[Chunk]:
    """Sentence chunks for 1-based chunk starts; ``overlap_prev[k]``: chunk k also takes chunk k-1's last."""
    n = unit.n_sentences
    starts = sorted(set(starts))
    if not starts or starts[0] != 1 or starts[-1] > n:
        raise ChunkerError(f"{method}: invalid chunk starts {starts[:10]} for {unit.unit_id} ({n} sentences)")
    ends = [s - 1 for s in starts[1:]] + [n]
    return [make_sentence_chunk(book, unit, method, k, s - 1 if 0 < k < len(overlap_prev) and overlap_prev[k] else s,
                                e, metadata) for k, (s, e) in enumerate(zip(starts, ends))]


def merge_groups(lengths_of: Callable[[int, int], int], n: int, target: int) -> list[tuple[int, int]]:
    """Greedy groups ``[i, j)`` of ``n`` items; ``lengths_of(i, j)`` is the merged length of i..j-1."""
    if target <= 0:
        raise ValueError(f"merge target must be positive, got {target}")
    groups, i = [], 0
    while i < n:
        j = i + 1
        while j < n and lengths_of(i, j + 1) <= target:
            j += 1
        groups.append((i, j))
        i = j
    return groups


def merge_unit_chunks(book: Book, unit: Unit, chunks: Sequence[Chunk], target_tokens: int,
                      count_tokens: Callable[[str], int], method: str) -> list[Chunk]:
    """Dynamic merge (Meta-Chunking §3.1.3): one unit's chunks merged greedily within ``target_tokens``."""
    chunks = sorted(chunks, key=lambda c: (c.spans[0][0], c.spans[-1][1]))
    if not chunks:
        return []

    @functools.cache
    def length(i: int, j: int) -> int:
        a = chunks[i].spans[0][0]
        b = max(c.spans[-1][1] for c in chunks[i:j])
        return count_tokens(book.text[a:b])

    out = []
    for k, (i, j) in enumerate(merge_groups(length, len(chunks), target_tokens)):
        a = chunks[i].spans[0][0]
        b = max(c.spans[-1][1] for c in chunks[i:j])
        out.append(make_span_chunk(book, unit, method, k, a, b,
                                   {"merged_from": [c.chunk_id for c in chunks[i:j]], "tokens": length(i, j)}))
    return out


@dataclass(frozen=True)
class MergeOptions(TokenizerOption):
    merge_target_tokens: int = 334  # dynamic merge target L (LumberChunker's published mean)
