"""LitSeg as a chonkie chunker (registered as ``"litseg"`` in chonkie's pipeline registry)::

    from chonkie import Pipeline
    import litseg_nb.integrations.chonkie  # registers the "litseg" chunker

    llm = {"backend": "openai", "base_urls": ("http://localhost:8000/v1",)}  # an LLM method runs on the LLM given
    doc = Pipeline().chunk_with("litseg", method="litseg", profile="smoke", llm=llm, chunk_size=256).run(texts=text)
    for chunk in doc.chunks:
        print(chunk.start_index, chunk.end_index, chunk.context, chunk.text[:60])

``start_index`` / ``end_index`` locate the main text in ``text`` (-1 for a chunk that is no span of it);
``chunk.text`` is the text to embed (LitSeg: subtitle + context + main text). LitSeg's ``subtitle`` and
``context_idx`` sit in ``chunk.metadata`` (chonkie's ``OverlapRefinery`` writes ``context``). Keywords
(or ``options={...}``): as :class:`~litseg_nb.integrations.Segmenter` takes them.
"""
from __future__ import annotations

from typing import Any

from chonkie import BaseChunker
from chonkie.pipeline import chunker
from chonkie.types import Chunk as ChonkieChunk

from ..core.schema import Chunk
from . import Segmenter, chunk_uid
from ..chunkers.library import chonkie_tokenizer
from ..config import ConfigError


@chunker("litseg")
class LitSegChunker(BaseChunker):
    """Any registered method as a chonkie chunker."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", options: dict[str, Any] | None = None,
                 backend: Any = None, embedder: Any = None, **overrides: Any):
        both = sorted(set(options or {}) & set(overrides))
        if both:
            raise ConfigError(f"LitSegChunker: {', '.join(both)} given both in options= and as a keyword")
        self.segmenter = Segmenter(method, profile, backend=backend, embedder=embedder, **{**(options or {}),
                                                                                             **overrides})
        super().__init__(tokenizer=chonkie_tokenizer(self.segmenter.tokenizer))

    def chunk(self, text: str) -> list[ChonkieChunk]:
        _, chunks = self.segmenter.segment(text)
        return [self.to_chonkie(c) for c in chunks]

    def to_chonkie(self, c: Chunk) -> ChonkieChunk:
        """One chunk as chonkie's ``Chunk`` (``context`` left to chonkie's refineries)."""
        md = self.segmenter.metadata(c)
        a = md["start_index"] if md["start_index"] is not None else -1
        b = md["end_index"] if md["end_index"] is not None else -1
        return ChonkieChunk(id=chunk_uid(c), text=c.text, start_index=a, end_index=b,
                            token_count=md["token_count"], metadata=md)

    def __repr__(self) -> str:
        return f"LitSegChunker(method={self.segmenter.method!r}, profile={self.segmenter.profile!r})"
