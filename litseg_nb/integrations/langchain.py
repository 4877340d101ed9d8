"""LitSeg as a LangChain ``TextSplitter``::

    from langchain_core.documents import Document
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    splitter = LitSegTextSplitter(method="litseg", profile="smoke",
                                  llm={"backend": "openai", "base_urls": ("http://localhost:8000/v1",)})
    docs = splitter.split_documents([Document(page_content=text, metadata={"source": "emma.txt"})])

``page_content`` is the text to embed (LitSeg: subtitle + context + main text); each document's metadata
is kept and the chunk's added (:func:`~litseg_nb.integrations.chunk_metadata`; a name the document already
uses keeps the document's value, the chunk's goes under ``litseg_<name>``): ``start_index`` /
``end_index`` locate the main text only, ``spans`` all of it; scalars unless ``nested_metadata=True``.
Keywords: as :class:`~litseg_nb.integrations.Segmenter` takes them.
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from . import Segmenter, check_text, chunk_uid, document_id, unique_ids
from ..chunkers.library import langchain_embeddings
from ..config import StageConfig
from ..llm.embeddings import load_embedder


def profile_embeddings(profile: str = "smoke", **embedding: Any) -> Any:
    """The profile's embedding model (offline MiniLM in test/smoke) as LangChain ``Embeddings``; ``embedding``
    overrides its config (``backend="numpy"``: the core install's torch-free encoder)."""
    return langchain_embeddings(load_embedder(StageConfig.for_profile(profile).embedding.replace(**embedding)))


class LitSegTextSplitter(TextSplitter):
    """Any registered method as a LangChain text splitter (``options``: as :class:`.Segmenter` takes them)."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", *, backend: Any = None,
                 embedder: Any = None, **options: Any):
        # LangChain's size knobs do not apply: the method decides the chunks
        super().__init__(chunk_size=10**9, chunk_overlap=0, strip_whitespace=False)
        self.segmenter = Segmenter(method, profile, backend=backend, embedder=embedder, **options)

    def split_text(self, text: str) -> list[str]:
        return [c.text for c in self.segmenter.segment(text)[1]]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None,
                         ids: list[Any] | None = None) -> list[Document]:
        """One ``Document`` per chunk with ``id`` = its ``chunk_id``; a document's id is ``ids[i]``, else
        ``<source>:<text hash>`` or the text hash (repeats within one call get ``#2`` ...)."""
        texts = [check_text(text, f"(document {i})") for i, text in enumerate(texts)]
        metadatas = metadatas or [{}] * len(texts)
        given = list(ids) if ids is not None else [None] * len(texts)
        doc_ids = []
        for i, text in enumerate(texts):
            source = (metadatas[i] or {}).get("source")
            base = document_id(text)
            doc_ids.append(document_id(text, given[i]) if given[i] else (f"{source}:{base[5:]}" if source else base))
        out = []
        for i, (text, doc_id) in enumerate(zip(texts, unique_ids(doc_ids))):
            _, chunks = self.segmenter.segment(text, doc_id=doc_id)
            for c in chunks:
                md = self.segmenter.metadata(c, copy.deepcopy(metadatas[i]))
                out.append(Document(page_content=c.text, metadata=md, id=chunk_uid(c)))
        return out

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        docs = list(documents)
        for i, d in enumerate(docs):
            if not isinstance(d, Document):
                raise TypeError(f"split_documents takes LangChain Documents; item {i} is {type(d).__name__}")
        return self.create_documents([d.page_content for d in docs], [d.metadata for d in docs],
                                     ids=[d.id for d in docs])
