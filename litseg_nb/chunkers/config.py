"""Configuration of the baseline chunkers (notebook 04): the baselines' names and :class:`BaselinesConfig`,
which inherits every method's options class plus the notebook's own settings.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import StageConfig, _Base, one_of
from .base import MergeOptions
from .boundary_model import BoundaryModelOptions
from .llm_chunkers import CompletionOptions, LumberOptions, MarginOptions, PropositionOptions
from .perplexity import PerplexityOptions
from .splitters import ParagraphOptions, RecursiveOptions, SemanticOptions, TokenOptions
from .topic import C99Options, TextTilingOptions

#: notebook 04's baselines in table order, each with what it needs ("text", "embedder", "llm")
BASELINES: dict[str, str] = {
    "token": "text", "recursive": "text", "semantic": "embedder", "paragraph": "text", "texttiling": "text", "c99": "text",
    "boundary-model": "text",
    "perplexity": "llm",
    "margin": "llm", "lumber": "llm", "perplexity+merge": "llm", "margin+merge": "llm", "lumber+merge": "llm",
    "proposition": "llm", "perplexity+merge+completion": "llm",
}
ALL_METHODS: tuple[str, ...] = tuple(BASELINES)
LLM_METHODS: tuple[str, ...] = tuple(m for m, need in BASELINES.items() if need == "llm")


@dataclass(frozen=True)
class _Methods(_Base):
    """A separate base so that ``methods`` comes first in ``config`` listings and manifests."""

    methods: tuple[str, ...] = one_of(ALL_METHODS, *ALL_METHODS)


@dataclass(frozen=True)
class BaselinesConfig(CompletionOptions, PropositionOptions, MergeOptions, LumberOptions, MarginOptions,
                      PerplexityOptions, BoundaryModelOptions, C99Options, TextTilingOptions, ParagraphOptions, SemanticOptions, RecursiveOptions, TokenOptions,
                      _Methods, StageConfig):
    """Notebook 04's config: which methods run, every baseline's options and the notebook's own settings."""

    # the books (ids or title substrings; empty = all) the semantic chunker runs on: embedding is slow on CPUs
    semantic_books: tuple[str, ...] = ()
    # ... and which of their units ("selection": the shared unit selection the LLM methods segment)
    semantic_units: str = one_of("all", "selection", "all")

    # the `published` presets, and the methods whose statistics are compared on capped units and whole chapters
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
