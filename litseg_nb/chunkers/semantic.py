"""Semantic chunker: LangChain experimental ``SemanticChunker`` behaviour on the unit's sentences.

Each sentence joined with ``buffer_size`` neighbours on each side is embedded; a chunk ends after
sentence *i* when the cosine distance between consecutive windows exceeds the given percentile of
the unit's distances. Unlike LangChain, the unit's own sentences are used (chunks keep sentence
indices) and the embeddings come from the shared cached embedder.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..config import Options, at_least, between
from ..core.schema import Book, Chunk, Unit
from .base import chunks_from_boundaries
from .scores import attach_scores

PROGRESS_MIN_TEXTS = 256  # sentence windows from which embedding them shows a tqdm bar


def combined_sentences(sentences: Sequence[str], buffer_size: int) -> list[str]:
    n = len(sentences)
    return [" ".join(sentences[max(0, i - buffer_size):min(n, i + buffer_size + 1)]) for i in range(n)]


def cosine_distances(emb: np.ndarray) -> np.ndarray:
    """``1 - cos(e_i, e_{i+1})`` for consecutive rows."""
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


def _windows(book: Book, unit: Unit, buffer_size: int) -> list[str]:
    return combined_sentences([unit.sentence_text(book.text, s.index) for s in unit.sentences], buffer_size)


def _chunks_from_embeddings(book: Book, unit: Unit, emb: np.ndarray | None, percentile: float,
                            method: str) -> list[Chunk]:
    if len(unit.sentences) <= 1:
        return chunks_from_boundaries(book, unit, method, [1]) if unit.sentences else []
    d = cosine_distances(emb)
    starts = [1] + [i + 2 for i in percentile_breakpoints(d, percentile)]
    chunks = chunks_from_boundaries(book, unit, method, starts)
    attach_scores(chunks, [float(x) for x in d], unit.n_sentences)
    return chunks


def semantic_chunks(book: Book, unit: Unit, embedder, percentile: float, buffer_size: int,
                    method: str = "semantic") -> list[Chunk]:
    windows = _windows(book, unit, buffer_size)
    emb = embedder.encode(windows, kind="passage") if len(windows) > 1 else None
    return _chunks_from_embeddings(book, unit, emb, percentile, method)


def semantic_chunks_many(items: Sequence[tuple[Book, Unit]], embedder, percentile: float, buffer_size: int,
                         method: str = "semantic") -> list[list[Chunk]]:
    """:func:`semantic_chunks` of every ``(book, unit)``, the windows of all units embedded in one call
    (batched longest first across units: less padding, the same vectors up to round-off)."""
    windows = [_windows(b, u, buffer_size) for b, u in items]
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
