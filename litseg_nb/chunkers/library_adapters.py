"""Host-library interfaces around this package's models, for the ``lib:`` methods (chunkers/library.py)
and the integrations: a position tokenizer (exact source slices for token-window splitters), the
profile's embedder as LangChain / LlamaIndex / chonkie embeddings, and the profile's LLM backend as
chonkie's "genie". Each host library is imported only inside the function that needs it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .base import ChunkerError
from ..llm.base import LLMError, SamplingParams, UsageTag

STAGE = "04"


class PositionTokenizer:
    """A tokenizer whose token ids are positions: ``decode`` returns the *exact* source slice from
    the first to the last token, so token-window splitters (LangChain's ``TokenTextSplitter``,
    chonkie's ``TokenChunker``) cut the text itself instead of a lossy re-decoding (MiniLM's
    WordPiece lower-cases and re-spaces). Every encoded text keeps its offsets."""

    def __init__(self, tok: Any):
        self.tok = tok
        self._where: list[tuple[int, int, int]] = []  # id -> (text index, start, end)
        self._texts: list[str] = []

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
        k = len(self._texts)
        self._texts.append(text)
        base = len(self._where)
        offs = self.tok.offsets(text)
        self._where.extend((k, a, b) for a, b in offs)
        return list(range(base, base + len(offs)))

    def decode(self, ids: Sequence[int], *args: Any, **kwargs: Any) -> str:
        ids = list(ids)
        if not ids:
            return ""
        k, a, _ = self._where[ids[0]]
        k2, _, b = self._where[ids[-1]]
        if k2 != k:
            raise ChunkerError("PositionTokenizer: token ids of two texts decoded together")
        return self._texts[k][a:b]

    def count_tokens(self, text: str) -> int:
        return self.tok.count(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode_batch(self, seqs: Sequence[Sequence[int]]) -> list[str]:
        return [self.decode(s) for s in seqs]

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self.tok.count_many(list(texts))

    def tokenize(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.tok.offsets(text)]


def chonkie_tokenizer(tok: Any) -> Any:
    """:class:`PositionTokenizer` as a chonkie ``Tokenizer`` (chonkie accepts its own tokenizer class)."""
    from chonkie.tokenizer import Tokenizer as ChonkieTokenizer

    class _ChonkiePositionTokenizer(PositionTokenizer, ChonkieTokenizer):
        def __init__(self, inner: Any):
            ChonkieTokenizer.__init__(self)
            PositionTokenizer.__init__(self, inner)

        def __repr__(self) -> str:
            return f"PositionTokenizer({self.tok.name})"

    return _ChonkiePositionTokenizer(tok)


def langchain_embeddings(embedder: Any) -> Any:
    """The package's :class:`~litseg_nb.llm.embeddings.Embedder` as LangChain ``Embeddings``."""
    from langchain_core.embeddings import Embeddings

    class LitSegEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.encode(list(texts), "sentence").tolist() if texts else []

        def embed_query(self, text: str) -> list[float]:
            return embedder.encode([text], "sentence")[0].tolist()

    return LitSegEmbeddings()


def llamaindex_embedding(embedder: Any) -> Any:
    """The package's embedder as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.embeddings import BaseEmbedding

    class LitSegEmbedding(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.encode([text], "sentence")[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embedder.encode(list(texts), "sentence").tolist() if texts else []

        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.encode([query], "query")[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return LitSegEmbedding(model_name=getattr(embedder, "model_id", "litseg-embedder"))


def chonkie_embeddings(embedder: Any, tok: Any) -> Any:
    """The package's embedder as chonkie ``BaseEmbeddings`` (token counts: the statistics tokenizer)."""
    import numpy as np
    from chonkie.embeddings import BaseEmbeddings

    class LitSegChonkieEmbeddings(BaseEmbeddings):
        def embed(self, text: str) -> np.ndarray:
            return embedder.encode([text], "sentence")[0]

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            return list(embedder.encode(list(texts), "sentence")) if texts else []

        @property
        def dimension(self) -> int:
            return embedder.dim

        def get_tokenizer(self) -> Any:
            return chonkie_tokenizer(tok)

        @classmethod
        def _is_available(cls) -> bool:
            return True

        def __repr__(self) -> str:
            return f"LitSegChonkieEmbeddings({getattr(embedder, 'model_id', '?')})"

    return LitSegChonkieEmbeddings()


@dataclass
class GenieStats:
    """What chonkie's SlumberChunker asked the LLM. chonkie retries a prompt only after an invalid
    reply (no integer, or an index past the window) and, after ``max_retries``, silently keeps the
    window's passages together; greedy decoding through the request cache repeats the reply, so a
    prompt asked more than once is one such fallback (``repeated_prompts``)."""

    calls: int = 0
    no_integer: int = 0  # replies without any integer
    prompts: dict[str, int] = dataclasses.field(default_factory=dict)
    # a backend failure (dead server, 5xx, timeout): chonkie catches every exception of ``generate``
    # and keeps the window together, so the error is kept here and re-raised after the unit
    error: BaseException | None = None

    @property
    def repeated_prompts(self) -> int:
        return sum(1 for n in self.prompts.values() if n > 1)


def chonkie_genie(backend: Any, method: str, max_new_tokens: int, stats: GenieStats, book_id: Callable[[], str]) -> Any:
    """The profile's LLM backend (request cache, usage ledger) as a chonkie ``BaseGenie`` (text mode)."""
    import re

    from chonkie.genie import BaseGenie

    class LitSegGenie(BaseGenie):
        def generate(self, prompt: str) -> str:
            if stats.error is not None:  # the server already failed: ask it nothing more
                raise stats.error
            try:
                gen = backend.chat([[{"role": "user", "content": prompt}]],
                                   SamplingParams(max_new_tokens=max_new_tokens),
                                   tag=UsageTag(method, book_id(), STAGE))[0]
            except LLMError as e:
                stats.error = e
                raise
            stats.calls += 1
            stats.prompts[prompt] = stats.prompts.get(prompt, 0) + 1
            if not re.search(r"\d+", gen.text or ""):
                stats.no_integer += 1
            return gen.text

    return LitSegGenie()


def _langchain_token_splitter(tok: Any, **kwargs: Any) -> Any:
    """LangChain's ``TokenTextSplitter`` (its own ``split_text``) on a local tokenizer instead of
    tiktoken, whose encodings are downloaded on first use."""
    from langchain_text_splitters import TextSplitter, TokenTextSplitter

    class LocalTokenTextSplitter(TokenTextSplitter):
        def __init__(self, **kw: Any):
            TextSplitter.__init__(self, **kw)
            self._tokenizer = PositionTokenizer(tok)
            self._allowed_special = set()
            self._disallowed_special = ()

    return LocalTokenTextSplitter(**kwargs)
