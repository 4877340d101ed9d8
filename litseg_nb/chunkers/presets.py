"""Notebook 04's comparisons at controlled chunk lengths: the ``published`` presets (each size knob set
so the mean tokens per chunk on GutenQA's Emma is within 1 % of LumberChunker's), the unit cap's effect,
and length matching (each knob bisected to a common mean length; the dynamic merge for the others).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.schema import Book, Chunk
from .base import MemoTokenizer, Tokenizer, merge_unit_chunks
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_token_lengths

# on Emma: recursive 401.8 tokens/chunk (published 399), semantic 184.5 (published 185); None: no size knob
PUBLISHED_PRESETS: dict[str, dict[str, Any] | None] = {
    "recursive": {"recursive_chunk_size": 2162, "recursive_chunk_overlap": 240},
    "semantic": {"semantic_breakpoint_percentile": 85.35},
    "paragraph": {},
    "lumber": None,
}
PRESET_NOTES = {
    "recursive": "chunk size calibrated to the published mean (Emma, whole chapters)",
    "semantic": "breakpoint percentile calibrated to the published mean (Emma, whole chapters)",
    "paragraph": "no knob: one chunk per GutenQA paragraph, as published",
    "lumber": "no size knob: chunk size is the LLM's outcome (published: Gemini)",
}


def run_published_presets(books: Sequence[Book], cfg: Any, run: Any, methods: Sequence[str],
                          embedder: Any = None, backend: Any = None, report: Any = None) -> dict[str, list[Chunk]]:
    """``{"<method>@published": chunks}`` for the methods that have a knob preset (``run`` = run_chunker)."""
    out = {}
    for m in methods:
        if not PUBLISHED_PRESETS.get(m):  # no knob (paragraph: the default is the published construction)
            continue
        chunks = run(m, books, cfg.replace(**PUBLISHED_PRESETS[m]), backend=backend, embedder=embedder, report=report)
        out[f"{m}@published"] = [dataclasses.replace(c, method=f"{m}@published") for c in chunks]
    return out


def published_comparison(chunk_sets: Mapping[str, Sequence[Chunk]], tok: Any, books: Sequence[str] = ()):
    """Chunk-size distribution of each set (on ``books`` if given) next to LumberChunker's published mean."""
    import pandas as pd

    rows = []
    for name, chunks in chunk_sets.items():
        base = name.split("@")[0]
        cs = [c for c in chunks if not books or c.book_id in books]
        lens = chunk_token_lengths(cs, tok) if cs else np.zeros(0)
        pub = PUBLISHED_LUMBERCHUNKER.get(base, (float("nan"), float("nan")))
        mean = float(lens.mean()) if len(lens) else float("nan")
        rows.append({"chunk_set": name, "preset": "published" if name.endswith("@published") else "default",
                     "books": len({c.book_id for c in cs}), "chunks": len(cs), "mean_tokens": mean,
                     "median_tokens": float(np.median(lens)) if len(lens) else float("nan"),
                     "p10_tokens": float(np.percentile(lens, 10)) if len(lens) else float("nan"),
                     "p90_tokens": float(np.percentile(lens, 90)) if len(lens) else float("nan"),
                     "published_mean_tokens": pub[0], "published_total_chunks_100_books": pub[1],
                     "mean_vs_published_pct": 100 * (mean / pub[0] - 1),  # NaN without a published mean
                     "note": PRESET_NOTES.get(base, "") if name.endswith("@published") else ""})
    return pd.DataFrame(rows)


def unit_cap_effect(books_capped: Sequence[Book], books_whole: Sequence[Book], cfg: Any, run: Any,
                    methods: Sequence[str], tok: Any, embedder: Any = None):
    """Chunk statistics of the same chunkers on the profile's (capped) units and on whole chapters."""
    import pandas as pd

    rows = []
    for m in methods:
        for label, bs in (("capped units", books_capped), ("whole chapters", books_whole)):
            cs = run(m, bs, cfg, embedder=embedder)
            lens = chunk_token_lengths(cs, tok) if cs else np.zeros(0)
            rows.append({"method": m, "units": label, "n_units": sum(len(b.units) for b in bs),
                         "chunks": len(cs), "mean_tokens": float(lens.mean()) if len(lens) else float("nan"),
                         "median_tokens": float(np.median(lens)) if len(lens) else float("nan"),
                         "p90_tokens": float(np.percentile(lens, 90)) if len(lens) else float("nan")})
    df = pd.DataFrame(rows)
    if not df.empty:
        whole = df[df.units == "whole chapters"].set_index("method")["mean_tokens"]
        df["mean_change_vs_whole_pct"] = [100 * (r.mean_tokens / whole[r.method] - 1) for r in df.itertuples()]
    return df


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
    by_id = {b.book_id: b for b in books}
    return [c for (bid, uid), cs in by_unit.items()
            for c in merge_unit_chunks(by_id[bid], by_id[bid].unit(uid), cs, target, tok.count, method)]


def length_matched_runs(books: Sequence[Book], native: Mapping[str, Sequence[Chunk]], cfg: Any, target: float,
                        tok: Tokenizer, run: Callable[..., list[Chunk]], embedder: Any = None) -> list[MatchResult]:
    """Length-matched chunk sets for the methods in ``native`` (``run`` = :func:`run_chunker`)."""
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
