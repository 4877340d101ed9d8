"""LitSeg as a chonkie chunker (registered as ``"litseg"`` in chonkie's pipeline registry)::

    from chonkie import Pipeline
    import litseg_nb.integrations.chonkie  # registers the "litseg" chunker

    doc = Pipeline().chunk_with("litseg", method="litseg", profile="smoke").run(texts=text)
    for chunk in doc.chunks:
        print(chunk.start_index, chunk.end_index, chunk.context, chunk.text[:60])

or directly ``LitSegChunker(method="paragraph", profile="test").chunk(text)``. Each chunk's
``start_index`` / ``end_index`` are the main text's offsets in ``text``; ``chunk.text`` is the chunk
text (LitSeg's subtitle + context + main text), ``chunk.context`` LitSeg's subtitle, and
``chunk.metadata`` holds unit, sentence range, spans and context indices. A chunk that is not a span
of the text (propositions, an unaligned library piece) has ``start_index = end_index = -1``.
"""
from __future__ import annotations

from typing import Any

from chonkie import BaseChunker
from chonkie.pipeline import chunker
from chonkie.types import Chunk as ChonkieChunk

from .core import Segmenter, chunk_metadata


@chunker("litseg")
class LitSegChunker(BaseChunker):
    """Any registered method as a chonkie chunker. ``options``: overrides of the method's config;
    ``tokenizer``: the packaged tokenizer counting ``token_count`` (no download)."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", options: dict[str, Any] | None = None,
                 tokenizer: str = "all-MiniLM-L6-v2", backend: Any = None, embedder: Any = None):
        from ..chunkers.base import load_tokenizer
        from ..chunkers.library_adapters import chonkie_tokenizer

        self._tok = load_tokenizer(tokenizer)
        super().__init__(tokenizer=chonkie_tokenizer(self._tok))
        self.segmenter = Segmenter(method, profile, backend=backend, embedder=embedder, **(options or {}))

    def chunk(self, text: str) -> list[ChonkieChunk]:
        _, chunks = self.segmenter.segment(text)
        out = []
        for c in chunks:
            md = chunk_metadata(c)
            a = md["start_index"] if md["start_index"] is not None else -1
            b = md["end_index"] if md["end_index"] is not None else -1
            out.append(ChonkieChunk(id=md["chunk_id"], text=c.text, start_index=a, end_index=b,
                                    token_count=self._tok.count(c.text), context=c.subtitle, metadata=md))
        return out

    def __repr__(self) -> str:
        return f"LitSegChunker(method={self.segmenter.method!r}, profile={self.segmenter.profile!r})"
