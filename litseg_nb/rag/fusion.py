"""Fusing dense and sparse candidate lists: reciprocal rank fusion (the paper's hybrid), RRF with
per-retriever weights, and score-normalised (min-max) linear fusion."""
from __future__ import annotations

from typing import Sequence

Ranked = Sequence[tuple[int, float]]  # (doc index, score), best first


def rrf_fuse(lists: Sequence[Ranked], k: int = 60, top_k: int | None = None,
             weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """Reciprocal rank fusion (Cormack et al. 2009): ``score(d) = sum_lists w_l / (k + rank_l(d))``.

    ``weights`` default to 1 for every list (the paper's hybrid). Ties are broken by the best
    single rank, then by document index (deterministic).
    """
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
    out = sorted(score.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))
    return out[:top_k] if top_k else out


def weighted_rrf_fuse(dense: Ranked, sparse: Ranked, dense_weight: float, k: int = 60,
                      top_k: int | None = None) -> list[tuple[int, float]]:
    """RRF with per-retriever weights ``2w`` (dense) and ``2(1 - w)`` (sparse): ``w = 0.5`` is plain RRF."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    return rrf_fuse([dense, sparse], k=k, top_k=top_k, weights=[2 * dense_weight, 2 * (1 - dense_weight)])


def _minmax(lst: Ranked) -> dict[int, float]:
    if not lst:
        return {}
    vals = [s for _, s in lst]
    lo, hi = min(vals), max(vals)
    return {d: (1.0 if hi == lo else (s - lo) / (hi - lo)) for d, s in lst}


def weighted_fuse(dense: Ranked, sparse: Ranked, dense_weight: float = 0.5,
                  top_k: int | None = None) -> list[tuple[int, float]]:
    """``w * minmax(dense) + (1 - w) * minmax(sparse)``; a document absent from a list scores 0 there."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    d, s = _minmax(dense), _minmax(sparse)
    docs = set(d) | set(s)
    out = sorted(((doc, dense_weight * d.get(doc, 0.0) + (1 - dense_weight) * s.get(doc, 0.0)) for doc in docs),
                 key=lambda kv: (-kv[1], kv[0]))
    return out[:top_k] if top_k else out
