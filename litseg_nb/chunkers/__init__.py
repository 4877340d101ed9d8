"""Baseline chunkers (notebook 04), each beside its options class, and any library's splitter (``lib:``);
:mod:`litseg_nb.segmenters` runs and caches them.
"""
from .base import ChunkerError, Tokenizer, load_tokenizer
from .config import ALL_METHODS, BASELINES, LLM_METHODS, BaselinesConfig
from .presets import MatchResult, length_matched_runs
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_statistics

__all__ = [
    "ALL_METHODS", "BASELINES", "MatchResult", "PUBLISHED_LUMBERCHUNKER", "chunk_statistics", "length_matched_runs",
    "LLM_METHODS", "BaselinesConfig", "ChunkerError", "Tokenizer", "load_tokenizer",
]
