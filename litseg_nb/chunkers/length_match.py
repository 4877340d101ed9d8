"""Length-matched comparison: tune each method's size knob so its mean chunk length (tokens)
reaches a common target — Meta-Chunking's authors compare methods at a fixed chunk length.

Knobs: ``token`` → window size (overlap kept at the configured ratio); ``recursive`` → character
chunk size (same); ``semantic`` → breakpoint percentile (higher = fewer, longer chunks); every
sentence-level method without a size knob (``paragraph``, ``perplexity``, ``margin``, ``lumber``)
→ the dynamic-merge target L applied to its native chunks. The knob is found by bisection on the
monotone relation knob → mean length, stopping within ``tolerance`` (relative) or after
``max_iter`` evaluations; the best evaluation is returned. Methods whose chunks are already longer
than the target cannot be shortened by merging and are reported as such.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.schema import Book, Chunk
from .base import MemoTokenizer, Tokenizer
from .merge import merge_unit_chunks
from .stats import chunk_token_lengths


@dataclass
class MatchResult:
    method: str
    knob: str
    value: float
    mean_tokens: float
    chunks: list[Chunk]
    evaluations: int
    reached: bool


def bisect_knob(evaluate: Callable[[float], tuple[float, list[Chunk]]], lo: float, hi: float, target: float,
                tolerance: float, max_iter: int, integer: bool, increasing: bool = True):
    """Bisection for ``evaluate(knob)[0] ≈ target`` (mean length monotone in the knob)."""
    best = None
    for it in range(1, max_iter + 1):
        mid = (lo + hi) / 2
        if integer:
            mid = float(round(mid))
        mean, chunks = evaluate(mid)
        if best is None or abs(mean - target) < abs(best[1] - target):
            best = (mid, mean, chunks)
        if abs(mean - target) <= tolerance * target:
            return best, it, True
        if (mean < target) == increasing:
            lo = mid
        else:
            hi = mid
        if integer and hi - lo <= 1:
            return best, it, abs(best[1] - target) <= tolerance * target
    return best, max_iter, abs(best[1] - target) <= tolerance * target


def _mean(chunks: Sequence[Chunk], tok: Tokenizer) -> float:
    return float(chunk_token_lengths(chunks, tok).mean()) if chunks else float("nan")


def merged(books: Sequence[Book], chunks: Sequence[Chunk], target: int, tok: Tokenizer, method: str) -> list[Chunk]:
    by_unit: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
    books_by_id = {b.book_id: b for b in books}
    out = []
    for (bid, uid), cs in by_unit.items():
        b = books_by_id[bid]
        out.extend(merge_unit_chunks(b, b.unit(uid), cs, target, tok.count, method))
    return out


def length_matched_runs(books: Sequence[Book], native: Mapping[str, Sequence[Chunk]], cfg: Any, target: float,
                        tok: Tokenizer, run: Callable[..., list[Chunk]], embedder: Any = None) -> list[MatchResult]:
    """Length-matched chunk sets for the methods in ``native`` (``run`` = :func:`run_chunker`).

    Token counts go through one :class:`~litseg_nb.chunkers.base.MemoTokenizer` for the whole run:
    the bisection re-counts the same merged texts at every step (the counts are unchanged)."""
    out = []
    tok = MemoTokenizer(tok)
    tol, it = cfg.length_match_tolerance, cfg.length_match_max_iter
    for method, chunks in native.items():
        if method == "proposition" or "+merge" in method or not chunks:
            continue
        sel_books = [b for b in books if b.book_id in {c.book_id for c in chunks}]
        if method in ("token", "recursive"):
            size_f, ov_f = f"{method}_chunk_size", f"{method}_chunk_overlap"
            ratio = getattr(cfg, ov_f) / getattr(cfg, size_f)
            scale = 1.0 if method == "token" else 4.5  # ~characters per token for the bracket

            def ev(v, method=method, size_f=size_f, ov_f=ov_f, ratio=ratio):
                c2 = cfg.replace(**{size_f: int(v), ov_f: int(v * ratio)})
                ch = run(method, sel_books, c2, embedder=embedder)
                return _mean(ch, tok), ch

            best, n, ok = bisect_knob(ev, 8 * scale, 8 * target * scale, target, tol, it, True)
            knob = size_f
        elif method == "semantic":
            def ev(v):
                ch = run("semantic", sel_books, cfg.replace(semantic_breakpoint_percentile=float(v)),
                         embedder=embedder)
                return _mean(ch, tok), ch

            best, n, ok = bisect_knob(ev, 0.0, 100.0, target, tol, it, False)
            knob = "semantic_breakpoint_percentile"
        else:
            base_mean = _mean(chunks, tok)
            if base_mean >= target:
                out.append(MatchResult(method, "merge_target_tokens", float("nan"), base_mean, list(chunks), 0,
                                       False))
                continue

            def ev(v, chunks=chunks, method=method):
                ch = merged(sel_books, chunks, int(v), tok, f"{method}@matched")
                return _mean(ch, tok), ch

            best, n, ok = bisect_knob(ev, target, 4 * target, target, tol, it, True)
            knob = "merge_target_tokens"
        value, mean, ch = best
        out.append(MatchResult(method, knob, value, mean, ch, n, ok))
    return out
