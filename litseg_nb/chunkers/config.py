"""Configuration of the baseline chunkers (notebook 04): :class:`BaselinesConfig`.

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

from ..config import ConfigError, StageConfig, at_least, between, one_of

# the method names (checked against the one registry of segmenters by the registry itself)
from ..methods import ALL_METHODS, LLM_METHODS, METHOD_NAMES, SEGMENTERS  # noqa: F401


@dataclass(frozen=True)
class BaselinesConfig(StageConfig):
    """Every size knob, threshold and budget of the baselines (papers' values as defaults)."""

    methods: tuple[str, ...] = one_of(ALL_METHODS, *ALL_METHODS)
    # tokenizer for the token splitter, dynamic-merge lengths and chunk statistics: a packaged
    # name ("all-MiniLM-L6-v2"), a local path, or "llm" (the LLM backend's own tokenizer)
    tokenizer: str = "all-MiniLM-L6-v2"

    token_chunk_size: int = at_least(400, 1)  # tokens per window
    token_chunk_overlap: int = at_least(40, 0)  # < token_chunk_size

    recursive_chunk_size: int = at_least(1800, 1)  # characters (LangChain measures len())
    recursive_chunk_overlap: int = at_least(200, 0)  # < recursive_chunk_size
    # LitSeg App. H: "paragraph breaks, newlines, punctuation, and whitespace"
    recursive_separators: tuple[str, ...] = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ", "")

    semantic_breakpoint_percentile: float = between(95.0, 0.0, 100.0)
    semantic_buffer_size: int = at_least(1, 0)

    # TextTiling (Hearst 1997; NLTK's defaults) and C99 (Choi 2000's values), not tuned on any benchmark
    texttiling_w: int = at_least(20, 2)  # words per pseudo-sentence
    texttiling_k: int = at_least(10, 1)  # pseudo-sentences per block
    c99_mask: int = at_least(11, 3)  # rank-transform mask (odd)
    c99_c: float = 1.2  # stop when the density gain falls below mean + c * std

    perplexity_threshold: float = 0.4  # Meta-Chunking App. G (NarrativeQA)
    perplexity_merge_threshold: float = 0.0  # App. F: θ = 0 before dynamic combination
    perplexity_dynamic_overlap: bool = False  # the minimum sentence joins both neighbours
    perplexity_max_context: int = 0  # tokens kept in the KV cache; 0 = llm.max_model_len
    perplexity_block_tokens: int = 1024  # tokens fed per forward pass

    margin_threshold_window: int = 5  # θ = mean of the last k margins (θ = 0 before k margins)
    margin_max_left_tokens: int = 0  # cap on the left text in the prompt (0 = whole current chunk)

    lumber_budget_tokens: int = 550
    lumber_max_retries: int = 2  # extra attempts after an invalid reply
    lumber_retry_temperature: float = 0.7
    lumber_max_new_tokens: int = 32
    lumber_reference_mode: bool = False  # reference script: 1.2 x words estimate, stop before budget

    merge_target_tokens: int = 334  # dynamic merge target L (LumberChunker's published mean)

    proposition_max_new_tokens: int = 512
    proposition_max_retries: int = 1

    # Meta-Chunking semantic completion (§3.2, App. C) on perplexity+merge chunks: method
    # "perplexity+merge+completion" (chunkers/completion.py; own prompts, labelled)
    completion_max_new_tokens: int = 256
    completion_max_items: int = 5  # missing items kept from the reflection stage
    completion_min_score: int = 4  # refinement: items scored >= this (1-5) are added
    completion_related_chunks: int = 2  # context: most similar chunks by embedding (0 = neighbours)
    completion_context_chars: int = 600  # characters of each context chunk in the prompts
    completion_index_summary: bool = True  # retriever text = enhanced summary + (rewritten) chunk

    # the LLM-based methods run on the shared ``selection`` (litseg_nb.selection.select_units), the
    # units LitSeg and LitSeg-Lite segment; the other methods run on every unit of the corpus
    # books (ids or title substrings) the embedding-based semantic chunker runs on; empty = all.
    # On 2 CPU cores MiniLM embeds ~65 three-sentence groups per second, so the smoke profile
    # limits it to the evaluation book instead of spending ~10 minutes on the eleven raw books.
    semantic_books: tuple[str, ...] = ()

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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.c99_mask % 2 == 0:
            raise ConfigError(f"BaselinesConfig.c99_mask: {self.c99_mask} must be odd")
        for size, overlap in (("token_chunk_size", "token_chunk_overlap"),
                              ("recursive_chunk_size", "recursive_chunk_overlap")):
            if getattr(self, overlap) >= getattr(self, size):
                raise ConfigError(f"BaselinesConfig.{overlap}: {getattr(self, overlap)} must be below "
                                  f"{size} ({getattr(self, size)})")

    def describe(self) -> str:  # noqa: D102
        out = super().describe() + f" | tokenizer={self.tokenizer}"
        if self.semantic_books:
            out += f" | semantic chunker on {','.join(self.semantic_books)} only"
        if self.proposition_max_new_tokens < BaselinesConfig.proposition_max_new_tokens:
            out += f" | proposition replies capped at {self.proposition_max_new_tokens} tokens"
        return out
