"""C99 (Choi 2000, "Advances in domain independent linear text segmentation"), our implementation
from the paper's description, with exact spans.

1. **Sentence vectors and similarity.** Every sentence of the unit becomes a bag of stemmed words
   (lower-cased letter runs, NLTK's English stop words removed, Porter stems); ``S[i, j]`` is the
   cosine of the count vectors of sentences *i* and *j* (0 when one has no word left).
2. **Rank transform.** Cosines of short sentences are unreliable in absolute value but their order
   is informative: ``R[i, j]`` = the share of the other cells of the ``r x r`` mask around
   ``(i, j)`` (``r = 11``; fewer cells near the matrix edge) whose similarity is lower than
   ``S[i, j]``. Worked example with a 3 x 3 mask: the centre 0.5 among neighbours
   ``0.1 0.2 0.9 / 0.3 [0.5] 0.6 / 0.4 0.5 0.8`` is higher than 4 of the 8 others, so ``R = 0.5``.
3. **Divisive clustering.** A segment ``[i, j]`` has inside sum ``s = Σ R`` over its square block and
   area ``a = (j - i + 1)²``; a segmentation's density is ``D = Σ s_k / Σ a_k``. Starting from the
   whole unit, each step makes the one split (of one segment, at one sentence) that maximises
   ``D``, until every sentence is a segment; ``D(m)`` is the density with *m* segments.
4. **Number of segments.** ``δD(m) = D(m) - D(m-1)``; with ``μ`` and ``v`` the mean and variance of
   ``δD(2..n)``, splitting stops before the first step whose gain falls below ``μ + c √v``
   (``c = 1.2``, Choi's value). The kept splits are the boundaries.

**Scores** (:mod:`litseg_nb.chunkers.scores`): a boundary before sentence *j* scores ``-step`` where
``step`` is when the clustering first split there (1 = the first split), so the top-|G| positions
are the first |G| splits: C99 with the number of segments given, as Choi also reports it.

A unit of fewer than three sentences is one chunk (counted as ``too_short``). Boundaries fall on
any sentence start (C99 does not know paragraphs); chunks are whole sentences, so every sentence
is covered once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..config import ConfigError, Options, at_least
from ..core.schema import Book, Chunk, Unit
from .base import chunks_from_boundaries
from .scores import attach_scores
from .texttiling import english_stopwords

_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class C99Options(Options):
    """C99 (Choi 2000) with the paper's values, not tuned on any benchmark: ``c99_mask`` the rank-transform
    mask (odd), ``c99_c``: splitting stops when the density gain falls below mean + c * std."""

    c99_mask: int = at_least(11, 3)
    c99_c: float = 1.2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.c99_mask % 2 == 0:
            raise ConfigError(f"{type(self).__name__}.c99_mask: {self.c99_mask} must be odd")


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def sentence_terms(sentences: Sequence[str]) -> list[list[str]]:
    """Stemmed content words of each sentence (step 1)."""
    stop = set(english_stopwords())
    st = _stemmer()
    return [[st.stem(w) for w in _LETTERS.findall(s.lower()) if w not in stop] for s in sentences]


def similarity_matrix(terms: Sequence[Sequence[str]]) -> np.ndarray:
    """Cosine similarity of the sentences' term-count vectors (0 for an empty sentence)."""
    vocab: dict[str, int] = {}
    for ts in terms:
        for t in ts:
            vocab.setdefault(t, len(vocab))
    m = np.zeros((len(terms), max(len(vocab), 1)), dtype=np.float64)
    for i, ts in enumerate(terms):
        for t in ts:
            m[i, vocab[t]] += 1.0
    norm = np.linalg.norm(m, axis=1)
    norm[norm == 0] = 1.0
    u = m / norm[:, None]
    return u @ u.T


def rank_matrix(sim: np.ndarray, mask: int = 11) -> np.ndarray:
    """Step 2: share of the other cells of the ``mask x mask`` neighbourhood with a lower value."""
    if mask < 3 or mask % 2 == 0:
        raise ValueError(f"C99 mask must be odd and at least 3, got {mask}")
    n = sim.shape[0]
    h = mask // 2
    pad = np.full((n + 2 * h, n + 2 * h), np.nan)
    pad[h:h + n, h:h + n] = sim
    lower = np.zeros((n, n))
    seen = np.zeros((n, n))
    for dx in range(-h, h + 1):
        for dy in range(-h, h + 1):
            if dx == 0 and dy == 0:
                continue
            nb = pad[h + dx:h + dx + n, h + dy:h + dy + n]
            valid = ~np.isnan(nb)
            seen += valid
            lower += valid & (nb < sim)
    return np.divide(lower, seen, out=np.zeros_like(lower), where=seen > 0)


def divisive_clustering(rank: np.ndarray) -> tuple[list[int], list[float]]:
    """Step 3: the split positions in the order made (0-based index of a segment's first sentence)
    and the density ``D(m)`` for ``m = 1..n`` segments."""
    n = rank.shape[0]
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = rank.cumsum(0).cumsum(1)

    def block(i: np.ndarray, j: np.ndarray) -> np.ndarray:  # Σ R over [i..j] x [i..j], inclusive
        return p[j + 1, j + 1] - p[i, j + 1] - p[j + 1, i] + p[i, i]

    edges = np.array([0, n])  # segment starts + n
    inside, area = float(block(np.array([0]), np.array([n - 1]))[0]), float(n * n)
    density = [inside / area]
    order: list[int] = []
    free = np.arange(1, n)  # positions not yet split
    while len(free):
        k = np.searchsorted(edges, free, side="right")
        st, en = edges[k - 1], edges[k] - 1
        s_seg, s_l, s_r = block(st, en), block(st, free - 1), block(free, en)
        a_seg, a_l, a_r = (en - st + 1) ** 2, (free - st) ** 2, (en - free + 1) ** 2
        d = (inside - s_seg + s_l + s_r) / (area - a_seg + a_l + a_r)
        best = int(np.argmax(d))
        b = int(free[best])
        inside += float(s_l[best] + s_r[best] - s_seg[best])
        area += float(a_l[best] + a_r[best] - a_seg[best])
        density.append(inside / area)
        order.append(b)
        edges = np.sort(np.append(edges, b))
        free = np.delete(free, best)
    return order, density


def segment_count(density: Sequence[float], c: float = 1.2) -> int:
    """Step 4: the number of segments (1 when the gains do not vary)."""
    g = np.diff(np.asarray(density, dtype=float))  # δD(2..n)
    if len(g) < 2 or float(np.std(g)) == 0.0:
        return 1
    thr = float(np.mean(g) + c * np.std(g))
    m = 1
    for x in g:
        if x < thr:
            break
        m += 1
    return m


def c99_boundaries(sentences: Sequence[str], mask: int = 11, c: float = 1.2) -> tuple[list[int], list[int]]:
    """(boundaries as 1-based first sentences of segments 2.., the split order as 1-based positions)."""
    n = len(sentences)
    if n < 3:
        return [], []
    rank = rank_matrix(similarity_matrix(sentence_terms(sentences)), mask)
    order, density = divisive_clustering(rank)
    m = segment_count(density, c)
    return sorted(b + 1 for b in order[:m - 1]), [b + 1 for b in order]


def c99_chunks(book: Book, unit: Unit, mask: int = 11, c: float = 1.2, method: str = "c99",
               stats: dict[str, int] | None = None) -> list[Chunk]:
    """C99 chunks of one unit (whole sentences) with the split order attached as scores."""
    if not unit.sentences:
        return []
    sents = [unit.sentence_text(book.text, s.index) for s in unit.sentences]
    bounds, order = c99_boundaries(sents, mask, c)
    if len(sents) < 3 and stats is not None:
        stats["too_short"] = stats.get("too_short", 0) + 1
    chunks = chunks_from_boundaries(book, unit, method, [1] + bounds, {"c99_segments": len(bounds) + 1})
    step = {b: i + 1 for i, b in enumerate(order)}
    attach_scores(chunks, [(-float(step[j]) if j in step else None) for j in range(2, unit.n_sentences + 1)],
                  unit.n_sentences)
    return chunks
