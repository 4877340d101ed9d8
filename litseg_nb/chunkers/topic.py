"""The classic topic segmenters: TextTiling (Hearst 1997, through NLTK) and C99 (Choi 2000), exact spans.

TextTiling cuts at paragraph starts; C99 is our implementation from the paper. Both attach
per-position scores (:mod:`.scores`); a unit too short for the method is one chunk (``too_short``).
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import ConfigError, Options, at_least
from ..core.schema import Book, Chunk, Unit
from .base import ChunkerError, chunks_from_boundaries, chunks_from_spans, unit_paragraphs, where
from .scores import attach_scores


_WORD = re.compile(r"[^ \t\n]+")  # NLTK counts words on the raw text between these characters
_NOT_KEPT = re.compile(r"[^a-z\-' \n\t]")  # the characters NLTK drops before it counts words
_LETTERS = re.compile(r"[^\W\d_]+")
_ONE_LINE = str.maketrans("\r\n\f\v", "    ")  # paragraphs joined by blank lines, as NLTK reads them


@dataclass(frozen=True)
class TextTilingOptions(Options):
    """TextTiling with NLTK's defaults: ``w`` words per pseudo-sentence, ``k`` pseudo-sentences per block."""

    texttiling_w: int = at_least(20, 2)
    texttiling_k: int = at_least(10, 1)


@lru_cache(maxsize=1)
def english_stopwords() -> tuple[str, ...]:
    """NLTK's English stop words: NLTK's data, else the copy llama-index-core ships (the same file)."""
    try:
        from nltk.corpus import stopwords

        return tuple(stopwords.words("english"))
    except LookupError:
        pass
    import importlib.util

    spec = importlib.util.find_spec("llama_index.core")
    if spec is not None and spec.origin:
        f = Path(spec.origin).parent / "_static" / "nltk_cache" / "corpora" / "stopwords" / "english"
        if f.is_file():
            return tuple(w.strip() for w in f.read_text(encoding="utf-8").splitlines() if w.strip())
    raise ChunkerError("texttiling needs NLTK's English stop words: neither nltk.download('stopwords') data "
                       "nor llama-index-core's bundled copy (llama_index/core/_static/nltk_cache) was found")


def block_comparison(tokseqs: Any, token_table: Any, k: int) -> list[float]:
    """NLTK's ``_block_comparison`` scores from prefix sums: bit for bit NLTK's, in linear time."""
    n = len(tokseqs)
    numgaps = n - 1
    if numgaps <= 0:
        return []
    vocab = list(token_table)
    counts = np.zeros((n + 1, len(vocab)), dtype=np.int64)  # row i + 1: pseudo-sentence i (row 0: zeros)
    for j, tok in enumerate(vocab):
        for seq, c in token_table[tok].ts_occurences:
            counts[int(seq) + 1, j] += c
    upto = np.cumsum(counts, axis=0)  # upto[i]: the counts of pseudo-sentences 0 .. i-1
    scores = []
    for g in range(numgaps):
        if g < k - 1:
            ws = g + 1
        elif g > numgaps - k:
            ws = numgaps - g
        else:
            ws = k
        b1 = upto[g + 1] - upto[g + 1 - ws]
        b2 = upto[min(g + 1 + ws, n)] - upto[g + 1]
        dividend, d1, d2 = int(b1 @ b2), int(b1 @ b1), int(b2 @ b2)
        scores.append(dividend / math.sqrt(d1 * d2) if d1 * d2 else 0.0)
    return scores


def _tokenizer(w: int, k: int):
    """NLTK's TextTiling (in demo mode: it also returns the gap scores) with :func:`block_comparison`."""
    from nltk.tokenize.texttiling import TextTilingTokenizer

    class FastBlockTextTiling(TextTilingTokenizer):
        def _block_comparison(self, tokseqs, token_table):
            return block_comparison(tokseqs, token_table, self.k)

    return FastBlockTextTiling(w=w, k=k, stopwords=list(english_stopwords()), demo_mode=True)


def joined_text(book: Book, unit: Unit) -> tuple[str, list[tuple[int, int]], list[int]]:
    """(text NLTK reads, the unit's paragraph spans in the book, each paragraph's start in that text)."""
    paras = unit_paragraphs(book, unit)
    texts = [book.text[a:b].translate(_ONE_LINE) for a, b in paras]
    starts = list(itertools.accumulate((len(p) + 2 for p in texts[:-1]), initial=0)) if texts else []
    return "\n\n".join(texts), paras, starts


def _gap_positions(text: str, n_gaps: int, w: int) -> list[int | None]:
    """Where NLTK's ``_normalize_boundaries`` places gap g in the raw text; None past the last word."""
    ends = [m.end() for m in _WORD.finditer(text)]
    # gap g: the word count must exceed x = max(g w, w): reached at the character after word x+1 ends
    return [ends[x] + 1 if x < len(ends) and ends[x] < len(text) else None
            for x in (max(g * w, w) for g in range(n_gaps))]


def texttiling_analysis(book: Book, unit: Unit, w: int = 20, k: int = 10) -> dict[str, Any]:
    """NLTK's TextTiling on one unit: boundary paragraph indices and per-paragraph depth scores."""
    text, paras, starts = joined_text(book, unit)
    tt = _tokenizer(w, k)
    if len(text) > tt.MAX_TEXT_LEN:
        raise ChunkerError(f"texttiling: {where(book, unit)} has {len(text)} characters, over NLTK's "
                           f"MAX_TEXT_LEN {tt.MAX_TEXT_LEN}")
    # NLTK's pseudo-sentence count: words of the text with every character outside [a-z-' \n\t] removed
    n_seq = -(-len(re.findall(r"\w+", _NOT_KEPT.sub("", text.lower()))) // w)
    breaks = tt._mark_paragraph_breaks(text)[1:]  # NLTK's own break positions (0 = the text start)
    if len(paras) < 2 or n_seq - 1 < tt.smoothing_width + 2 or not breaks:
        return {"too_short": True, "boundaries": [], "paragraph_scores": [None] * len(paras)}
    _, _, depth, marks = tt.tokenize(text)
    # a break at text position p (end of paragraph i-1) starts paragraph i: starts[i] = p + 2 after trimming
    para_of_break = {p: i for p in breaks if (i := bisect.bisect_left(starts, p)) < len(starts)}
    scores: list[float | None] = [None] * len(paras)
    for i in para_of_break.values():
        scores[i] = 0.0
    bounds: list[int] = []
    cand = [0] + breaks
    for g, pos in enumerate(_gap_positions(text, len(depth), w)):
        if pos is None:
            continue
        best = min(cand, key=lambda br: (abs(br - pos), br))
        if best == 0:
            continue
        i = para_of_break[best]
        scores[i] = max(scores[i] or 0.0, float(depth[g]))
        if marks[g] == 1 and i not in bounds:
            bounds.append(i)
    return {"too_short": False, "boundaries": sorted(bounds), "paragraph_scores": scores}


def texttiling_chunks(book: Book, unit: Unit, w: int = 20, k: int = 10, method: str = "texttiling",
                      stats: dict[str, int] | None = None) -> list[Chunk]:
    """TextTiling chunks of one unit (contiguous, exact spans) with its depth scores attached."""
    if not unit.sentences:
        return []
    res = texttiling_analysis(book, unit, w, k)
    paras = unit_paragraphs(book, unit)
    if stats is not None and res["too_short"]:
        stats["too_short"] = stats.get("too_short", 0) + 1
    cut = [paras[i][0] for i in res["boundaries"]]
    edges = [unit.start] + cut + [unit.end]
    chunks = chunks_from_spans(book, unit, method, [(a, b) for a, b in zip(edges, edges[1:]) if a < b],
                               [{"too_short": res["too_short"]}] * (len(edges) - 1))
    # per candidate sentence: the score of the paragraph whose first sentence it is
    sent_starts = [s.start for s in unit.sentences]
    per_sentence: list[float | None] = [None] * max(unit.n_sentences - 1, 0)
    for (a, b), sc in zip(paras, res["paragraph_scores"]):
        j = bisect.bisect_left(sent_starts, a) + 1  # 1-based: the first sentence starting in the paragraph
        if sc is not None and 2 <= j <= unit.n_sentences and sent_starts[j - 1] < b:
            per_sentence[j - 2] = sc
    attach_scores(chunks, per_sentence, unit.n_sentences)
    return chunks


@dataclass(frozen=True)
class C99Options(Options):
    """C99 with the paper's values: rank-transform ``c99_mask`` (odd); stop below mean + c * std of gains."""

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
    """Porter-stemmed words of each sentence, NLTK's English stop words removed."""
    stop = set(english_stopwords())
    st = _stemmer()
    return [[st.stem(w) for w in _LETTERS.findall(s.lower()) if w not in stop] for s in sentences]


def similarity_matrix(terms: Sequence[Sequence[str]]) -> np.ndarray:
    vocab = {t: i for i, t in enumerate(dict.fromkeys(itertools.chain.from_iterable(terms)))}
    m = np.zeros((len(terms), max(len(vocab), 1)), dtype=np.float64)
    for i, ts in enumerate(terms):
        for t in ts:
            m[i, vocab[t]] += 1.0
    norm = np.linalg.norm(m, axis=1)
    norm[norm == 0] = 1.0
    u = m / norm[:, None]
    return u @ u.T


def rank_matrix(sim: np.ndarray, mask: int = 11) -> np.ndarray:
    """Rank transform: share of the other cells of the ``mask x mask`` neighbourhood with a lower value."""
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
    """Divisive clustering: the split positions in the order made and the density ``D(m)``, m = 1..n."""
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
    """The number of segments: stop before the first density gain below mean + c * std."""
    g = np.diff(np.asarray(density, dtype=float))  # δD(2..n)
    if len(g) < 2 or float(np.std(g)) == 0.0:
        return 1
    thr = float(np.mean(g) + c * np.std(g))
    return 1 + next((i for i, x in enumerate(g) if x < thr), len(g))


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
    """C99 chunks of one unit; the score before sentence j is minus the step that first split there."""
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
