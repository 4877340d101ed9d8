"""Baseline chunkers (notebook 04): token, recursive, semantic, paragraph, perplexity, margin
sampling, LumberChunker, dynamic merge (+Merge variants), propositions, length matching.

Each method module holds the method and its options class (``TokenOptions``, ``LumberOptions``, ...);
:class:`BaselinesConfig` carries them all. The methods are registered, run and cached above this
package: :mod:`litseg_nb.segmenters` (``get_method``, ``run_chunker``, ``run_methods``, ``RunReport``).

Entry points here: :class:`BaselinesConfig`, :func:`chunk_statistics`, :func:`length_matched_runs`.
"""
from .base import ChunkerError, Tokenizer, load_tokenizer
from .config import ALL_METHODS, BASELINES, LLM_METHODS, BaselinesConfig
from .stats import PUBLISHED_LUMBERCHUNKER, chunk_statistics
from .length_match import MatchResult, length_matched_runs

__all__ = [
    "ALL_METHODS", "BASELINES", "MatchResult", "PUBLISHED_LUMBERCHUNKER", "chunk_statistics", "length_matched_runs",
    "LLM_METHODS", "BaselinesConfig", "ChunkerError", "Tokenizer", "load_tokenizer",
]
