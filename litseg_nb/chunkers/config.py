"""Configuration of the baseline chunkers (notebook 04): :class:`BaselinesConfig`, and the baselines' names.

Each method's knobs are declared once, in its options class beside the method (``TokenOptions`` in
chunkers/token.py, ``LumberOptions`` in chunkers/lumber.py, ...); :class:`BaselinesConfig` inherits
them all, so ``--set lumber_budget_tokens=400``, the profile table's rows and
``BaselinesConfig.for_profile(..., lumber_budget_tokens=400)`` name a knob as before, and the registry
(:mod:`litseg_nb.segmenters.registry`) hands each method only its own options
(:meth:`~litseg_nb.config.Options.of`), from which its cache key is derived. What is left here are
notebook 04's own settings: which methods run, on which books, and the extra tables.

Defaults follow the papers where they give a value:

* LumberChunker (Duarte et al., 2024): window budget θ = 550 tokens.
* Meta-Chunking (Zhao et al., 2025): perplexity threshold θ = 0.4 for the narrative dataset
  (NarrativeQA, Appendix G) and θ = 0 before dynamic merging (Appendix F, Figure 7); margin-sampling
  threshold starting at 0 and following the mean of recent margins (§3.1.2; the reference code
  averages the last five).
* SemanticChunker (LangChain experimental): percentile breakpoints at the 95th percentile, buffer 1.
* RecursiveCharacterTextSplitter: LangChain's chunk size 4,000 / overlap 200 are *character*
  defaults for generic documents; LitSeg's Table 21 (its baseline configuration) is not part of the
  text we have, so the size defaults here are chosen to land near LumberChunker's published GutenQA
  chunk sizes (recursive ≈ 399 tokens/chunk) and are labelled as our choice in every table.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import StageConfig, _Base, one_of
from .boundary_model import BoundaryModelOptions
from .c99 import C99Options
from .completion import CompletionOptions
from .lumber import LumberOptions
from .margin import MarginOptions
from .merge import MergeOptions
from .paragraph import ParagraphOptions
from .perplexity import PerplexityOptions
from .proposition import PropositionOptions
from .recursive import RecursiveOptions
from .semantic import SemanticOptions
from .texttiling import TextTilingOptions
from .token import TokenOptions

#: notebook 04's baselines in table order, each with what it needs ("text": rules only, "embedder",
#: "llm"). Declared here, below the registry, for the configs and chunk sets that need the names; the
#: registry (litseg_nb.segmenters.registry) registers a method for each name, with this need, and
#: refuses to import if a name has no method or a method no name.
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
    """Which baselines notebook 04 runs: a base of :class:`BaselinesConfig` only so that this field
    comes first, before the methods' options (the order of ``config`` listings and manifests)."""

    methods: tuple[str, ...] = one_of(ALL_METHODS, *ALL_METHODS)


@dataclass(frozen=True)
class BaselinesConfig(CompletionOptions, PropositionOptions, MergeOptions, LumberOptions, MarginOptions,
                      PerplexityOptions, BoundaryModelOptions, C99Options, TextTilingOptions, ParagraphOptions, SemanticOptions, RecursiveOptions, TokenOptions,
                      _Methods, StageConfig):
    """Notebook 04's config: which methods run (``methods``), every baseline's options (inherited from
    the methods' options classes, papers' values as defaults; ``tokenizer`` is the statistics tokenizer
    of the token windows, the dynamic merge and the chunk statistics) and the notebook's own settings."""

    # the LLM-based methods run on the shared ``selection`` (litseg_nb.corpus.select_units), the
    # units LitSeg and LitSeg-Lite segment; the other methods run on every unit of the corpus
    # books (ids or title substrings) the embedding-based semantic chunker runs on; empty = all.
    # On 2 CPU cores MiniLM embeds ~65 three-sentence groups per second, so the smoke profile
    # limits it to the evaluation book instead of spending ~10 minutes on the eleven raw books.
    semantic_books: tuple[str, ...] = ()
    # ... and which of their units: "all" or "selection" (the shared unit selection the LLM methods segment;
    # smoke: every unit notebooks 05-07 compare the methods on, ~100 s less of embedding than all of Emma)
    semantic_units: str = one_of("all", "selection", "all")

    # notebook 04 also runs the `published` presets (chunkers/presets.py: knobs calibrated to
    # LumberChunker's published GutenQA tokens/chunk) and measures how the unit cap
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
