"""``published`` presets of the baselines and the effect of the unit cap on chunk statistics (notebook 04).

LumberChunker's GutenQA table (Duarte et al., 2024) reports mean tokens per chunk: Semantic 185,
Paragraph 79, Recursive 399, Proposition 12, LumberChunker 334 (:data:`~.stats.PUBLISHED_LUMBERCHUNKER`).
The tokenizer behind these numbers is not stated; our statistics use the configured statistics
tokenizer (MiniLM's WordPiece by default), so the presets match the published *means in that
tokenizer*. For comparison: the published LangChain recursive chunk set of Emma measures 516 MiniLM
tokens per chunk, so the published table's tokenizer counts fewer tokens than MiniLM.

Presets (our choice, values found by bisection with :func:`~.length_match.length_matched_runs` on
GutenQA's Emma, whole chapters, MiniLM tokens, to 1 % of the published mean; rerun
:func:`calibrate_published_presets` to redo it):

* ``recursive``: ``recursive_chunk_size`` 2162 characters, overlap 240 (the default 200/1800 ratio)
  → 401.8 tokens/chunk on Emma (published 399);
* ``semantic``: ``semantic_breakpoint_percentile`` 85.35 (:data:`SEMANTIC_PUBLISHED_PERCENTILE`)
  → 184.5 tokens/chunk on Emma, 1,111 chunks (published 185; the default 95 gives 477.9);
* ``paragraph``: no knob — one chunk per GutenQA paragraph is exactly the published construction
  (Emma's paragraphs measure 89.6 MiniLM tokens; published 79 over all 100 books);
* ``lumber``: no size knob — θ = 550 is the paper's window budget and the chunk size is the LLM's
  outcome (334 published with Gemini); the small profiles' models cannot reproduce it.

:func:`unit_cap_effect` runs the same chunkers on whole chapters and on the profile's units (the
paper's *n*: ``corpus.max_unit_words``) so notebook 04 can say how much the cap changes the statistics.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from ..core.schema import Book, Chunk
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_token_lengths
from .length_match import length_matched_runs

# bisection on Emma (whole chapters, MiniLM tokens): 85.35 -> 184.5 tokens/chunk, 1,111 chunks
# (the default 95 gives 477.9 tokens/chunk, 429 chunks)
SEMANTIC_PUBLISHED_PERCENTILE = 85.35

PUBLISHED_PRESETS: dict[str, dict[str, Any] | None] = {
    "recursive": {"recursive_chunk_size": 2162, "recursive_chunk_overlap": 240},
    "semantic": {"semantic_breakpoint_percentile": SEMANTIC_PUBLISHED_PERCENTILE},
    "paragraph": {},
    "lumber": None,  # no size knob (see the module docstring)
}
PRESET_NOTES = {
    "recursive": "chunk size calibrated to the published mean (Emma, whole chapters)",
    "semantic": "breakpoint percentile calibrated to the published mean (Emma, whole chapters)",
    "paragraph": "no knob: one chunk per GutenQA paragraph, as published",
    "lumber": "no size knob: chunk size is the LLM's outcome (published: Gemini)",
}


def preset_config(cfg: Any, method: str, preset: str = "published") -> Any:
    """``cfg`` with the ``preset`` values of ``method`` (``default`` = unchanged)."""
    if preset == "default":
        return cfg
    if preset != "published":
        raise ValueError(f"unknown preset {preset!r} (default | published)")
    if method not in PUBLISHED_PRESETS:
        raise ValueError(f"{method}: no published preset (methods with one: {sorted(PUBLISHED_PRESETS)})")
    values = PUBLISHED_PRESETS[method]
    if values is None:
        raise ValueError(f"{method}: {PRESET_NOTES[method]}")
    return cfg.replace(**values) if values else cfg


def run_published_presets(books: Sequence[Book], cfg: Any, run: Any, methods: Sequence[str],
                          embedder: Any = None, backend: Any = None, report: Any = None) -> dict[str, list[Chunk]]:
    """``{"<method>@published": chunks}`` for the methods that have a knob preset (``run`` = run_chunker).
    Chunks carry ``method="<method>@published"``."""
    out = {}
    for m in methods:
        if not PUBLISHED_PRESETS.get(m):  # no knob (paragraph: the default is the published construction)
            continue
        chunks = run(m, books, preset_config(cfg, m), backend=backend, embedder=embedder, report=report)
        out[f"{m}@published"] = [dataclasses.replace(c, method=f"{m}@published") for c in chunks]
    return out


def published_comparison(chunk_sets: Mapping[str, Sequence[Chunk]], tok: Any, books: Sequence[str] = ()):
    """Chunk-size distribution of each set next to LumberChunker's published mean (tokens/chunk).

    ``books`` restricts to those book ids (GutenQA's Emma: the published table is over GutenQA).
    """
    import numpy as np
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
                     "mean_vs_published_pct": 100 * (mean / pub[0] - 1) if pub[0] == pub[0] and mean == mean
                     else float("nan"),
                     "note": PRESET_NOTES.get(base, "") if name.endswith("@published") else ""})
    return pd.DataFrame(rows)


def unit_cap_effect(books_capped: Sequence[Book], books_whole: Sequence[Book], cfg: Any, run: Any,
                    methods: Sequence[str], tok: Any, embedder: Any = None):
    """Chunk statistics of the same chunkers on the profile's units (``corpus.max_unit_words``) and on
    whole chapters: chunks, mean/median tokens, share of chunks ending at a unit border that is not a
    chapter end (cut by the cap)."""
    import numpy as np
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


def calibrate_published_presets(books: Sequence[Book], cfg: Any, tok: Any, run: Any, embedder: Any = None,
                                methods: Sequence[str] = ("recursive", "semantic")):
    """Re-derive the preset knobs: bisection of each method's size knob to the published mean."""
    out = {}
    c2 = cfg.replace(length_match_tolerance=0.01, length_match_max_iter=14)
    for m in methods:
        native = run(m, books, cfg, embedder=embedder)
        target = PUBLISHED_LUMBERCHUNKER[m][0]
        for r in length_matched_runs(books, {m: native}, c2, target, tok, run, embedder=embedder):
            out[m] = {"knob": r.knob, "value": r.value, "mean_tokens": r.mean_tokens, "target": target,
                      "reached": r.reached}
    return out
