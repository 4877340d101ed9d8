"""Retrieval metrics on GutenQA, as LumberChunker's evaluation computes them: relevance by ``Chunk Must
Contain`` containment (both sides :func:`normalize_for_match`-ed), MRR, Hit@k, DCG@k and Recall@k."""
from __future__ import annotations

import math
import re
import unicodedata
from typing import Iterable, Sequence

from ..core.chunk_align import QUOTE_MAP, normalize_with_offsets

KS = (1, 2, 5, 10, 20)

_QUOTE_MAP = str.maketrans({k: v for k, v in QUOTE_MAP.items() if k not in "\u2010\u2011"})  # hyphens kept
_WS = re.compile(r"\s+")


def normalize_for_match(text: str) -> str:
    """Case-, quote- and whitespace-insensitive form used on both sides of the containment test."""
    t = unicodedata.normalize("NFKC", text or "")
    t = t.translate(_QUOTE_MAP)
    t = _WS.sub(" ", t).strip()
    return t.lower()


def evidence_form(evidence: str) -> str:
    """The normalised ``Chunk Must Contain`` string; an empty one is an error."""
    ev = normalize_for_match(evidence)
    if not ev:
        raise ValueError("empty evidence string: relevance is undefined")
    return ev


def is_relevant(chunk_text: str, evidence: str) -> bool:
    """True when the normalised chunk contains the normalised ``Chunk Must Contain`` string."""
    return evidence_form(evidence) in normalize_for_match(chunk_text)


def reciprocal_rank(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / rank


def hit_at_k(rank: int | None, k: int) -> float:
    return float(rank is not None and rank <= k)


recall_at_k = hit_at_k  # LumberChunker's Recall@k with one gold string per question


def dcg_at_k(rank: int | None, k: int) -> float:
    """LumberChunker's DCG@k with binary relevance on the first relevant position only."""
    if rank is None or rank > k:
        return 0.0
    return (2.0 ** 1 - 1.0) / math.log2(rank + 1)


def _mrr(ranks: Sequence[int | None]) -> float:
    return sum(reciprocal_rank(r) for r in ranks) / len(ranks)


def _curves(ranks: Sequence[int | None], ks: Sequence[int]) -> dict[str, float]:
    """Mean Hit@k, DCG@k and Recall@k over questions (``ranks[i]``: question i's first relevant rank or None)."""
    return {f"{name}@{k}": sum(metric(r, k) for r in ranks) / len(ranks)
            for name, metric in (("Hit", hit_at_k), ("DCG", dcg_at_k), ("Recall", recall_at_k)) for k in ks}


def summarize_scopes(ranks: Sequence[int | None], answerable: Sequence[bool],
                     full_ranks: Sequence[int | None] | None = None, k: int = 20,
                     ks: Iterable[int] = KS) -> dict[str, float]:
    """Both question scopes in one flat record (the answerable ones with suffix ``_answerable``): ``ranks``
    within the top-``k`` (None beyond), ``full_ranks`` in the full ranking, ``answerable[i]`` whether any
    chunk is relevant. Raises for zero questions (an empty evaluation must not look like a score)."""
    n = len(ranks)
    if n == 0:
        raise ValueError("no questions to score (an empty evaluation has no MRR)")
    ks = tuple(kk for kk in ks if kk <= k)
    if any(r is not None and r > k for r in ranks):
        raise ValueError(f"a top-{k} rank is larger than {k}")
    full = list(full_ranks) if full_ranks is not None else None
    if any(r is not None and not a for r, a in zip(ranks, answerable)):
        raise ValueError("a question marked unanswerable has a relevant retrieved chunk")
    idx = [i for i, a in enumerate(answerable) if a]

    def scores(picked: Sequence[int]) -> dict[str, float]:
        sub = [ranks[i] for i in picked] or [None]  # no answerable question: every key NaN (below)
        fulls = {"MRR_full": _mrr([full[i] for i in picked] or [None])} if full is not None else {}
        return {f"MRR@{k}": _mrr(sub), **fulls, **_curves(sub, ks)}

    out = {"n_questions": float(n), "n_no_relevant_chunk": float(n - len(idx)), "n_answerable": float(len(idx)),
           **scores(range(n))}
    return out | {f"{key}_answerable": v if idx else float("nan") for key, v in scores(idx).items()}


# Span-based relevance, reported beside containment: a chunk that rewrites its source (propositions) rarely
# contains the evidence verbatim, but its source spans in the book text can cover it.


def evidence_char_spans(book_text: str, evidence: str, _cache: dict | None = None) -> list[tuple[int, int]]:
    """Every occurrence of ``evidence`` in ``book_text`` under :func:`normalize_for_match`, as
    half-open character spans of ``book_text`` (empty when it occurs nowhere); ``_cache`` keeps the normalised
    text with, per character, the offset in ``book_text`` it came from."""
    ev = evidence_form(evidence)
    cache = {} if _cache is None else _cache
    if id(book_text) not in cache:
        cache[id(book_text)] = normalize_with_offsets(
            book_text, lambda ch: unicodedata.normalize("NFKC", ch).translate(_QUOTE_MAP).lower())
    norm, pos = cache[id(book_text)]
    spans, start = [], norm.find(ev)
    while start >= 0:
        end = start + len(ev) - 1
        spans.append((pos[start], pos[end] + 1))
        start = norm.find(ev, start + 1)
    return spans


def chunk_source_spans(chunk, book) -> list[tuple[int, int]]:
    """The character spans of ``book.text`` a chunk's text comes from: its main spans (for a rewritten
    chunk, ``is_source_span=False``, the source paragraphs it was written from) and the spans of its
    context sentences (``context_idx``)."""
    spans = [tuple(s) for s in chunk.spans]
    if chunk.context_idx and chunk.unit_id:
        unit = book.unit(chunk.unit_id)
        spans += [(unit.sentences[i - 1].start, unit.sentences[i - 1].end) for i in chunk.context_idx
                  if 1 <= i <= unit.n_sentences]
    return sorted(spans)


def spans_cover(spans: Sequence[tuple[int, int]], start: int, end: int, text: str) -> bool:
    """True when every non-whitespace character of ``text[start:end]`` lies inside one of ``spans``
    (the whitespace between two adjacent sentences belongs to neither)."""
    i = start
    for a, b in sorted(spans):
        if b <= i:
            continue
        if a >= end:
            break
        if a > i and text[i:a].strip():
            return False
        i = max(i, b)
        if i >= end:
            return True
    return not text[i:end].strip()


def span_relevant(chunks: Sequence, book, evidence: str, _cache: dict | None = None) -> set[int]:
    """Indices of ``chunks`` (of one book) whose source spans cover an occurrence of ``evidence`` in
    the cleaned book text (span-based relevance; see above)."""
    occ = evidence_char_spans(book.text, evidence, _cache)
    out = set()
    for i, c in enumerate(chunks):
        if not c.spans:  # an imported chunk that could not be aligned has no source spans
            continue
        src = chunk_source_spans(c, book)
        lo, hi = src[0][0], max(b for _, b in src)
        if any(lo <= s and e <= hi and spans_cover(src, s, e, book.text) for s, e in occ):
            out.add(i)
    return out
