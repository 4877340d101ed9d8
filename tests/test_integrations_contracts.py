"""The adapters keep their hosts' contracts: one rule for keywords (config overrides; an
unknown one is a ConfigError naming the known ones) in all three; LlamaIndex's show_progress,
include_metadata, include_prev_next_rel, id_func, char offsets and SOURCE; text outside the narrative
units chunked (dropped only with keep_outside_units=False, and reported); token counts with a named
tokenizer; scalar-only metadata by default; LitSeg's subtitle and context through chonkie's overlap
refinery."""
from __future__ import annotations

import json
import warnings

import pytest

from litseg_nb.config import ConfigError

TITLE = "THE TEST BOOK\n\nA. N. Author\n\n"
BODY = ("CHAPTER I. The Start\n\n"
        "It was a cold morning. The wind came down the hill. Nobody spoke at breakfast.\n\n"
        "Later the rain stopped. They walked to the river and sat on the bank.\n\n"
        "CHAPTER II. The End\n\n"
        "The boat came at noon. They climbed aboard in silence. The river carried them away.\n\n"
        "At night the stars came out. Somebody sang a song about the sea.\n")
TEXT = TITLE + BODY


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _adapters():
    from litseg_nb.integrations.chonkie import LitSegChunker
    from litseg_nb.integrations.langchain import LitSegTextSplitter
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    hf = {"llm": {"backend": "hf"}}
    return {"langchain": lambda **kw: LitSegTextSplitter("lumber", "test", **hf, **kw),
            "llamaindex": lambda **kw: LitSegNodeParser(method="lumber", profile="test", **hf, **kw),
            "chonkie": lambda **kw: LitSegChunker("lumber", "test", **hf, **kw)}


def _segmenter(adapter):
    return getattr(adapter, "segmenter", None) or adapter._segmenter


@pytest.mark.parametrize("host", ["langchain", "llamaindex", "chonkie"])
def test_keywords_are_config_overrides_and_a_typo_is_an_error_naming_the_known_ones(host):
    make = _adapters()[host]
    assert _segmenter(make(lumber_budget_tokens=400)).cfg.lumber_budget_tokens == 400
    with pytest.raises(ConfigError) as e:
        make(lumber_budget_tokenz=400)
    msg = str(e.value)
    assert "lumber_budget_tokenz" in msg and "lumber_budget_tokens" in msg and "keep_outside_units" in msg
    with pytest.raises(ConfigError, match="keep_outside_units must be True or False"):
        make(keep_outside_units="yes")


def _texts(host, chunks):
    return [c.page_content if host == "langchain" else c.text if host == "chonkie" else c.get_content()
            for c in chunks]


def _md(c):
    return c.metadata


def _run(host, text=TEXT, **kw):
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    from litseg_nb.integrations.chonkie import LitSegChunker
    from litseg_nb.integrations.langchain import LitSegTextSplitter
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    if host == "langchain":
        return LitSegTextSplitter("paragraph", "test", **kw).split_documents(
            [LCDocument(page_content=text, metadata={"source": "t"})])
    if host == "llamaindex":
        return LitSegNodeParser(method="paragraph", profile="test", **kw).get_nodes_from_documents(
            [LIDocument(text=text, metadata={"source": "t"})])
    return LitSegChunker("paragraph", "test", **kw).chunk(text)


@pytest.mark.parametrize("host", ["langchain", "llamaindex", "chonkie"])
def test_text_outside_the_units_is_chunked_by_default_and_dropped_only_when_asked(host):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to report: every word is in a chunk
        kept = _run(host)
    first = _md(kept[0])
    assert first["unit_id"] == "outside" and first["outside_units"] is True
    assert _texts(host, kept)[0] == "THE TEST BOOK\n\nA. N. Author"
    assert TEXT[first["start_index"]:first["end_index"]] == "THE TEST BOOK\n\nA. N. Author"
    words = " ".join(_texts(host, kept)).split()
    assert sorted(words) == sorted(TEXT.split())  # every word of the document in exactly one chunk
    with pytest.warns(UserWarning, match=r"6 word\(s\) in 1 stretch\(es\) outside the narrative units"):
        dropped = _run(host, keep_outside_units=False)
    assert not any("TEST BOOK" in t for t in _texts(host, dropped))
    assert len(kept) == len(dropped) + 1


@pytest.mark.parametrize("host", ["langchain", "llamaindex", "chonkie"])
def test_token_counts_with_a_named_tokenizer_and_scalar_metadata(host):
    from litseg_nb.chunkers.base import load_tokenizer

    tok = load_tokenizer("all-MiniLM-L6-v2")
    chunks = _quiet(_run, host)
    assert chunks
    for c, t in zip(chunks, _texts(host, chunks)):
        md = _md(c)
        assert md["tokenizer"] == "all-MiniLM-L6-v2" and md["token_count"] == tok.count(t) > 0
        assert all(v is None or isinstance(v, (str, int, float, bool)) for v in md.values()), md
        spans = json.loads(md["spans"])
        assert _texts(host, [c])[0].endswith("".join(TEXT[a:b] for a, b in spans)) and "main_text" not in md
        assert json.loads(md["context_idx"]) == []
    if host == "chonkie":
        assert all(c.token_count == _md(c)["token_count"] for c in chunks)
    nested = _quiet(_run, host, nested_metadata=True)
    assert isinstance(_md(nested[0])["spans"], list) and isinstance(_md(nested[0])["context_idx"], list)


def test_llamaindex_honours_the_node_parser_options(capsys):
    from llama_index.core import Document
    from llama_index.core.schema import NodeRelationship

    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    doc = Document(text=TEXT, metadata={"source": "t"})
    parser = LitSegNodeParser(method="paragraph", profile="test", id_func=lambda i, node: f"{node.node_id}-n{i}")
    nodes = _quiet(parser.get_nodes_from_documents, [doc], show_progress=True)
    assert "Segmenting documents" in capsys.readouterr().err  # the progress bar
    assert [n.node_id for n in nodes] == [f"{doc.doc_id}-n{i}" for i in range(len(nodes))]
    for i, n in enumerate(nodes):
        assert TEXT[n.start_char_idx:n.end_char_idx] == n.text
        assert n.relationships[NodeRelationship.SOURCE].node_id == doc.doc_id and n.ref_doc_id == doc.doc_id
        assert n.metadata["source"] == "t"
        assert (NodeRelationship.PREVIOUS in n.relationships) == (i > 0)
    _quiet(parser.get_nodes_from_documents, [doc])
    assert "Segmenting documents" not in capsys.readouterr().err
    bare = _quiet(LitSegNodeParser(method="paragraph", profile="test", include_metadata=False,
                                   include_prev_next_rel=False).get_nodes_from_documents, [doc])
    assert bare and all("source" not in n.metadata for n in bare)
    assert all(NodeRelationship.PREVIOUS not in n.relationships and NodeRelationship.NEXT not in n.relationships
               for n in bare)
    assert all(n.relationships[NodeRelationship.SOURCE].node_id == doc.doc_id for n in bare)


def test_litseg_subtitle_and_context_survive_chonkies_overlap_refinery():
    from chonkie import OverlapRefinery

    from litseg_nb.integrations.chonkie import LitSegChunker
    from litseg_nb.core.schema import Chunk

    chunker = LitSegChunker("paragraph", "test")
    a, b = TEXT.index("Later"), TEXT.index("bank.") + 5
    ours = [Chunk("d", "u0001", f"u0001.c000{i}", "litseg", 2 * i + 1, 2 * i + 2, [(a, b)],
                  f"Subtitle {i}\n{TEXT[a:b]}", TEXT[a:b], context_idx=[i], subtitle=f"Subtitle {i}")
            for i in range(3)]
    chunks = [chunker.to_chonkie(c) for c in ours]
    refined = OverlapRefinery(context_size=4, method="prefix").refine(chunks)
    for i, c in enumerate(refined):
        assert c.metadata["subtitle"] == f"Subtitle {i}" and json.loads(c.metadata["context_idx"]) == [i]
        assert c.text.endswith(f"Subtitle {i}\n{TEXT[a:b]}")
        assert (c.start_index, c.end_index) == (a, b)


# ------------------------------------------------------------------ the user's metadata, ids across calls
def test_the_documents_own_metadata_is_never_overwritten():
    import datetime

    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    from litseg_nb.integrations.langchain import LitSegTextSplitter
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    own = {"doc_id": "my-doc", "method": "scanned", "chunk_id": "mine-1", "source": "s"}
    docs = _quiet(LitSegTextSplitter("paragraph", "test").split_documents,
                  [LCDocument(page_content=TEXT, metadata=dict(own), id="d1")])
    nodes = _quiet(LitSegNodeParser(method="paragraph", profile="test").get_nodes_from_documents,
                   [LIDocument(text=TEXT, metadata=dict(own), doc_id="d1")])
    for md, uid in [(d.metadata, d.id) for d in docs] + [(n.metadata, None) for n in nodes]:
        assert {k: md[k] for k in own} == own  # the user's values, untouched
        assert md["litseg_doc_id"] == "d1" and md["litseg_method"] == "paragraph"
        assert md["litseg_chunk_id"].startswith("d1/") and uid in (None, md["litseg_chunk_id"])
    assert all(k in nodes[0].excluded_embed_metadata_keys for k in ("litseg_doc_id", "spans"))
    assert not set(own) & set(nodes[0].excluded_embed_metadata_keys)  # the user's keys embed as before
    # scalar-only metadata: sets, dates and other objects become JSON strings too
    odd = {"tags": {"b", "a"}, "when": datetime.date(2020, 1, 2), "nested": {"s": {1}}}
    md = _quiet(LitSegTextSplitter("paragraph", "test").split_documents,
                [LCDocument(page_content=TEXT, metadata=odd)])[0].metadata
    assert (md["tags"], md["when"], md["nested"]) == ('["a", "b"]', '"2020-01-02"', '{"s": [1]}')


def test_one_document_id_for_two_texts_gives_other_chunk_ids_and_a_lone_surrogate_hashes():
    from langchain_core.documents import Document as LCDocument

    from litseg_nb.integrations.chonkie import LitSegChunker
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    sp = LitSegTextSplitter("paragraph", "test")
    first = _quiet(sp.split_documents, [LCDocument(page_content=TEXT, id="same")])
    again = _quiet(sp.split_documents, [LCDocument(page_content=TEXT, id="same")])
    edited = _quiet(sp.split_documents, [LCDocument(page_content=TEXT.replace("e", "E"), id="same")])
    assert [d.id for d in first] == [d.id for d in again]  # the same text: the same ids (an idempotent upsert)
    assert not {d.id for d in first} & {d.id for d in edited}
    assert all(d.metadata["doc_id"] == "same" and d.id.startswith("same/") for d in first + edited)
    broken = "A sentence with a lone surrogate \ud800 in it. Another one follows.\n\nA second paragraph."
    for chunks in (_quiet(sp.split_text, broken), _quiet(LitSegChunker(method="paragraph", profile="test").chunk,
                                                         broken)):
        assert chunks


def test_llamaindex_relates_each_document_once_not_once_per_node(monkeypatch):
    """The SOURCE link hashes the whole document text: built once per document, and no search of each
    node's text in the document (what made a 5 MB book take minutes)."""
    from llama_index.core import Document
    from llama_index.core.schema import NodeRelationship

    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    calls = []
    real = Document.as_related_node_info
    monkeypatch.setattr(Document, "as_related_node_info", lambda self: calls.append(self.doc_id) or real(self))
    doc = Document(text=TEXT, doc_id="d")
    nodes = _quiet(LitSegNodeParser(method="paragraph", profile="test").get_nodes_from_documents, [doc])
    assert len(nodes) >= 2 and calls == ["d"]
    assert all(n.relationships[NodeRelationship.SOURCE].node_id == "d" for n in nodes)
    assert [NodeRelationship.NEXT in n.relationships for n in nodes] == [True] * (len(nodes) - 1) + [False]
