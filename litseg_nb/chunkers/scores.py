"""Per-candidate boundary scores, read by the boundary benchmark's top-``|G|`` rows.

A score-based segmenter puts ``metadata["boundary_scores"] = [s_2, ..., s_n]`` (higher = more
boundary-like, ``None`` = unscored) on each unit's first chunk; perplexity chunks derive theirs.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

KEY = "boundary_scores"


def attach_scores(chunks: Sequence[Any], scores: Sequence[float | None], n_sentences: int) -> None:
    """Put ``scores`` (``n_sentences - 1`` values, candidates 2..n) on the first chunk of a unit."""
    if len(scores) != max(n_sentences - 1, 0):
        raise ValueError(f"{len(scores)} boundary scores for a unit of {n_sentences} sentences "
                         f"(expected {max(n_sentences - 1, 0)})")
    if chunks:
        first = min(chunks, key=lambda c: c.from_idx)
        first.metadata[KEY] = [None if v is None or not math.isfinite(float(v)) else round(float(v), 6)
                               for v in scores]


def _ppl_scores(chunks: Sequence[Any], n: int) -> list[float | None] | None:
    """Perplexity chunking's boundary strength: strict minima by their larger drop (the ``>= θ`` test),
    every other position below every minimum."""
    ppl: dict[int, float] = {}
    for c in chunks:
        vals = c.metadata.get("ppl")
        if vals is None:
            return None
        for i, v in zip(range(c.from_idx, c.to_idx + 1), vals):
            ppl.setdefault(i, float(v))
    if len(ppl) != n:
        return None
    out: list[float | None] = [None] if n > 1 else []  # find_minima never cuts after the first sentence
    for m in range(2, n):  # m: the sentence ending the chunk
        left, right = ppl[m - 1] - ppl[m], ppl[m + 1] - ppl[m]
        if left > 0 and right >= 0:
            out.append(max(left, right))
        else:
            out.append(min(left, right) - 1e6)
    return out


def unit_scores(chunks: Sequence[Any], n_sentences: int, method: str | None = None) -> list[float | None] | None:
    for c in chunks:
        s = c.metadata.get(KEY)
        if s is not None:
            if len(s) != max(n_sentences - 1, 0):
                raise ValueError(f"{c.chunk_id}: {len(s)} boundary scores for {n_sentences} sentences")
            return list(s)
    if (method or "").split("@")[0] == "perplexity" and chunks:  # its per-sentence values
        return _ppl_scores(chunks, n_sentences)
    return None


def top_k(scores: Sequence[float | None], k: int) -> list[int]:
    """The ``k`` top-scored boundary positions (sentences 2..n; ties: the earlier; unscored last)."""
    cand = list(range(2, len(scores) + 2))

    def key(j: int):
        v = scores[j - 2]
        return (0, -v, j) if v is not None else (1, 0.0, j)

    return sorted(sorted(cand, key=key)[:max(k, 0)])
