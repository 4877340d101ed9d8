"""Discover and compose: ``methods`` lists every method and lib: preset with one line each
and ``segment --help`` points at it; ``boundaries --method lib:...`` is accepted; ``import-chunks``
takes a user's own book file; a misspelt library option of a folder run is one usage error before
any book is loaded (and in the adapters, at construction); ``segment`` writes token counts."""
from __future__ import annotations

import json

import pytest

from litseg_nb.cli import build_parser, main

BOOK = ("CHAPTER I. The Start\n\nIt was a cold morning. The wind came down the hill. Nobody spoke at breakfast.\n\n"
        "Later the rain stopped. They walked to the river and sat on the bank.\n")


def test_methods_lists_every_method_and_preset_with_one_line_each(capsys):
    from litseg_nb.chunkers.library import PRESETS
    from litseg_nb.segmenters.registry import DESCRIPTIONS
    from litseg_nb.segmenters.registry import METHOD_NAMES

    assert set(DESCRIPTIONS) == set(METHOD_NAMES)
    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in [*METHOD_NAMES, *(f"lib:{p}" for p in PRESETS)]:
        rows = [ln for ln in lines if ln.split()[:1] == [name]]
        assert len(rows) == 1 and len(rows[0].split()) > 3, name


def test_segment_help_names_the_methods_command_and_lib_presets(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["segment", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "python -m litseg_nb methods" in out and "lib:<preset>" in out and "lib:langchain-recursive" in out


def test_boundaries_accepts_lib_methods_and_names_registered_ones(tmp_path, capsys):
    out = tmp_path / "w.jsonl"
    assert main(["boundaries", "--profile", "test", "--method", "lib:langchain-recursive,token",
                 "--export-windows", str(out)]) == 0
    assert out.is_file()
    assert main(["boundaries", "--profile", "test", "--method", "lib:nope"]) == 2
    assert main(["boundaries", "--profile", "test", "--method", "tokn"]) == 2
    err = capsys.readouterr().err
    assert "unknown library preset 'nope'" in err and "'tokn' is not a registered method" in err
    assert "llm_methods" not in err and "BoundaryConfig" not in err


def test_boundary_library_chunks_cover_the_windows():
    from litseg_nb.evaluation.boundaries import BoundaryConfig, library_chunks
    from litseg_nb.api import load_text
    from litseg_nb.core.schema import check_coverage

    book = load_text(text=BOOK * 3)
    cfg = BoundaryConfig.for_profile("test", library_methods=("lib:langchain-recursive",))
    chunks = library_chunks("lib:langchain-recursive", [book], cfg)
    assert chunks and {c.method for c in chunks} == {"lib:langchain-recursive"}
    for u in book.units:
        assert check_coverage(u, [c for c in chunks if c.unit_id == u.unit_id]).ok


def test_import_chunks_accepts_a_book_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    book = tmp_path / "my_book.txt"
    book.write_text(BOOK, encoding="utf-8")
    rows = tmp_path / "chunks.jsonl"
    rows.write_text("\n".join(json.dumps({"Chunk": p}) for p in BOOK.split("\n\n") if p.strip()), encoding="utf-8")
    assert main(["import-chunks", "--book", str(book), "--name", "mine", "--from", str(rows), "--profile", "test"]) == 0
    written = list((tmp_path / "outputs").rglob("mine.jsonl"))
    assert len(written) == 1
    recs = [json.loads(x) for x in written[0].read_text().splitlines()]
    assert recs and {r["book_id"] for r in recs} == {"text:my_book"}
    assert main(["import-chunks", "--book", str(tmp_path / "none.txt"), "--name", "mine2", "--from", str(rows),
                 "--profile", "test"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_misspelt_library_option_is_one_error_before_any_book(tmp_path, capsys, monkeypatch):
    import litseg_nb.api as api

    books = tmp_path / "books"
    books.mkdir()
    for i in range(3):
        (books / f"b{i}.txt").write_text(BOOK, encoding="utf-8")
    loaded = []
    monkeypatch.setattr(api, "load_text", lambda *a, **k: loaded.append(a) or pytest.fail("a book was loaded"))
    rc = main(["segment", str(books), "--method", "lib:langchain-recursive", "--set", "chunk_sise=300",
               "--profile", "test", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("chunk_sise") == 1 and "chunk_size" in err and not loaded
    assert not (tmp_path / "out").exists()
    from litseg_nb.config import ConfigError
    from litseg_nb.integrations import Segmenter

    with pytest.raises(ConfigError, match="chunk_sise"):
        Segmenter("lib:langchain-recursive", "test", chunk_sise=300)


def test_segment_writes_token_counts_with_the_named_tokenizer(tmp_path):
    from litseg_nb.chunkers.base import load_tokenizer

    book = tmp_path / "b.txt"
    book.write_text(BOOK, encoding="utf-8")
    out = tmp_path / "b.jsonl"
    assert main(["segment", str(book), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 0
    meta = json.loads((tmp_path / "b.meta.json").read_text())
    tok = load_tokenizer(meta["tokenizer"])
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert recs and all(r["metadata"]["token_count"] == tok.count(r["text"]) > 0 for r in recs)
