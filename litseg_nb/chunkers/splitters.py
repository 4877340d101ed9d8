"""The splitters: token windows (LitSeg App. H), paragraphs, LangChain's recursive character splitter,
and LangChain experimental's ``SemanticChunker`` rule on the unit's own sentences. Spans are exact:
a token window runs to the next token's start, recursive pieces are located by construction bounds.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..config import ConfigError, Options, at_least, between
from ..core.schema import Book, Chunk, Span, Unit
from .base import (ChunkerError, Tokenizer, TokenizerOption, chunks_from_boundaries, chunks_from_spans,
                   unit_paragraphs, where)
from .scores import attach_scores


def token_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    if size <= 0 or not 0 <= overlap < size:
        raise ChunkerError(f"token splitter: need size > 0 and 0 <= overlap < size, got {size}, {overlap}")
    if n_tokens == 0:
        return []
    step = size - overlap  # windows start every step tokens until one reaches the end
    return [(i, min(i + size, n_tokens)) for i in range(0, max(n_tokens - size, 0) + step, step)]


def token_chunks(book: Book, unit: Unit, tokenizer: Tokenizer, size: int, overlap: int,
                 method: str = "token") -> list[Chunk]:
    text = unit.text(book.text)
    offs = tokenizer.offsets(text)
    if not offs:
        if text.strip():
            raise ChunkerError(f"{method}: tokenizer {tokenizer.name} gives no tokens for {where(book, unit)}")
        return []
    windows = token_windows(len(offs), size, overlap)
    spans = [(unit.start + (0 if i == 0 else offs[i][0]), unit.start + (offs[j][0] if j < len(offs) else len(text)))
             for i, j in windows]
    return chunks_from_spans(book, unit, method, spans, [{"tokens": j - i} for i, j in windows])


@dataclass(frozen=True)
class TokenOptions(TokenizerOption):
    token_chunk_size: int = at_least(400, 1)  # tokens per window
    token_chunk_overlap: int = at_least(40, 0)  # < token_chunk_size

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.token_chunk_overlap >= self.token_chunk_size:
            raise ConfigError(f"{type(self).__name__}.token_chunk_overlap: {self.token_chunk_overlap} must be below "
                              f"token_chunk_size ({self.token_chunk_size})")


def paragraph_chunks(book: Book, unit: Unit, method: str = "paragraph") -> list[Chunk]:
    """One chunk per paragraph of the unit (a row of LumberChunker's Table 1)."""
    return chunks_from_spans(book, unit, method, unit_paragraphs(book, unit))


@dataclass(frozen=True)
class ParagraphOptions(Options):
    """The ``paragraph`` method has no knob: one chunk per paragraph of the unit."""


def make_recursive_splitter(chunk_size: int, chunk_overlap: int, separators: Sequence[str]):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=list(separators),
        keep_separator="end", strip_whitespace=True, length_function=len,
    )


def locate_chunks(text: str, pieces: Sequence[str], overlap: int) -> list[Span]:
    """Exact ``[start, end)`` of each piece in ``text``; text left between or after the pieces raises."""
    spans: list[Span] = []
    prev_start, prev_end = -1, 0
    for k, piece in enumerate(pieces):
        if not piece:
            continue
        lo = max(prev_start + 1, prev_end - overlap, 0)
        pos = text.find(piece, lo)
        if pos < 0:
            raise ChunkerError(f"recursive: chunk {k} ({piece[:40]!r}...) not found after offset {lo}")
        if text[prev_end:pos].strip() and pos > prev_end:
            raise ChunkerError(f"recursive: text between chunks {k - 1} and {k} would be lost: "
                               f"{text[prev_end:pos][:60]!r}")
        spans.append((pos, pos + len(piece)))
        prev_start, prev_end = pos, max(prev_end, pos + len(piece))
    if text[prev_end:].strip():
        raise ChunkerError(f"recursive: trailing text would be lost: {text[prev_end:][:60]!r}")
    return spans


def recursive_chunks(book: Book, unit: Unit, splitter, chunk_overlap: int,
                     method: str = "recursive") -> list[Chunk]:
    text = unit.text(book.text)
    pieces = splitter.split_text(text)
    try:
        spans = locate_chunks(text, pieces, chunk_overlap)
    except ChunkerError as e:
        raise ChunkerError(f"{e} ({where(book, unit)})") from e
    return chunks_from_spans(book, unit, method, [(unit.start + a, unit.start + b) for a, b in spans])


@dataclass(frozen=True)
class RecursiveOptions(Options):
    """The ``recursive`` method (LangChain's RecursiveCharacterTextSplitter, sizes in characters)."""

    recursive_chunk_size: int = at_least(1800, 1)  # characters (LangChain measures len())
    recursive_chunk_overlap: int = at_least(200, 0)  # < recursive_chunk_size
    # LitSeg App. H: "paragraph breaks, newlines, punctuation, and whitespace"
    recursive_separators: tuple[str, ...] = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ", "")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recursive_chunk_overlap >= self.recursive_chunk_size:
            raise ConfigError(f"{type(self).__name__}.recursive_chunk_overlap: {self.recursive_chunk_overlap} must be "
                              f"below recursive_chunk_size ({self.recursive_chunk_size})")


PROGRESS_MIN_TEXTS = 256  # sentence windows from which embedding them shows a tqdm bar


def combined_sentences(sentences: Sequence[str], buffer_size: int) -> list[str]:
    n = len(sentences)
    return [" ".join(sentences[max(0, i - buffer_size):min(n, i + buffer_size + 1)]) for i in range(n)]


def cosine_distances(emb: np.ndarray) -> np.ndarray:
    if len(emb) < 2:
        return np.zeros(0, dtype=np.float64)
    a, b = emb[:-1].astype(np.float64), emb[1:].astype(np.float64)
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return 1.0 - (a * b).sum(axis=1) / np.maximum(na * nb, 1e-12)


def percentile_breakpoints(distances: np.ndarray, percentile: float) -> list[int]:
    """0-based indices *i* (chunk ends after sentence i) with distance above the percentile."""
    if len(distances) == 0:
        return []
    thr = float(np.percentile(distances, percentile))
    return [i for i, d in enumerate(distances) if d > thr]


def _chunks_from_embeddings(book: Book, unit: Unit, emb: np.ndarray | None, percentile: float,
                            method: str) -> list[Chunk]:
    if len(unit.sentences) <= 1:
        return chunks_from_boundaries(book, unit, method, [1]) if unit.sentences else []
    d = cosine_distances(emb)
    starts = [1] + [i + 2 for i in percentile_breakpoints(d, percentile)]
    chunks = chunks_from_boundaries(book, unit, method, starts)
    attach_scores(chunks, [float(x) for x in d], unit.n_sentences)
    return chunks


def semantic_chunks_many(items: Sequence[tuple[Book, Unit]], embedder, percentile: float, buffer_size: int,
                         method: str = "semantic") -> list[list[Chunk]]:
    """Semantic chunks of every ``(book, unit)``, the windows of all units embedded in one call."""
    windows = [combined_sentences([u.sentence_text(b.text, s.index) for s in u.sentences], buffer_size)
               for b, u in items]
    flat = [w for ws in windows if len(ws) > 1 for w in ws]
    show = len(flat) >= PROGRESS_MIN_TEXTS and "show_progress" in inspect.signature(embedder.encode).parameters
    emb = (embedder.encode(flat, kind="passage", **({"show_progress": True} if show else {})) if flat
           else np.zeros((0, 0), dtype=np.float32))
    out, pos = [], 0
    for (b, u), ws in zip(items, windows):
        part = None
        if len(ws) > 1:
            part, pos = emb[pos:pos + len(ws)], pos + len(ws)
        out.append(_chunks_from_embeddings(b, u, part, percentile, method))
    return out


@dataclass(frozen=True)
class SemanticOptions(Options):
    """Options of the ``semantic`` method (LangChain's SemanticChunker defaults)."""

    semantic_breakpoint_percentile: float = between(95.0, 0.0, 100.0)
    semantic_buffer_size: int = at_least(1, 0)
