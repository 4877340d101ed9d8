"""Chunk statistics in the shape of LumberChunker's "Avg. #Tokens / Chunk, Total #Chunks" table,
plus LLM cost (calls and tokens, also per 1,000 sentences) and throughput (seconds per book)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..schema import Chunk
from .base import Tokenizer

# LumberChunker's published GutenQA averages (tokens per chunk, total chunks; Duarte et al. 2024)
PUBLISHED_LUMBERCHUNKER = {
    "semantic": (185, 191059), "paragraph": (79, 248307), "recursive": (399, 31787),
    "proposition": (12, 914493), "lumber": (334, 36917),
}


def chunk_token_lengths(chunks: Sequence[Chunk], tokenizer: Tokenizer) -> np.ndarray:
    return np.asarray(tokenizer.count_many([c.text for c in chunks]), dtype=np.int64)


def chunk_statistics(chunk_sets: Mapping[str, Sequence[Chunk]], tokenizer: Tokenizer, runs=None):
    """One row per method: chunk counts, token-length distribution, LLM cost and throughput.

    ``runs`` is :meth:`RunReport.to_frame` (optional) for calls/tokens/seconds per book.
    """
    import pandas as pd

    rows = []
    for method, chunks in chunk_sets.items():
        lens = chunk_token_lengths(chunks, tokenizer) if chunks else np.zeros(0)
        row = {
            "method": method,
            "books": len({c.book_id for c in chunks}),
            "units": len({(c.book_id, c.unit_id) for c in chunks}),
            "total_chunks": len(chunks),
            "mean_tokens": float(lens.mean()) if len(lens) else float("nan"),
            "median_tokens": float(np.median(lens)) if len(lens) else float("nan"),
            "std_tokens": float(lens.std()) if len(lens) else float("nan"),
            "p10_tokens": float(np.percentile(lens, 10)) if len(lens) else float("nan"),
            "p90_tokens": float(np.percentile(lens, 90)) if len(lens) else float("nan"),
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
