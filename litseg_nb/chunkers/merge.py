"""Dynamic merge (Meta-Chunking §3.1.3): adjacent chunks merged greedily up to L tokens.

Within one unit, chunks are taken in order; the current group absorbs the next chunk while the
*merged text* (one span from the group's first start to the last end, counted with the real
tokenizer) stays within ``target_tokens``; otherwise the group is emitted and a new one starts.
Consequences (tested): no chunk is empty, no merged chunk exceeds the target unless it is a single
input chunk that already did, and the merged chunks cover exactly what the inputs covered.
Used for LumberChunker+Merge, Perplexity+Merge and Margin-Sampling+Merge.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.schema import Book, Chunk, Unit, make_span_chunk
from .base import TokenizerOption



def merge_groups(lengths_of: Callable[[int, int], int], n: int, target: int) -> list[tuple[int, int]]:
    """Greedy groups ``[i, j)`` of ``n`` items; ``lengths_of(i, j)`` is the merged length of i..j-1."""
    if target <= 0:
        raise ValueError(f"merge target must be positive, got {target}")
    groups, i = [], 0
    while i < n:
        j = i + 1
        while j < n and lengths_of(i, j + 1) <= target:
            j += 1
        groups.append((i, j))
        i = j
    return groups


def merge_unit_chunks(book: Book, unit: Unit, chunks: Sequence[Chunk], target_tokens: int,
                      count_tokens: Callable[[str], int], method: str) -> list[Chunk]:
    """Merge one unit's (ordered, contiguous-span) chunks into chunks of at most ``target_tokens``."""
    chunks = sorted(chunks, key=lambda c: (c.spans[0][0], c.spans[-1][1]))
    if not chunks:
        return []

    cache: dict[tuple[int, int], int] = {}

    def length(i: int, j: int) -> int:
        if (i, j) not in cache:
            a = chunks[i].spans[0][0]
            b = max(c.spans[-1][1] for c in chunks[i:j])
            cache[(i, j)] = count_tokens(book.text[a:b])
        return cache[(i, j)]

    out = []
    for k, (i, j) in enumerate(merge_groups(length, len(chunks), target_tokens)):
        a = chunks[i].spans[0][0]
        b = max(c.spans[-1][1] for c in chunks[i:j])
        ch = make_span_chunk(book, unit, method, k, a, b,
                             {"merged_from": [c.chunk_id for c in chunks[i:j]], "tokens": length(i, j)})
        out.append(ch)
    return out


@dataclass(frozen=True)
class MergeOptions(TokenizerOption):
    """Options of the dynamic merge of the ``+merge`` variants: neighbouring chunks are merged up to
    ``merge_target_tokens`` tokens of the statistics tokenizer."""

    merge_target_tokens: int = 334  # dynamic merge target L (LumberChunker's published mean)
