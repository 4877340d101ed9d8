"""Whether two texts are mostly the same text, whatever their names: sampled word shingles compared by containment.

A text's fingerprint is a deterministic sample (one in :data:`KEEP_ONE_IN`) of the hashes of its
:data:`SHINGLE_WORDS`-word runs (lower-cased words, punctuation and line breaks ignored). Two texts overlap when
at least :data:`SHARED_SHARE` of the smaller one's sample is in the other's: a copy under another name, another
edition's front matter or a book inside a collection is found; a shared quotation is not."""
from __future__ import annotations

import re
import zlib
from itertools import combinations
from typing import Mapping

import numpy as np

SHINGLE_WORDS = 8
KEEP_ONE_IN = 8
SHARED_SHARE = 0.5
MIN_SAMPLE = 8  # a text with fewer sampled shingles is too short to compare this way (exact hashes still do)
_WORD = re.compile(r"\w+")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def fingerprint(text: str) -> np.ndarray:
    """The sorted, distinct sampled shingle hashes of ``text`` (``uint64``)."""
    words = _WORD.findall(text.casefold())
    if len(words) < SHINGLE_WORDS:
        return np.zeros(0, dtype=np.uint64)
    vocab = {w: zlib.crc32(w.encode("utf-8")) for w in set(words)}
    wh = np.fromiter((vocab[w] for w in words), dtype=np.uint64, count=len(words))
    n = len(words) - SHINGLE_WORDS + 1
    with np.errstate(over="ignore"):
        h = np.zeros(n, dtype=np.uint64)
        for j in range(SHINGLE_WORDS):  # a polynomial hash of each run, wrapping at 2**64
            h = h * _MIX + wh[j:j + n]
        h ^= h >> np.uint64(31)
        h *= _MIX
    return np.unique(h[(h >> np.uint64(58)) % np.uint64(KEEP_ONE_IN) == 0])


def shared_share(a: np.ndarray, b: np.ndarray) -> float:
    """The share of the smaller fingerprint found in the other (0.0 when either is too short to compare)."""
    if min(len(a), len(b)) < MIN_SAMPLE:
        return 0.0
    return len(np.intersect1d(a, b, assume_unique=True)) / min(len(a), len(b))


def overlapping(left: Mapping[str, np.ndarray], right: Mapping[str, np.ndarray] | None = None,
                share: float = SHARED_SHARE) -> list[tuple[str, str, float]]:
    """``(name in left, name in right, shared share)`` for every pair that overlaps, most shared first;
    ``right=None``: the pairs within ``left``."""
    pairs = (combinations(sorted(left), 2) if right is None
             else ((a, b) for a in sorted(left) for b in sorted(right)))
    other = left if right is None else right
    found = [(a, b, s) for a, b in pairs if (s := shared_share(left[a], other[b])) >= share]
    return sorted(found, key=lambda t: (-t[2], t[0], t[1]))
