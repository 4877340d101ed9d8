"""Per-book retrieval indices, dense (FAISS inner product over normalised embeddings) and sparse (BM25), and
the fusion of their rankings (reciprocal rank fusion, the paper's hybrid; weighted RRF; min-max linear)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from ..metrics.retrieval import evidence_form, normalize_for_match

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def bm25_tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (2+ chars) without English stopwords — same for chunks and queries."""
    from bm25s.stopwords import STOPWORDS_EN

    stop = set(STOPWORDS_EN)
    return [t for t in _TOKEN.findall(text.lower()) if t not in stop]


@dataclass
class BookIndex:
    """Dense + BM25 index over one book's chunks of one chunker."""

    book_id: str
    chunk_ids: list[str]
    texts: list[str]
    bm25: Any = None
    dense: Any = None  # faiss.IndexFlatIP

    @classmethod
    def build(cls, book_id: str, chunk_ids: Sequence[str], texts: Sequence[str], embeddings: np.ndarray,
              k1: float = 1.5, b: float = 0.75) -> "BookIndex":
        import bm25s
        import faiss

        emb = np.ascontiguousarray(np.asarray(embeddings, dtype=np.float32))
        dense = faiss.IndexFlatIP(emb.shape[1])
        dense.add(emb)
        bm25 = bm25s.BM25(k1=k1, b=b)
        bm25.index([bm25_tokenize(t) or ["<empty>"] for t in texts], show_progress=False)
        return cls(book_id, list(chunk_ids), list(texts), bm25, dense)

    def __len__(self) -> int:
        return len(self.texts)

    @functools.cached_property
    def _norm_texts(self) -> list[str]:
        return [normalize_for_match(t) for t in self.texts]

    def relevant(self, evidence: str) -> set[int]:
        """Indices of the chunks that contain ``evidence`` (normalised containment)."""
        ev = evidence_form(evidence)
        return {i for i, t in enumerate(self._norm_texts) if ev in t}

    def dense_search(self, query_emb: np.ndarray, k: int) -> list[tuple[int, float]]:
        q = np.ascontiguousarray(np.asarray(query_emb, dtype=np.float32).reshape(1, -1))
        scores, idx = self.dense.search(q, min(k, len(self)))
        return [(int(i), float(s)) for i, s in zip(idx[0], scores[0]) if i >= 0]

    def sparse_search(self, query: str, k: int) -> list[tuple[int, float]]:
        toks = bm25_tokenize(query)
        if not toks:
            return []
        docs, scores = self.bm25.retrieve([toks], k=min(k, len(self)), show_progress=False)
        return [(int(i), float(s)) for i, s in zip(docs[0], scores[0]) if s > 0]  # score 0 = no term match


class LibraryIndex:
    """One :class:`BookIndex` per book for one chunker; lookups are always per book."""

    def __init__(self, books: Mapping[str, BookIndex]):
        self.books = dict(books)

    def book(self, book_id: str) -> BookIndex:
        try:
            return self.books[book_id]
        except KeyError:
            raise KeyError(f"no index for book {book_id!r} (indexed: {sorted(self.books)})") from None

    @classmethod
    def build(cls, chunks: Sequence[Any], embedder: Any, k1: float = 1.5, b: float = 0.75) -> "LibraryIndex":
        """Index shared-schema chunks (grouped by ``book_id``); embeddings use ``kind="passage"``."""
        by_book: dict[str, list[Any]] = {}
        for c in chunks:
            by_book.setdefault(c.book_id, []).append(c)
        out = {}
        for bid, cs in by_book.items():
            texts = [c.text for c in cs]
            emb = embedder.encode(texts, kind="passage")
            out[bid] = BookIndex.build(bid, [c.chunk_id for c in cs], texts, emb, k1=k1, b=b)
        return cls(out)


Ranked = Sequence[tuple[int, float]]  # (doc index, score), best first


def rrf_fuse(lists: Sequence[Ranked], k: int = 60, weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """Reciprocal rank fusion (Cormack et al. 2009): ``score(d) = sum_lists w_l / (k + rank_l(d))``, weights 1
    by default; ties broken by the best single rank, then document index."""
    if weights is None:
        weights = [1.0] * len(lists)
    if len(weights) != len(lists) or any(w < 0 for w in weights):
        raise ValueError(f"need one non-negative weight per list, got {list(weights)} for {len(lists)} lists")
    score: dict[int, float] = {}
    best: dict[int, int] = {}
    for lst, w in zip(lists, weights):
        for rank, (doc, _s) in enumerate(lst, 1):
            score[doc] = score.get(doc, 0.0) + w / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    return sorted(score.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))


def weighted_rrf_fuse(dense: Ranked, sparse: Ranked, dense_weight: float, k: int = 60) -> list[tuple[int, float]]:
    """RRF with per-retriever weights ``2w`` (dense) and ``2(1 - w)`` (sparse): ``w = 0.5`` is plain RRF."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    return rrf_fuse([dense, sparse], k=k, weights=[2 * dense_weight, 2 * (1 - dense_weight)])


def _minmax(lst: Ranked) -> dict[int, float]:
    if not lst:
        return {}
    vals = [s for _, s in lst]
    lo, hi = min(vals), max(vals)
    return {d: (1.0 if hi == lo else (s - lo) / (hi - lo)) for d, s in lst}


def weighted_fuse(dense: Ranked, sparse: Ranked, dense_weight: float = 0.5) -> list[tuple[int, float]]:
    """``w * minmax(dense) + (1 - w) * minmax(sparse)``; a document absent from a list scores 0 there."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    d, s = _minmax(dense), _minmax(sparse)
    docs = set(d) | set(s)
    return sorted(((doc, dense_weight * d.get(doc, 0.0) + (1 - dense_weight) * s.get(doc, 0.0)) for doc in docs),
                  key=lambda kv: (-kv[1], kv[0]))
