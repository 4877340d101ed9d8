"""Baseline chunkers (notebook 04): token, recursive, semantic, paragraph, perplexity, margin
sampling, LumberChunker, dynamic merge (+Merge variants), propositions, length matching.

Entry points: :func:`get_chunker`, :func:`run_chunker`, :class:`BaselinesConfig`,
:func:`chunk_statistics`, :func:`length_matched_runs`.
"""
from .base import ChunkerError, Tokenizer, load_tokenizer
from .config import ALL_METHODS, LLM_METHODS, BaselinesConfig
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_statistics
from .length_match import MatchResult, length_matched_runs
from .book_runs import BookRun, RunReport, run_chunker, run_methods
from .registry import REGISTRY, get_chunker

__all__ = [
    "ALL_METHODS", "MatchResult", "PUBLISHED_LUMBERCHUNKER", "chunk_statistics", "length_matched_runs", "LLM_METHODS", "BaselinesConfig", "BookRun", "ChunkerError", "REGISTRY", "RunReport",
    "Tokenizer", "get_chunker", "load_tokenizer", "run_chunker", "run_methods",
]
