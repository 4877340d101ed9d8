"""The public segmenter API (litseg_nb.segment) and the `segment` CLI, on plain and Gutenberg texts."""
from __future__ import annotations

import json

import pytest

import litseg_nb
from litseg_nb.chunkers.config import ALL_METHODS, LLM_METHODS
from litseg_nb.segmenters import registry
from litseg_nb.chunkers.base import ChunkerError
from litseg_nb.config import ConfigError
from litseg_nb.cli import main

PLAIN = """The Lighthouse

It was a cold morning when Mara climbed the stairs of the old lighthouse. The wind pushed
against the glass. She had not slept.

Below, the harbour was waking. Fishermen shouted to each other. A dog barked twice and
then fell silent.

She opened the logbook. Her father's handwriting filled the last page. "Storm coming," he had
written. Nothing more.
"""


def _check(chunks, book, method):
    assert chunks and {c.method for c in chunks} == {method}
    for unit in {c.unit_id for c in chunks} - {"outside"}:  # the text outside the units: spans checked below
        u = book.unit(unit)
        covered = {i for c in chunks if c.unit_id == unit for i in range(c.from_idx, c.to_idx + 1)}
        assert covered == set(range(1, u.n_sentences + 1))
    for c in chunks:
        assert "".join(book.text[a:b] for a, b in c.spans).strip() == c.main_text.strip()


def test_registry_is_typed_and_names_are_derived():
    assert {"token", "recursive", "semantic", "paragraph", "perplexity", "margin", "lumber", "perplexity+merge",
            "margin+merge", "lumber+merge", "proposition"} <= set(ALL_METHODS)
    assert ALL_METHODS == tuple(n for n, s in registry.REGISTRY.items() if s.baseline and not s.internal)
    assert registry.SEGMENTERS == ("litseg", "litseg-lite")
    assert set(LLM_METHODS) == {m for m in ALL_METHODS if registry.REGISTRY[m].needs == "llm"}
    with pytest.raises(TypeError):  # no positional booleans
        registry.Method("x", True, False, None, ())
    with pytest.raises(ChunkerError, match="unknown chunker 'perplexity@merge-base'"):
        registry.get_method("perplexity@merge-base")  # internal building block, not a method


@pytest.mark.parametrize("method", ["paragraph", "token", "recursive"])
def test_segment_plain_text_rule_based(method, fresh_dirs):
    book = litseg_nb.load_text(PLAIN)
    assert book.dataset == "text" and book.units
    chunks = litseg_nb.segment(PLAIN, method, profile="test")
    _check(chunks, book, method)


@pytest.mark.parametrize("method", ["litseg", "litseg-lite", "lumber+merge"])
def test_segment_llm_methods_tiny_model(method, fresh_dirs):
    book = litseg_nb.load_text(PLAIN)
    chunks = litseg_nb.segment(book, method, profile="test", llm={"backend": "hf"})
    _check(chunks, book, method)


def test_segment_rejects_unknown_method_and_option(fresh_dirs):
    with pytest.raises(ChunkerError, match="unknown chunker 'nosuch'.*litseg-lite"):
        litseg_nb.segment(PLAIN, "nosuch", profile="test")
    with pytest.raises(ConfigError, match="lumber_budget"):
        litseg_nb.segment(PLAIN, "litseg", profile="test", lumber_budget_tokens=3)  # a baseline's option
    with pytest.raises(ValueError, match="empty"):
        litseg_nb.segment("   \n\n  ", "paragraph", profile="test")


def test_cli_plain_text_file(tmp_path, fresh_dirs, capsys):
    src = tmp_path / "story.txt"
    src.write_text(PLAIN, encoding="utf-8")
    out = tmp_path / "chunks.jsonl"
    assert main(["segment", str(src), "--method", "litseg", "--profile", "test", "--llm-backend", "hf", "-o",
                 str(out)]) == 0
    assert "sentences covered" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    book = litseg_nb.load_text(src)
    assert {r["book_id"] for r in rows} == {"text:story"}
    assert {"spans", "from_idx", "to_idx", "subtitle", "context_idx", "text"} <= set(rows[0])
    _check([litseg_nb.core.schema.Chunk.from_json(r) for r in rows], book, "litseg")
    assert main(["segment", str(src), "--method", "token", "--profile", "test", "--set", "nosuch=1",
                 "-o", str(out)]) == 2
    assert main(["segment", str(tmp_path / "missing.txt"), "--profile", "test"]) == 2


def test_cli_raw_gutenberg_file(data_dir, tmp_path, fresh_dirs):
    src = data_dir / "gutenberg" / "11.txt"  # Alice's Adventures in Wonderland, with the licence text
    out = tmp_path / "alice.jsonl"
    assert main(["segment", str(src), "--method", "litseg", "--profile", "test", "--llm-backend", "hf", "--max-units", "2",
                 "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    book = litseg_nb.load_text(src, max_unit_words=300)
    assert book.dataset == "gutenberg" and "Alice" in book.title
    assert "Project Gutenberg" not in book.text[:2000]  # header and licence removed
    assert len({r["unit_id"] for r in rows} - {"outside"}) == 2
    _check([litseg_nb.core.schema.Chunk.from_json(r) for r in rows], book, "litseg")
