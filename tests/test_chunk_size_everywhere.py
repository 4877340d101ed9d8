"""``chunk_size`` in every entry point: :func:`litseg_nb.segment`, the ``segment`` command and the adapters share
one implementation (:mod:`litseg_nb.chunkers.sizing`). With it, no chunk has more tokens of the embedder's
tokenizer (MiniLM: 256) and every split piece is an exact span of the cleaned text; without it, the chunks
an embedder would truncate are counted. The ``segment`` command chunks the text outside the narrative units
(unit ``outside``) unless asked not to, and counts it either way."""
from __future__ import annotations

import collections
import json
import warnings

import pytest

import litseg_nb
from litseg_nb.cli import main
from litseg_nb.core.schema import assert_full_coverage, load_chunks

from fakes import stderr_lines

ETHAN_FROME = "gutenberg_dev/4517.txt"  # a raw Project Gutenberg file: licence header, prologue, chapters
BOOK_WITH_FRONT_MATTER = "THE BOOK OF TESTS\n\nby A. Writer\n\nA dedication line for someone.\n\n" + "\n\n".join(
    f"CHAPTER {r}\n\n" + "\n\n".join("The man walked along the road and saw a tree. He sat down." for _ in range(8))
    for r in ("I", "II", "III"))


@pytest.fixture(scope="module")
def minilm():
    from litseg_nb.chunkers.base import load_tokenizer

    return load_tokenizer("all-MiniLM-L6-v2")


def _exact(text, chunks):
    for c in chunks:
        assert "".join(text[a:b] for a, b in c.spans) == c.main_text, c.chunk_id


def test_segment_api_honours_chunk_size_on_a_raw_gutenberg_book(data_dir, minilm):
    book = litseg_nb.load_text(data_dir / ETHAN_FROME)
    from litseg_nb.chunkers.sizing import ChunkSizeWarning

    with pytest.warns(ChunkSizeWarning, match=r"longer than the 256 tokens "
                      r"all-MiniLM-L6-v2 reads.*chunk_size=256"):
        plain = litseg_nb.segment(book, "paragraph", profile="test")
    assert max(minilm.count_many([c.text for c in plain])) > 256  # the method alone makes longer chunks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chunks = litseg_nb.segment(book, "paragraph", profile="test", chunk_size=256)
    assert max(minilm.count_many([c.text for c in chunks])) <= 256
    assert any(c.metadata.get("split_from") for c in chunks)
    _exact(book.text, chunks)
    assert_full_coverage(book, chunks, "paragraph")  # the coverage check holds on split chunks
    assert " ".join(c.main_text for c in chunks).split() == " ".join(c.main_text for c in plain).split()


def test_segment_api_rejects_a_bad_chunk_size():
    from litseg_nb.config import ConfigError

    for bad in (0, -1, 8, "256", True):
        with pytest.raises(ConfigError, match="chunk_size must be a number of tokens"):
            litseg_nb.segment(text="One sentence. Another one.", method="paragraph", profile="test", chunk_size=bad)


def test_segment_command_honours_chunk_size_on_the_written_chunks(data_dir, tmp_path, fresh_dirs, capsys, minilm):
    from test_segment_cli_errors import paths_of, verify_outputs

    out = tmp_path / "ef.jsonl"
    src = data_dir / ETHAN_FROME
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 0
    assert "longer than the 256 tokens all-MiniLM-L6-v2 reads" in capsys.readouterr().out  # counted, not silent
    out2 = tmp_path / "ef256.jsonl"
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "--chunk-size", "256",
                 "-o", str(out2)]) == 0
    assert "longer than" not in capsys.readouterr().out
    base = out2.with_suffix("")
    chunks = load_chunks(out2)
    assert max(minilm.count_many([c.text for c in chunks])) <= 256
    assert max(c.metadata["token_count"] for c in chunks) <= 256
    assert any(c.metadata.get("split_from") for c in chunks)
    _exact(paths_of(base)["text"].read_text(encoding="utf-8"), chunks)
    assert verify_outputs(base)["ok"]  # spans, raw spans and every sentence of every unit
    meta = json.loads(paths_of(base)["meta"].read_text(encoding="utf-8"))
    assert meta["chunk_size"] == 256 and meta["tokenizer"] == "all-MiniLM-L6-v2" and meta["over_window"] == []


def test_segment_command_chunks_the_text_outside_the_units(tmp_path, fresh_dirs, capsys):
    from test_segment_cli_errors import paths_of

    src = tmp_path / "book.txt"
    src.write_text(BOOK_WITH_FRONT_MATTER, encoding="utf-8")
    out = tmp_path / "o" / "book.jsonl"
    argv = ["segment", str(src), "--method", "token", "--profile", "test", "-o", str(out)]
    assert main(argv) == 0
    assert "chunked as unit 'outside'" in capsys.readouterr().out
    chunks = load_chunks(out)
    text = paths_of(out.with_suffix(""))["text"].read_text(encoding="utf-8")
    outside = [c for c in chunks if c.unit_id == "outside"]
    assert outside and "dedication" in " ".join(c.main_text for c in outside)
    assert chunks[0].unit_id == "outside"  # in text order
    _exact(text, chunks)
    assert not collections.Counter(text.split()) - collections.Counter(" ".join(c.main_text for c in chunks).split())
    # the outside text left out: a change of settings, refused over the earlier output without --force
    assert main([*argv, "--no-keep-outside-units"]) == 2
    assert "other settings" in capsys.readouterr().err
    assert main([*argv, "--no-keep-outside-units", "--force"]) == 0
    said = capsys.readouterr().out
    assert "word(s) of the cleaned text are outside the narrative units" in said and "not chunked" in said
    assert not [c for c in load_chunks(out) if c.unit_id == "outside"]
    assert main([*argv, "--no-keep-outside-units"]) == 0  # a rerun resumes: complete, skipped
    assert "already complete" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-1", "x", "15"])
def test_a_bad_chunk_size_is_one_line_rc2(value, tmp_path, fresh_dirs, capsys):
    src = tmp_path / "book.txt"
    src.write_text(BOOK_WITH_FRONT_MATTER, encoding="utf-8")
    assert main(["segment", str(src), "--method", "token", "--profile", "test", "--chunk-size", value,
                 "-o", str(tmp_path / "o.jsonl")]) == 2
    lines = stderr_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "--chunk-size" in lines[0], lines
    assert not list(tmp_path.glob("o.*"))


def test_segment_command_counts_with_the_chosen_tokenizer(tmp_path, fresh_dirs):
    from litseg_nb.chunkers.base import load_tokenizer
    from litseg_nb.llm.models import shipped_tokenizer_dir

    from test_segment_cli_errors import paths_of

    src = tmp_path / "book.txt"
    body = " ".join(f"Sentence number {i} of the long paragraph goes on." for i in range(200))
    src.write_text("CHAPTER I\n\n" + body, encoding="utf-8")
    folder = str(shipped_tokenizer_dir("all-MiniLM-L6-v2"))  # a tokenizer given by its folder
    out = tmp_path / "o.jsonl"
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "--chunk-size", "40",
                 "--token-counter", folder, "-o", str(out)]) == 0
    chunks = load_chunks(out)
    tok = load_tokenizer(folder)
    assert len(chunks) > 10 and max(tok.count_many([c.text for c in chunks])) <= 40
    meta = json.loads(paths_of(out.with_suffix(""))["meta"].read_text(encoding="utf-8"))
    assert meta["tokenizer"] == folder and meta["chunk_size"] == 40
