"""Figures of notebook 04: chunk-length distributions and boundaries side by side on one unit."""
from __future__ import annotations

from typing import Mapping, Sequence

from ..core.schema import Book, Chunk
from .base import Tokenizer
from .stats import chunk_token_lengths


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
    """One row per method: chunk extents over the unit's sentences (1..n)."""
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
