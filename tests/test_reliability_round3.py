"""Round three of the careless-or-hostile-user checks: the newer subcommands and adapters fail loudly
and lose nothing. Black-box: the command line (``litseg_nb.cli.main``) or the public API; each test
fails on the code before this round."""
from __future__ import annotations

import json
import sqlite3

import pytest

from litseg_nb.cli import main

from fakes import FakeOpenAI, stderr_lines

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = stderr_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


# ------------------------------------------------------------------ data loss: names are names
@pytest.mark.parametrize("name", ["../../../README", "../x", "a/b", "/tmp/abs", "", ".hidden", "x y"])
def test_boundaries_name_is_a_name_not_a_path(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    readme = (REPO_ROOT / "README.md").read_bytes()
    argv = ["boundaries", "--profile", "test", "--method", "token", "--name", name]
    if name == "":  # the empty name is the default ("boundaries"): nothing to refuse
        return
    assert main(argv) == 2
    assert "--name" in _one_error_line(capsys)
    assert (REPO_ROOT / "README.md").read_bytes() == readme
    assert _files(tmp_path / "outputs") == []  # refused before any work or write


def test_tables_and_figures_refuse_a_path_as_their_name(tmp_path, monkeypatch):
    import pandas as pd

    from litseg_nb.core.artifacts import save_table
    from litseg_nb.core.safe_io import BadName

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    with pytest.raises(BadName, match="not a plain name"):
        save_table(pd.DataFrame({"a": [1]}), "../../escape", "test", "label")
    assert not (tmp_path / "escape.csv").exists() and _files(tmp_path / "outputs") == []


# ------------------------------------------------------------------ tracebacks -> one line
@pytest.mark.parametrize("method", [",", "", " , "])
def test_boundaries_empty_method_list_is_one_line(method, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    assert main(["boundaries", "--profile", "test", "--method", method]) == 2
    assert "names no method" in _one_error_line(capsys)


def test_boundaries_unwritable_export_is_one_line_before_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["boundaries", "--profile", "test", "--export-windows", str(blocker / "x.jsonl")]) == 2
    assert "not writable" in _one_error_line(capsys)
    assert blocker.read_text() == "not a folder"


def test_gallery_out_that_is_a_file_or_a_foreign_folder_is_refused(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from litseg_nb.core.artifacts import save_table

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    save_table(pd.DataFrame({"a": [1]}), "01_x", "test", "label")
    afile = tmp_path / "page.md"
    afile.write_text("mine")
    assert main(["gallery", "--profile", "test", "--out", str(afile)]) == 2
    assert "is a file" in _one_error_line(capsys) and afile.read_text() == "mine"
    foreign = tmp_path / "photos"
    (foreign / "figures").mkdir(parents=True)
    (foreign / "figures" / "holiday.png").write_bytes(b"png")
    assert main(["gallery", "--profile", "test", "--out", str(foreign)]) == 2
    assert "no earlier gallery page" in _one_error_line(capsys)
    assert (foreign / "figures" / "holiday.png").read_bytes() == b"png"  # nothing of theirs deleted
    assert main(["gallery", "--profile", "test", "--out", str(tmp_path / "new")]) == 0  # a new folder: fine
    assert main(["gallery", "--profile", "test", "--out", str(tmp_path / "new")]) == 0  # its own gallery: fine


# ------------------------------------------------------------------ secrets in URLs
SECRETS = ("S3cr3tKey1", "AuthCode22", "Signature33")


def test_url_query_secrets_reach_the_server_and_no_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"Sentence number {i} is here." for i in range(30)) + "\n")
    with FakeOpenAI("ok") as srv:
        url = f"{srv.url}?api_key={SECRETS[0]}&code={SECRETS[1]}&sig={SECRETS[2]}"
        rc = main(["segment", str(book), "--method", "lumber", "--profile", "test", "--base-url", url,
                   "--llm-model", "fake-model", "-o", str(tmp_path / "out")])
        paths = [r["path"] for r in srv.chat_requests]
    console = "".join(capsys.readouterr())
    assert rc == 0, console
    assert paths and all(p.endswith(f"/chat/completions?api_key={SECRETS[0]}&code={SECRETS[1]}&sig={SECRETS[2]}")
                         for p in paths)  # the signed address is used as given ...
    written = _files(tmp_path / "out") + _files(tmp_path / "outputs") + _files(tmp_path / "cache")
    assert any(p.name.endswith(".meta.json") for p in written)
    for p in written:  # ... and written nowhere (meta options, request cache key material, tables)
        data = p.read_bytes()
        assert not any(s.encode() in data for s in SECRETS), f"URL secret written to {p}"
    meta = json.loads(next(p for p in written if p.name.endswith(".meta.json")).read_text())
    assert meta["options"]["llm"]["base_urls"] == [f"{srv.url}?api_key=***&code=***&sig=***"]
    db = next(p for p in written if p.name == "llm_requests.sqlite")
    models = {m for (m,) in sqlite3.connect(db).execute("SELECT DISTINCT model FROM requests")}
    assert models and all("api_key=***" in m and "#" in m for m in models)  # redacted + hash of the secret
    assert not any(s in console for s in SECRETS)


def test_two_urls_differing_only_in_a_secret_have_different_cache_identities():
    from litseg_nb.redact import redact_url, url_identity

    a, b = "https://h/v1?sig=AAAA", "https://h/v1?sig=BBBB"
    assert redact_url(a) == redact_url(b) == "https://h/v1?sig=***"
    assert url_identity(a) != url_identity(b) and "AAAA" not in url_identity(a)
    assert url_identity("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"  # plain keys unchanged
    # in running text a value runs to the next space (over-redacting trailing punctuation, never leaking)
    assert redact_url("error at http://u:p@h/v1?x=1#tok=2 now") == "error at http://***@h/v1?x=***#tok=*** now"


def test_config_prints_base_urls_without_their_secrets(capsys):
    assert main(["config", "--profile", "test", "--notebook", "02", "--set", "llm.backend=openai",
                 "--set", f"llm.base_urls=http://h:1/v1?api_key={SECRETS[0]}&sig={SECRETS[2]}"]) == 0
    out = "".join(capsys.readouterr())
    assert "api_key=***&sig=***" in out and not any(s in out for s in SECRETS)


# ------------------------------------------------------------------ values accepted that should not be
@pytest.mark.parametrize("value,word", [("llm.request_timeout_s=-5", "request_timeout_s"), ("llm.top_p=7", "top_p"),
                                        ("llm.temperature=nan", "temperature"), ("llm.base_urls=[[[", "base_urls"),
                                        ("llm.base_urls=ftp://h/v1", "base_urls")])
def test_llm_values_that_cannot_work_are_refused_when_the_config_is_built(value, word, capsys):
    assert main(["config", "--profile", "test", "--notebook", "02", "--set", value]) == 2
    assert word in _one_error_line(capsys)


def test_an_ftp_base_url_is_a_usage_error_with_no_retry(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another sentence.\n")
    assert main(["segment", str(book), "--method", "lumber", "--profile", "test",
                 "--base-url", "ftp://127.0.0.1:9/v1", "-o", str(tmp_path / "o")]) == 2
    assert "base_urls" in _one_error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_several_books_into_one_jsonl_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    for n in ("a", "b"):
        (tmp_path / f"{n}.txt").write_text(f"Book {n} has one sentence. And a second one.\n")
    out = tmp_path / "multi.jsonl"
    assert main(["segment", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--method", "token",
                 "--profile", "test", "-o", str(out)]) == 2
    assert "give a folder" in _one_error_line(capsys) and not out.exists()


def test_llm_options_for_a_rule_based_method_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    book = tmp_path / "book.txt"
    book.write_text("One sentence. Another sentence.\n")
    assert main(["segment", str(book), "--method", "token", "--profile", "test",
                 "--base-url", "http://127.0.0.1:9/v1", "-o", str(tmp_path / "o")]) == 2
    assert "calls no LLM" in _one_error_line(capsys)


# ------------------------------------------------------------------ import-chunks rows
@pytest.mark.parametrize("content,word", [('{"Chunk": {"text": "Emma Woodhouse"}}\n', "row 1"),
                                          ('{"Chunk": "ok"}\n7\n', "line 2"),
                                          ('{"Chunk": "ok"}\n{"Chunk": \n', "line 2"),
                                          ('{"Chunk": ["a", "b"]}\n', "row 1")])
def test_import_chunks_rows_that_are_not_texts_are_errors_naming_the_row(content, word, tmp_path):
    from litseg_nb.core.chunk_align import ChunkImportError
    from litseg_nb.front.chunk_import import read_chunk_texts

    f = tmp_path / "set.jsonl"
    f.write_text(content)
    with pytest.raises(ChunkImportError, match=word):
        read_chunk_texts(f)


# ------------------------------------------------------------------ adapters: unique ids, clear TypeErrors
PAGE = "A first short sentence here. A second one follows it. And the third sentence ends the page.\n"


def test_langchain_chunk_ids_are_unique_across_documents():
    from langchain_core.documents import Document

    from litseg_nb.integrations.langchain import LitSegTextSplitter

    sp = LitSegTextSplitter(method="token", profile="test")
    pages = [Document(page_content=PAGE, metadata={"source": "book.pdf", "page": p}) for p in (1, 2)]
    docs = sp.split_documents(pages + [Document(page_content=PAGE.upper(), metadata={"source": "book.pdf"})])
    ids = [d.id for d in docs]
    assert len(docs) >= 3 and len(set(ids)) == len(ids)  # two identical pages of one file included
    assert all(d.id == d.metadata["chunk_id"] and d.metadata["chunk_id"].startswith(d.metadata["doc_id"] + "/")
               for d in docs)
    own = sp.split_documents([Document(page_content=PAGE, id="my-doc-7")])
    assert own[0].metadata["doc_id"] == "my-doc-7" and own[0].id.startswith("my-doc-7/")


def test_llamaindex_chunk_ids_are_unique_and_id_func_is_honoured():
    from llama_index.core.schema import Document

    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    seen = []

    def id_func(i, doc):
        seen.append(i)
        return f"{doc.doc_id}-n{i}"

    parser = LitSegNodeParser(method="token", profile="test", id_func=id_func)
    nodes = parser.get_nodes_from_documents([Document(text=PAGE, doc_id="p1"), Document(text=PAGE, doc_id="p2")])
    assert [n.node_id for n in nodes] == [f"p{d}-n{i}" for d in (1, 2) for i in range(len(nodes) // 2)]
    chunk_ids = [n.metadata["chunk_id"] for n in nodes]
    assert len(set(chunk_ids)) == len(chunk_ids) and {n.metadata["doc_id"] for n in nodes} == {"p1", "p2"}


def test_chonkie_chunk_ids_carry_the_document():
    from litseg_nb.integrations.chonkie import LitSegChunker

    ch = LitSegChunker(method="token", profile="test")
    a, b = ch.chunk(PAGE), ch.chunk(PAGE.upper())
    assert {c.id for c in a}.isdisjoint({c.id for c in b})
    assert all(c.id == c.metadata["chunk_id"] for c in a + b)


@pytest.mark.parametrize("bad", [None, b"bytes text", 42, 3.5])
def test_adapters_reject_non_text_with_a_type_error(bad):
    from langchain_core.documents import Document  # noqa: F401

    from litseg_nb.integrations.chonkie import LitSegChunker
    from litseg_nb.integrations.langchain import LitSegTextSplitter

    with pytest.raises(TypeError, match="str"):
        LitSegTextSplitter(method="token", profile="test").split_text(bad)
    with pytest.raises(TypeError, match="str"):
        LitSegTextSplitter(method="token", profile="test").create_documents([PAGE, bad])
    with pytest.raises(TypeError, match="str"):
        LitSegChunker(method="token", profile="test").chunk(bad)

