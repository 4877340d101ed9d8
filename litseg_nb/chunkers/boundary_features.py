"""Features of a candidate narrative boundary (every paragraph start but a document's first): lexical
cohesion around it, name continuity, word novelty, paragraph shape and dialogue (``DENSE_NAMES``), plus
CRC-32-hashed first words of the new paragraph and last word before it.
"""
from __future__ import annotations

import itertools
import math
import re
import zlib
from typing import Sequence

import numpy as np

FEATURE_VERSION = 1
HASH_BUCKETS = 256
HASH_SPACES = ("first1", "first2", "first3", "last1")
COHESION_BLOCKS = (2, 5, 10)
RANK_RADIUS = 8

DENSE_NAMES: tuple[str, ...] = (
    *(f"cos_{k}" for k in COHESION_BLOCKS),
    "depth_5", "depth_10", "rank_5", "rank_10",
    "names_jaccard_10", "new_names_5", "novelty_5",
    "log_words_before", "log_words_after", "log_sents_before", "log_sents_after",
    "dialogue_before", "dialogue_after", "quote_end_before", "log_first_sentence_words",
)

# a short function-word list of our own (not a corpus): what carries no topic
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up upon very was we were what when where which while who whom
why will with would you your yours yourself yourselves said says say one two shall may might must let us oh yes
""".split())

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’]*")
_QUOTES = "\"“”‘’'«»"


def _sentence_words(s: str) -> tuple[list[str], frozenset]:
    """Content words and names (capitalised words not at the sentence start) of a sentence."""
    words = _WORD_RE.findall(s)
    content = [w.lower().replace("’", "'") for w in words if len(w) > 2 and w.lower() not in STOPWORDS]
    names = frozenset(w for i, w in enumerate(words) if i > 0 and w[0].isupper() and len(w) > 1
                      and w.lower() not in STOPWORDS and not w.isupper())
    return content, names


class _Blocks:
    """Content-word counts and names of any run of sentences [lo, hi) of a document."""

    def __init__(self, sentences: Sequence[str]):
        vocab: dict[str, int] = {}
        ids: list[int] = []
        self.offsets = [0]
        self.names: list[frozenset] = []
        for s in sentences:
            content, names = _sentence_words(s)
            ids.extend(vocab.setdefault(w, len(vocab)) for w in content)
            self.offsets.append(len(ids))
            self.names.append(names)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.n = len(sentences)

    def counts(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = min(max(lo, 0), self.n), min(max(hi, 0), self.n)
        return np.unique(self.ids[self.offsets[lo]:self.offsets[hi]], return_counts=True)

    def name_set(self, lo: int, hi: int) -> set:
        return set().union(*self.names[max(lo, 0):max(min(hi, self.n), 0)])


def _cos(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    (ua, ca), (ub, cb) = a, b
    if not len(ua) or not len(ub):
        return 0.0
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    dot = float(np.dot(ca[ia], cb[ib]))
    return dot / math.sqrt(float(np.dot(ca, ca)) * float(np.dot(cb, cb)))


def _depth(values: np.ndarray) -> np.ndarray:
    """TextTiling's depth score of every value: climb left and right while values rise."""
    out = np.zeros(len(values))
    for i, v in enumerate(values):
        lmax = v
        j = i - 1
        while j >= 0 and values[j] >= lmax:
            lmax = values[j]
            j -= 1
        rmax = v
        j = i + 1
        while j < len(values) and values[j] >= rmax:
            rmax = values[j]
            j += 1
        out[i] = (lmax - v) + (rmax - v)
    return out


def _local_rank(values: np.ndarray, radius: int) -> np.ndarray:
    """Share of the neighbouring candidates (±radius) whose cohesion is higher (1 = the lowest of them)."""
    out = np.zeros(len(values))
    for i, v in enumerate(values):
        lo, hi = max(0, i - radius), min(len(values), i + radius + 1)
        nb = np.concatenate([values[lo:i], values[i + 1:hi]])
        out[i] = float((nb > v).mean()) if len(nb) else 0.5
    return out


def _first_words(p: str, n: int) -> str:
    w = [x.lower() for x in _WORD_RE.findall(p[:200])[:n]]
    return " ".join(w) if len(w) == n else ""


def _last_token(p: str) -> str:
    s = p.rstrip()
    words = _WORD_RE.findall(s[-80:])
    end = s[-1] if s else ""
    tail = end if not end.isalnum() else "<w>"
    return f"{words[-1].lower() if words else ''}|{tail}"


def hash_bucket(space: str, value: str) -> int:
    return zlib.crc32(f"{space}\x1f{value}".encode("utf-8")) % HASH_BUCKETS


def _dialogue(p: str) -> tuple[float, float]:
    s = p.strip()
    return float(bool(s) and s[0] in _QUOTES), float(bool(s) and s[-1] in _QUOTES)


def document_features(paragraphs: Sequence[Sequence[str]]) -> tuple[np.ndarray, list[list[int]]]:
    """``(dense, hashed)`` features of paragraph starts 1..n-1 of a document (paragraphs: sentence tuples)."""
    n_par = len(paragraphs)
    if n_par < 2:
        return np.zeros((0, len(DENSE_NAMES))), []
    sentences = [s for p in paragraphs for s in p]
    starts = list(itertools.accumulate((len(p) for p in paragraphs[:-1]), initial=0))
    blocks = _Blocks(sentences)
    texts = [" ".join(p) for p in paragraphs]
    cand = list(range(1, n_par))
    cos = {k: np.zeros(len(cand)) for k in COHESION_BLOCKS}
    rows = []
    hashed: list[list[int]] = []
    for i, j in enumerate(cand):
        s = starts[j]
        after_blocks = {}
        for k in COHESION_BLOCKS:
            after_blocks[k] = blocks.counts(s, s + k)
            cos[k][i] = _cos(blocks.counts(s - k, s), after_blocks[k])
        nb10, na10 = blocks.name_set(s - 10, s), blocks.name_set(s, s + 10)
        na5, nb20 = blocks.name_set(s, s + 5), blocks.name_set(s - 20, s)
        ua5, ca5 = after_blocks[5]
        ub20, _ = blocks.counts(s - 20, s)
        jac = len(nb10 & na10) / len(nb10 | na10) if (nb10 | na10) else 0.0
        new_names = len(na5 - nb20) / len(na5) if na5 else 0.0
        tot = int(ca5.sum())
        novelty = float(ca5[~np.isin(ua5, ub20, assume_unique=True)].sum()) / tot if tot else 0.0
        before, after = texts[j - 1], texts[j]
        d_b, q_b = _dialogue(before)
        d_a, _ = _dialogue(after)
        first_sentence = paragraphs[j][0] if paragraphs[j] else ""
        rows.append([jac, new_names, novelty,
                     math.log1p(len(before.split())), math.log1p(len(after.split())),
                     math.log1p(len(paragraphs[j - 1])), math.log1p(len(paragraphs[j])),
                     d_b, d_a, q_b, math.log1p(len(first_sentence.split()))])
        words = (("first1", _first_words(after, 1)), ("first2", _first_words(after, 2)),
                 ("first3", _first_words(after, 3)), ("last1", _last_token(before)))
        hashed.append([si * HASH_BUCKETS + hash_bucket(space, v) for si, (space, v) in enumerate(words) if v])
    c5, c10 = cos[5], cos[10]
    dense = np.column_stack([cos[k] for k in COHESION_BLOCKS]
                            + [_depth(c5), _depth(c10), _local_rank(c5, RANK_RADIUS), _local_rank(c10, RANK_RADIUS),
                               np.asarray(rows)])
    return dense, hashed


def n_hashed() -> int:
    return len(HASH_SPACES) * HASH_BUCKETS
