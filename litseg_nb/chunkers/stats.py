"""The one chunk-statistics table (notebooks 04 and 06): per method, chunk counts and the length
distribution in tokens, characters and sentences, beside LumberChunker's published GutenQA averages
("Avg. #Tokens / Chunk, Total #Chunks"); with a :class:`~litseg_nb.segmenters.book_runs.RunReport`
frame also LLM cost (calls and tokens, also per 1,000 sentences) and throughput (seconds per book)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.schema import Chunk

# LumberChunker's published GutenQA averages (tokens per chunk, total chunks; Duarte et al. 2024)
PUBLISHED_LUMBERCHUNKER = {
    "semantic": (185, 191059), "paragraph": (79, 248307), "recursive": (399, 31787),
    "proposition": (12, 914493), "lumber": (334, 36917),
}


def chunk_token_lengths(chunks: Sequence[Chunk], tokenizer: Any = None) -> np.ndarray:
    """Token length of each chunk's text: ``tokenizer`` is a :class:`~litseg_nb.chunkers.base.Tokenizer`,
    a ``text -> int`` callable (e.g. an LLM backend's ``count_tokens``) or None (whitespace words)."""
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
    """One row per method (columns below); ``runs`` is :meth:`RunReport.to_frame` (optional).

    ``method, books, units, total_chunks, mean/median/std/min/p10/p90/max_tokens, mean_chars,
    mean_sentences, chunks_with_context, published_mean_tokens`` (+ with ``runs``: ``sentences,
    llm_calls, prompt_tokens, completion_tokens, calls_per_1k_sentences, tokens_per_1k_sentences,
    fallbacks, seconds_per_book, from_cache``). Tokens are counted with ``tokenizer`` (see
    :func:`chunk_token_lengths`); sentences per chunk are the main range ``to_idx - from_idx + 1``.
    """
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
