"""LitSeg as a LangChain ``TextSplitter``::

    from langchain_core.documents import Document
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    splitter = LitSegTextSplitter(method="litseg", profile="smoke",
                                  llm={"backend": "openai", "base_urls": ("http://localhost:8000/v1",)})
    docs = splitter.split_documents([Document(page_content=text, metadata={"source": "emma.txt"})])

``split_text`` returns the chunk texts (LitSeg's subtitle + context + main text; for the baselines
the main text); ``create_documents`` / ``split_documents`` keep each input document's metadata and
add the chunk's: ``doc_id, chunk_id, method, unit_id, from_idx, to_idx, context_idx, subtitle, spans,
start_index, end_index, main_text, token_count, tokenizer``.

Which text is which: ``page_content`` is the text to embed and index (for LitSeg the subtitle and
context sentences *plus* the main text), so it is generally not a slice of the document;
``start_index`` / ``end_index`` locate the **main text** only (``text[start_index:end_index] ==
main_text`` for a contiguous chunk, ``"".join(text[a:b] for a, b in json.loads(spans)) == main_text``
always). Metadata values are scalars by default (``spans``, ``context_idx`` as JSON strings, which
every vector store accepts; ``nested_metadata=True`` keeps lists).

Keywords: the adapter's own (``keep_outside_units``, ``nested_metadata``, ``token_counter``: see
:data:`litseg_nb.integrations.ADAPTER_OPTIONS`) and overrides of the method's config; an unknown
one is a :class:`~litseg_nb.config.ConfigError` naming the known ones.
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from . import Segmenter, check_text, document_id, unique_ids
from ..chunkers.library_adapters import langchain_embeddings
from ..config import StageConfig
from ..llm.embeddings import load_embedder


def profile_embeddings(profile: str = "smoke") -> Any:
    """The profile's embedding model (offline MiniLM in test/smoke) as LangChain ``Embeddings``."""

    return langchain_embeddings(load_embedder(StageConfig.for_profile(profile).embedding))


class LitSegTextSplitter(TextSplitter):
    """Any registered method (``litseg``, ``litseg-lite``, a baseline, ``lib:<preset>``) as a
    LangChain text splitter. ``options`` are overrides of the method's config (see
    :class:`~litseg_nb.integrations.Segmenter`)."""

    def __init__(self, method: str = "litseg", profile: str = "smoke", *, backend: Any = None,
                 embedder: Any = None, **options: Any):
        # LangChain's size knobs do not apply: the method decides the chunks
        super().__init__(chunk_size=10**9, chunk_overlap=0, strip_whitespace=False)
        self.segmenter = Segmenter(method, profile, backend=backend, embedder=embedder, **options)

    def split_text(self, text: str) -> list[str]:
        return [c.text for c in self.segmenter.segment(text)[1]]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None,
                         ids: list[Any] | None = None) -> list[Document]:
        """One ``Document`` per chunk, ``Document.id`` = ``metadata["chunk_id"]`` (unique across the
        documents: ``<doc_id>/<unit>.<chunk>``). A document's id is ``ids[i]`` (``split_documents`` passes
        ``Document.id``), else ``<source>:<text hash>`` or the text hash; repeats within one call get ``#2``..."""
        texts = list(texts)
        for i, text in enumerate(texts):
            check_text(text, f"(document {i})")
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
                out.append(Document(page_content=c.text, metadata=md, id=md["chunk_id"]))
        return out

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        docs = list(documents)
        for i, d in enumerate(docs):
            if not isinstance(d, Document):
                raise TypeError(f"split_documents takes LangChain Documents; item {i} is {type(d).__name__}")
        return self.create_documents([d.page_content for d in docs], [d.metadata for d in docs],
                                     ids=[d.id for d in docs])
