"""TextTiling (Hearst 1994/1997) through NLTK's ``TextTilingTokenizer``, with exact spans.

Hearst's algorithm: the text is cut into pseudo-sentences of ``w`` words (stop words removed);
the lexical similarity of the ``k`` pseudo-sentences before and after every gap is the cosine of
their word counts (block comparison); the similarity curve is smoothed; a gap's **depth** is how far
the curve climbs on both sides before it falls again, ``(peak_left - s) + (peak_right - s)``; gaps
deeper than ``mean - std/2`` are boundaries (no two within 4 gaps), each moved to the nearest
paragraph break. Worked example: smoothed similarities ``0.6, 0.2, 0.5`` around a gap give it
depth ``(0.6 - 0.2) + (0.5 - 0.2) = 0.7``.

NLTK (defaults ``w=20, k=10``, smoothing width 2, one round, cutoff ``mean - std/2``) computes
everything; this module feeds it the unit's paragraphs joined by a blank line (a newline inside a
paragraph becomes a space, so NLTK sees exactly the unit's paragraph breaks) and maps its result
back: each NLTK boundary is a paragraph start, a chunk is the unit text from one boundary paragraph
to the next, so the chunks tile the unit (every sentence covered, exact character spans). NLTK
ignores a paragraph break less than 100 characters after the previous one it kept (short dialogue
lines); those paragraph starts can never be boundaries.

**Scores** (:mod:`litseg_nb.chunkers.scores`): the depth score of every pseudo-sentence gap goes to
the paragraph break NLTK would move it to (its nearest), a break keeps the largest; every position
that is no NLTK paragraph break is unscored. The benchmark's top-|G| row uses them.

A unit too short for the method (fewer than ``smoothing_width + 2`` gaps, i.e. roughly under
``5 w`` words, or a single paragraph) is one chunk; such units are counted (``too_short``).
Stop words: NLTK's English list, read from NLTK's data path or from the copy of the NLTK stopwords
corpus that the llama-index-core dependency ships (the same file); an error names both when
neither is there.
"""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..config import Options, at_least
from ..core.schema import Book, Chunk, Unit
from .base import ChunkerError, chunks_from_spans, unit_paragraphs, where
from .scores import attach_scores

_WORD = re.compile(r"[^ \t\n]+")  # NLTK counts words on the raw text between these characters
_NOT_KEPT = re.compile(r"[^a-z\-' \n\t]")  # the characters NLTK drops before it counts words


@dataclass(frozen=True)
class TextTilingOptions(Options):
    """TextTiling (Hearst 1997) with NLTK's defaults, not tuned on any benchmark: ``texttiling_w`` words per
    pseudo-sentence, ``texttiling_k`` pseudo-sentences per block."""

    texttiling_w: int = at_least(20, 2)
    texttiling_k: int = at_least(10, 1)


@lru_cache(maxsize=1)
def english_stopwords() -> tuple[str, ...]:
    """NLTK's English stop words (see module doc for where they are read from)."""
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
    """Hearst's block comparison, the numbers NLTK's ``TextTilingTokenizer._block_comparison`` computes,
    from prefix sums of per-pseudo-sentence word counts instead of a pass over the whole vocabulary per gap.

    For gap ``g`` between pseudo-sentences ``g`` and ``g+1`` the two blocks are the ``ws`` pseudo-sentences
    on either side (``ws = k``, fewer near the text's ends: ``g + 1`` at the start, ``numgaps - g`` at the
    end), ``b1[t]`` and ``b2[t]`` the counts of word ``t`` in each, and the score is their cosine
    ``sum_t b1[t] b2[t] / sqrt(sum_t b1[t]^2 * sum_t b2[t]^2)`` (0 when a block is empty). Every sum is of
    whole numbers far below 2^53, so it is exact in any order: the scores equal NLTK's bit for bit (tested
    against NLTK's own method), in time linear in the text instead of gaps x vocabulary (issue #35:
    TextTiling took ~64 s of notebook 04 and ~38 s of 06 in smoke, almost all of it in that method).

    Worked example (``k = 1``): pseudo-sentences with counts ``{a: 2, b: 1}`` and ``{a: 1, c: 1}`` give
    ``2 / sqrt(5 * 2) = 0.632``.
    """
    import numpy as np

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


def _tokenizer(w: int, k: int, demo: bool):
    from nltk.tokenize.texttiling import TextTilingTokenizer

    class FastBlockTextTiling(TextTilingTokenizer):
        """NLTK's TextTiling with :func:`block_comparison` (the same scores) for its block comparison."""

        def _block_comparison(self, tokseqs, token_table):
            return block_comparison(tokseqs, token_table, self.k)

    return FastBlockTextTiling(w=w, k=k, stopwords=list(english_stopwords()), demo_mode=demo)


def joined_text(book: Book, unit: Unit) -> tuple[str, list[tuple[int, int]], list[int]]:
    """(text NLTK reads, the unit's paragraph spans in the book, each paragraph's start in that text)."""
    paras = unit_paragraphs(book, unit)
    parts, starts, pos = [], [], 0
    for a, b in paras:
        p = book.text[a:b].replace("\r", " ").replace("\n", " ").replace("\f", " ").replace("\v", " ")
        if parts:
            parts.append("\n\n")
            pos += 2
        starts.append(pos)
        parts.append(p)
        pos += len(p)
    return "".join(parts), paras, starts


def _gap_positions(text: str, n_gaps: int, w: int) -> list[int | None]:
    """Where NLTK places gap g in the raw text (``_normalize_boundaries``: the character count when
    the running word count first exceeds ``max(g w, w)``), None past the last word."""
    ends = [m.end() for m in _WORD.finditer(text)]
    out: list[int | None] = []
    for g in range(n_gaps):
        x = max(g * w, w)  # the word count must exceed x: reached at the character after word x+1 ends
        out.append(ends[x] + 1 if x < len(ends) and ends[x] < len(text) else None)
    return out


def texttiling_analysis(book: Book, unit: Unit, w: int = 20, k: int = 10) -> dict[str, Any]:
    """NLTK's TextTiling on one unit: boundary paragraph indices, per-paragraph depth scores (None where
    NLTK has no paragraph break), or ``too_short``."""
    text, paras, starts = joined_text(book, unit)
    tt = _tokenizer(w, k, demo=True)
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
    para_of_break = {}
    for p in breaks:
        i = bisect.bisect_left(starts, p)
        if i < len(starts):
            para_of_break[p] = i
    scores: list[float | None] = [None] * len(paras)
    for p, i in para_of_break.items():
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
