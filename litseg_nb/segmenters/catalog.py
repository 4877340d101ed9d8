"""What each registered method does, in one line: the ``methods`` subcommand, ``segment --help``.

:data:`DESCRIPTIONS` holds a line per name of :data:`~litseg_nb.segmenters.registry.METHOD_NAMES`
(a test checks that every registered method has one); the ``lib:`` presets take theirs from
:data:`litseg_nb.chunkers.library.PRESETS` (their ``note``).
"""
from __future__ import annotations

from typing import Iterator
from ..chunkers.library import PRESETS
from .registry import METHOD_NAMES, get_method

#: one line per registered method (what it does and the paper it comes from)
DESCRIPTIONS: dict[str, str] = {
    "token": "fixed windows of token_chunk_size tokens of the statistics tokenizer",
    "recursive": "recursive character splitting on paragraph, line, sentence and word separators",
    "semantic": "breaks where neighbouring sentence embeddings differ most (LangChain's SemanticChunker idea)",
    "paragraph": "one chunk per paragraph of the unit",
    "texttiling": "TextTiling (Hearst 1997, NLTK's defaults): cuts at the deepest lexical-cohesion valleys, at paragraph starts",
    "c99": "C99 (Choi 2000): rank-transformed sentence similarity, divisive clustering until the density gain is small",
    "boundary-model": "our narrative boundary model (trained on gutenberg_train's own breaks): top-scored paragraph starts",
    "perplexity": "Meta-Chunking's perplexity chunking: splits at perplexity minima of the LLM",
    "margin": "Meta-Chunking's margin sampling: the LLM decides, sentence by sentence, whether to split",
    "lumber": "LumberChunker: the LLM picks where the content shifts in a window of lumber_budget_tokens",
    "perplexity+merge": "perplexity chunks, then Meta-Chunking's dynamic merge up to a length",
    "margin+merge": "margin-sampling chunks, then the dynamic merge",
    "lumber+merge": "LumberChunker chunks, then the dynamic merge",
    "proposition": "propositions written by the LLM (Chen et al.'s propositionizer; not spans of the text)",
    "perplexity+merge+completion": "perplexity+merge chunks with Meta-Chunking's semantic completion",
    "litseg": "LitSeg: narrative-aware segmentation with a subtitle and context per chunk (the paper's method)",
    "litseg-lite": "LitSeg-Lite: the one-stage student prompt (point llm.model at a distilled model)",
}

NEEDS = {"text": "rules", "embedder": "embedder", "llm": "LLM"}


def method_lines() -> Iterator[tuple[str, str, str]]:
    """``(name, needs, description)`` of every registered method, then every ``lib:`` preset."""

    for name in METHOD_NAMES:
        yield name, NEEDS[get_method(name).needs], DESCRIPTIONS[name]
    for name, preset in PRESETS.items():
        yield f"lib:{name}", NEEDS[preset.needs], f"{preset.target}: {preset.note}"


def methods_text() -> str:
    """The ``methods`` subcommand's listing."""
    rows = [(n, f"[{needs}]", d) for n, needs, d in method_lines()]
    width = max(len(n) for n, *_ in rows)
    out = ["Methods (python -m litseg_nb segment BOOK --method NAME; needs: rules = no model, LLM = the "
           "profile's LLM or --base-url, embedder = the profile's embedding model):", ""]
    out += [f"  {n:<{width}}  {needs:<10}  {d}" for n, needs, d in rows if not n.startswith("lib:")]
    out += ["", "Library presets (the libraries' own splitters, chunks aligned to the text; options with "
                "--set KEY=VALUE, e.g. --set chunk_size=300; any lib:<library>.<Class> works too):", ""]
    out += [f"  {n:<{width}}  {needs:<10}  {d}" for n, needs, d in rows if n.startswith("lib:")]
    return "\n".join(out)
