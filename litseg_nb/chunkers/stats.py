"""The chunk-statistics table of notebooks 04 and 06 beside LumberChunker's published GutenQA averages,
and notebook 04's chunk-length and boundary figures."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.schema import Book, Chunk
from .base import Tokenizer

# LumberChunker's published GutenQA averages (tokens per chunk, total chunks; Duarte et al. 2024)
PUBLISHED_LUMBERCHUNKER = {
    "semantic": (185, 191059), "paragraph": (79, 248307), "recursive": (399, 31787),
    "proposition": (12, 914493), "lumber": (334, 36917),
}


def chunk_token_lengths(chunks: Sequence[Chunk], tokenizer: Any = None) -> np.ndarray:
    """Token length of each chunk's text (``tokenizer`` None: whitespace words)."""
    texts = [c.text for c in chunks]
    if tokenizer is None:
        counts = [len(t.split()) for t in texts]
    elif hasattr(tokenizer, "count_many"):
        counts = tokenizer.count_many(texts)
    else:
        counts = [tokenizer(t) for t in texts]
    return np.asarray(counts, dtype=np.int64)


def _stat(fn: Callable[[np.ndarray], Any], values: np.ndarray) -> float:
    return float(fn(values)) if len(values) else float("nan")


def chunk_statistics(chunk_sets: Mapping[str, Sequence[Chunk]], tokenizer: Any = None, runs=None):
    """One row per method: chunk counts, lengths and the published mean; with ``runs``
    (:meth:`RunReport.to_frame`) also LLM calls, tokens, fallbacks and seconds per book."""
    import pandas as pd

    rows = []
    for method, chunks in chunk_sets.items():
        lens = chunk_token_lengths(chunks, tokenizer) if chunks else np.zeros(0)
        chars = np.asarray([len(c.text) for c in chunks], dtype=float)
        sents = np.asarray([c.to_idx - c.from_idx + 1 for c in chunks], dtype=float)
        row = {
            "method": method,
            "books": len({c.book_id for c in chunks}),
            "units": len({(c.book_id, c.unit_id) for c in chunks}),
            "total_chunks": len(chunks),
            "mean_tokens": _stat(np.mean, lens),
            "median_tokens": _stat(np.median, lens),
            "std_tokens": _stat(np.std, lens),
            "min_tokens": _stat(np.min, lens),
            "p10_tokens": _stat(lambda v: np.percentile(v, 10), lens),
            "p90_tokens": _stat(lambda v: np.percentile(v, 90), lens),
            "max_tokens": _stat(np.max, lens),
            "mean_chars": _stat(np.mean, chars),
            "mean_sentences": _stat(np.mean, sents),
            "chunks_with_context": sum(1 for c in chunks if c.context_idx),
            "published_mean_tokens": PUBLISHED_LUMBERCHUNKER.get(method, (np.nan,))[0],
        }
        if runs is not None and len(runs):
            r = runs[runs["method"] == method]
            sent = int(r["sentences"].sum()) if len(r) else 0
            calls, ptok, ctok = (int(r[k].sum()) for k in ("llm_calls", "prompt_tokens", "completion_tokens"))
            row.update({
                "sentences": sent, "llm_calls": calls, "prompt_tokens": ptok, "completion_tokens": ctok,
                "calls_per_1k_sentences": 1000 * calls / sent if sent else float("nan"),
                "tokens_per_1k_sentences": 1000 * (ptok + ctok) / sent if sent else float("nan"),
                "fallbacks": int(r["fallbacks"].sum()),
                "seconds_per_book": float(r["seconds"].mean()) if len(r) else float("nan"),
                "from_cache": bool(r["cached"].all()) if len(r) else False,
            })
        rows.append(row)
    return pd.DataFrame(rows)


def plot_length_distributions(chunk_sets: Mapping[str, Sequence[Chunk]], tok: Tokenizer):
    import matplotlib.pyplot as plt

    methods = [m for m, c in chunk_sets.items() if c]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(methods) + 1.5))
    data = [chunk_token_lengths(chunk_sets[m], tok) for m in methods]
    ax.boxplot(data, vert=False, showfliers=False)
    ax.set_yticks(range(1, len(methods) + 1), methods)
    ax.set_xlabel(f"tokens per chunk ({tok.name})")
    ax.set_title("Chunk-length distribution per method")
    fig.tight_layout()
    return fig


def plot_boundaries(book: Book, unit_id: str, chunk_sets: Mapping[str, Sequence[Chunk]]):
    import matplotlib.pyplot as plt

    unit = book.unit(unit_id)
    rows = [(m, [c for c in cs if c.book_id == book.book_id and c.unit_id == unit_id])
            for m, cs in chunk_sets.items()]
    rows = [(m, cs) for m, cs in rows if cs]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    for y, (m, cs) in enumerate(rows):
        for k, c in enumerate(sorted(cs, key=lambda c: (c.from_idx, c.to_idx))):
            ax.barh(y, c.to_idx - c.from_idx + 1, left=c.from_idx - 0.5, height=0.6,
                    color=("C0" if k % 2 == 0 else "C1"), alpha=0.75, edgecolor="k", linewidth=0.3)
    ax.set_yticks(range(len(rows)), [m for m, _ in rows])
    ax.set_xlim(0.5, unit.n_sentences + 0.5)
    ax.set_xlabel(f"sentence index in {book.title[:40]} / {unit_id}")
    ax.set_title("Chunk boundaries on one unit (alternating colours = consecutive chunks)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig
