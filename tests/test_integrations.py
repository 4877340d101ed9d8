"""LitSeg inside the host libraries' own pipelines (litseg_nb/integrations): LangChain
split_documents into its InMemoryVectorStore, LlamaIndex IngestionPipeline into VectorStoreIndex,
chonkie's Pipeline; on a real book, spans slice the document text to each chunk's main text."""
from __future__ import annotations

import pytest

import litseg_nb

BOOK = "gutenberg/11.txt"


@pytest.fixture(scope="module")
def text(data_dir):
    """The first ~5,000 characters of Alice (cleaned), cut at a paragraph: the document a user holds."""
    full = litseg_nb.load_text(data_dir / BOOK).text
    return full[:full.index("\n\n", 5000)]


@pytest.fixture(scope="module")
def embedder():
    from litseg_nb.config import EmbeddingConfig
    from litseg_nb.llm.embeddings import load_embedder

    return load_embedder(EmbeddingConfig())


def _slices(text, start, end, spans, chunk_text):
    """The offsets and spans locate the main text, which is in the chunk's text (no second copy in metadata)."""
    import json

    spans = json.loads(spans) if isinstance(spans, str) else spans  # scalar metadata: JSON strings
    main_text = "".join(text[a:b] for a, b in spans)
    assert text[start:end] == main_text and main_text and main_text in chunk_text


def test_langchain_split_documents_into_in_memory_vector_store(text, embedder):
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from litseg_nb.chunkers.library import langchain_embeddings
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    splitter = LitSegTextSplitter("paragraph", "test")
    docs = splitter.split_documents([Document(page_content=text, metadata={"source": "alice", "author": "Carroll"})])
    assert len(docs) > 5
    for d in docs:
        md = d.metadata
        assert md["source"] == "alice" and md["author"] == "Carroll" and md["method"] == "paragraph"
        assert {"unit_id", "from_idx", "to_idx", "context_idx", "subtitle"} <= set(md)
        _slices(text, md["start_index"], md["end_index"], md["spans"], d.page_content)
        assert "main_text" not in md
    assert [d.page_content for d in docs] == splitter.split_text(text)
    assert len(splitter.create_documents([text, text], [{"k": 1}, {"k": 2}])) == 2 * len(docs)
    store = InMemoryVectorStore(embedding=langchain_embeddings(embedder))
    ids = store.add_documents(docs)
    assert len(ids) == len(docs)
    hit = store.similarity_search(docs[3].page_content, k=1)[0]
    assert hit.metadata["chunk_id"] == docs[3].metadata["chunk_id"]


def test_llamaindex_ingestion_pipeline_into_vector_store_index(text, embedder):
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.schema import NodeRelationship

    from litseg_nb.chunkers.library import llamaindex_embedding
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    doc = Document(text=text, metadata={"source": "alice"})
    nodes = IngestionPipeline(transformations=[LitSegNodeParser(method="lib:langchain-token", profile="test",
                                                                options={"chunk_size": 120})]).run(documents=[doc])
    assert len(nodes) > 5
    for i, n in enumerate(nodes):
        _slices(text, n.start_char_idx, n.end_char_idx, n.metadata["spans"], n.text)
        assert n.metadata["source"] == "alice" and n.ref_doc_id == doc.doc_id
        if i:
            assert n.relationships[NodeRelationship.PREVIOUS].node_id == nodes[i - 1].node_id
            assert nodes[i - 1].relationships[NodeRelationship.NEXT].node_id == n.node_id
    index = VectorStoreIndex(nodes, embed_model=llamaindex_embedding(embedder))
    got = index.as_retriever(similarity_top_k=1).retrieve(nodes[2].get_content())
    assert got[0].node.node_id == nodes[2].node_id


def test_chonkie_pipeline_with_the_registered_litseg_chunker(text):
    from chonkie import Pipeline

    import litseg_nb.integrations.chonkie  # noqa: F401  (registers "litseg")

    doc = Pipeline().chunk_with("litseg", method="token", profile="test", options={"token_chunk_size": 100}).run(
        texts=text)
    assert len(doc.chunks) > 5
    for c in doc.chunks:
        _slices(text, c.start_index, c.end_index, c.metadata["spans"], c.text)
        assert c.token_count > 0 and c.metadata["method"] == "token"


@pytest.mark.slow
def test_litseg_itself_through_the_langchain_splitter_on_the_tiny_model(text):
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    short = text[:text.index("\n\n", 1200)]
    docs = LitSegTextSplitter("litseg", "test", calibrate=False, llm={"backend": "hf"}).create_documents([short])
    assert docs and {d.metadata["method"] for d in docs} == {"litseg"}
    for d in docs:
        md = d.metadata
        if md["is_source_span"]:
            _slices(short, md["start_index"], md["end_index"], md["spans"], d.page_content)


def test_an_openai_compatible_server_drives_the_llm_method_inside_llamaindex(text):
    """Any backend: the node parser's LLM method (chonkie's SlumberChunker as ``lib:chonkie-slumber``)
    talks to an OpenAI-compatible server (a loopback fake answering split index 2)."""
    import sys
    from pathlib import Path

    from llama_index.core import Document

    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import LoopbackServer, chat_reply

    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    class Splits(LoopbackServer):
        def respond(self, handler, body):
            self.send(handler, 200, chat_reply("2"))

    short = text[:text.index("\n\n", 1500)]
    with Splits() as srv:
        parser = LitSegNodeParser(method="lib:chonkie-slumber", profile="test",
                                  options={"llm": {"backend": "openai", "base_urls": (srv.url,), "model": "fake",
                                                   "use_cache": False}, "chunk_size": 60})
        nodes = parser.get_nodes_from_documents([Document(text=short)])
        assert srv.requests and all(r["path"].endswith("/chat/completions") for r in srv.requests)
    assert len(nodes) >= 2
    for n in nodes:
        _slices(short, n.start_char_idx, n.end_char_idx, n.metadata["spans"], n.text)
    ledger = parser._segmenter.backend.ledger.to_frame()
    assert int(ledger[ledger.method == "lib:chonkie-slumber"]["calls"].sum()) == len(srv.requests)


def test_the_package_imports_and_segments_without_any_host_library(data_dir):
    """Host libraries are imported lazily: with chonkie, LlamaIndex and semchunk made
    unimportable, the package, its registry and litseg_nb.integrations still import and segment, and a
    lib: method says which library is missing (a configuration error, not an ImportError)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for m in ('chonkie', 'llama_index', 'semchunk'): sys.modules[m] = None\n"
        "import litseg_nb, litseg_nb.integrations\n"
        "from litseg_nb.config import ConfigError\n"
        f"book = litseg_nb.load_text({str(data_dir / BOOK)!r}, max_unit_words=300)\n"
        "assert litseg_nb.segment(book, 'paragraph', profile='test', max_units=1)\n"
        "try:\n"
        "    litseg_nb.segment(book, 'lib:chonkie-token', profile='test', max_units=1)\n"
        "except ConfigError as e:\n"
        "    assert 'cannot load' in str(e) and 'chonkie' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
        "assert not any(k.split('.')[0] in ('chonkie', 'llama_index') and v is not None for k, v in sys.modules.items())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
