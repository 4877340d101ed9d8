"""The segmentation methods' names, for the modules below the registry (configs, the profile table,
chunk sets) that must not import it.

:mod:`litseg_nb.chunkers.registry` registers a :class:`~litseg_nb.chunkers.registry.ChunkerSpec` for
every name and checks, when it is imported, that the names it registers are exactly these, in this
order (a method added there and not here, or in another order, is an ImportError naming both).
"""
from __future__ import annotations

#: notebook 04's baselines, in table order (the registry's baseline specs)
ALL_METHODS: tuple[str, ...] = ("token", "recursive", "semantic", "paragraph", "texttiling", "c99", "perplexity",
                                "margin", "lumber",
                                "perplexity+merge", "margin+merge", "lumber+merge", "proposition",
                                "perplexity+merge+completion")
#: the baselines that need an LLM
LLM_METHODS: tuple[str, ...] = ("perplexity", "margin", "lumber", "perplexity+merge", "margin+merge", "lumber+merge",
                                "proposition", "perplexity+merge+completion")
#: the paper's segmenters (notebooks 02 and 03)
SEGMENTERS: tuple[str, ...] = ("litseg", "litseg-lite")
#: every method name a chunk set can carry (also the order chunk sets are evaluated and tabled in)
METHOD_NAMES: tuple[str, ...] = ALL_METHODS + SEGMENTERS
