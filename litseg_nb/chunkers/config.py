"""Configuration of the baseline chunkers (notebook 04): :class:`BaselinesConfig` and the baselines' names.

Each method's knobs live in its options class beside the method; :class:`BaselinesConfig` inherits
them all, plus notebook 04's own settings. Defaults follow the papers where they give a value; the
recursive splitter's sizes are our choice (near LumberChunker's published GutenQA chunk sizes).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import StageConfig, _Base, one_of
from .base import MergeOptions
from .boundary_model import BoundaryModelOptions
from .completion import CompletionOptions
from .llm_chunkers import LumberOptions, MarginOptions, PropositionOptions
from .perplexity import PerplexityOptions
from .splitters import ParagraphOptions, RecursiveOptions, SemanticOptions, TokenOptions
from .topic import C99Options, TextTilingOptions

#: notebook 04's baselines in table order, each with what it needs ("text": rules only, "embedder",
#: "llm"); the registry registers a method for each name and refuses to import on a mismatch.
BASELINES: dict[str, str] = {
    "token": "text", "recursive": "text", "semantic": "embedder", "paragraph": "text", "texttiling": "text", "c99": "text",
    "boundary-model": "text",
    "perplexity": "llm",
    "margin": "llm", "lumber": "llm", "perplexity+merge": "llm", "margin+merge": "llm", "lumber+merge": "llm",
    "proposition": "llm", "perplexity+merge+completion": "llm",
}
ALL_METHODS: tuple[str, ...] = tuple(BASELINES)
#: the baselines that need an LLM
LLM_METHODS: tuple[str, ...] = tuple(m for m, need in BASELINES.items() if need == "llm")


@dataclass(frozen=True)
class _Methods(_Base):
    """Which baselines notebook 04 runs: a separate base so that this field comes first (the order of
    ``config`` listings and manifests)."""

    methods: tuple[str, ...] = one_of(ALL_METHODS, *ALL_METHODS)


@dataclass(frozen=True)
class BaselinesConfig(CompletionOptions, PropositionOptions, MergeOptions, LumberOptions, MarginOptions,
                      PerplexityOptions, BoundaryModelOptions, C99Options, TextTilingOptions, ParagraphOptions, SemanticOptions, RecursiveOptions, TokenOptions,
                      _Methods, StageConfig):
    """Notebook 04's config: which methods run (``methods``), every baseline's options (inherited from
    the methods' options classes, papers' values as defaults; ``tokenizer`` is the statistics tokenizer
    of the token windows, the dynamic merge and the chunk statistics) and the notebook's own settings."""

    # the LLM methods run on the shared unit ``selection``, the others on every unit of the corpus.
    # The books (ids or title substrings; empty = all) the semantic chunker runs on: embedding is slow on CPUs
    semantic_books: tuple[str, ...] = ()
    # ... and which of their units: "all" or "selection" (the shared unit selection the LLM methods segment)
    semantic_units: str = one_of("all", "selection", "all")

    # notebook 04 also runs the `published` presets (chunkers/presets.py) and measures how the unit cap
    # (corpus.max_unit_words) changes the statistics of these methods against whole chapters
    published_presets: bool = True
    unit_cap_methods: tuple[str, ...] = ("token", "recursive", "paragraph")

    length_match: bool = True
    length_match_target_tokens: int = 0  # 0 = the native mean of length_match_reference
    length_match_reference: str = one_of("lumber", *ALL_METHODS)
    length_match_tolerance: float = 0.05
    length_match_max_iter: int = 12

    def describe(self) -> str:  # noqa: D102
        out = super().describe() + f" | tokenizer={self.tokenizer}"
        if self.semantic_books:
            out += f" | semantic chunker on {','.join(self.semantic_books)} only"
        if self.semantic_units == "selection":
            out += " | semantic chunker on the unit selection"
        if self.proposition_max_new_tokens < BaselinesConfig.proposition_max_new_tokens:
            out += f" | proposition replies capped at {self.proposition_max_new_tokens} tokens"
        return out
