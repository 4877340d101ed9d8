"""LitSeg inside the user's pipeline: a LangChain ``TextSplitter``, a LlamaIndex ``NodeParser`` and a
chonkie chunker, each wrapping any registered method (``litseg``, ``litseg-lite``, a baseline or a
``lib:`` preset) on any backend (``hf``, ``vllm``, an OpenAI-compatible server) through
:func:`litseg_nb.segment`.

::

    from litseg_nb.integrations.langchain import LitSegTextSplitter
    from litseg_nb.integrations.llamaindex import LitSegNodeParser
    from litseg_nb.integrations.chonkie import LitSegChunker

One module per host library; the host library is imported only when its module is (``import
litseg_nb.integrations`` works without any of them). Every chunk keeps exact character offsets into
the text it came from (the document's own text: no cleaning), its unit, sentence range, LitSeg's
subtitle and context sentence indices.
"""
from __future__ import annotations

from typing import Any

_EXPORTS = {"LitSegTextSplitter": "langchain", "LitSegNodeParser": "llamaindex", "LitSegChunker": "chonkie"}
__all__ = ["Segmenter", *_EXPORTS]

from .core import Segmenter  # noqa: E402  (no host library needed)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
