"""Baseline chunkers (notebook 04): token, recursive, semantic, paragraph, TextTiling, C99, the boundary
model, perplexity, margin sampling, LumberChunker, dynamic merge, propositions, semantic completion, and
any library's splitter (``lib:``). Each method sits beside its options class; :class:`BaselinesConfig`
carries them all. The registry above (:mod:`litseg_nb.segmenters`) runs and caches them.
"""
from .base import ChunkerError, Tokenizer, load_tokenizer
from .config import ALL_METHODS, BASELINES, LLM_METHODS, BaselinesConfig
from .presets import MatchResult, length_matched_runs
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_statistics

__all__ = [
    "ALL_METHODS", "BASELINES", "MatchResult", "PUBLISHED_LUMBERCHUNKER", "chunk_statistics", "length_matched_runs",
    "LLM_METHODS", "BaselinesConfig", "ChunkerError", "Tokenizer", "load_tokenizer",
]
