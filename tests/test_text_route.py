"""``litseg_nb.segment(text=...)``, the route offered to users, against the boundary benchmark's windows.

Black box: the text of every benchmark window (built from the local books by
:mod:`litseg_nb.evaluation.boundaries`) is given as ``text=``; the chunks must cover every character
and sentence of it, and their boundaries (chunk starts as character offsets into the text) must be
the benchmark's own segmentation of that window by the same method. Before constrained decoding the text route
ran heading detection on a text (a short first paragraph was dropped as a title, some windows were
cut into several units): on the 451 smoke windows 99 differed for ``token`` even with the unit cap
lifted (``benchmarks/text_route_windows.py`` measures it at every scale).
"""
from __future__ import annotations

import re

import pytest

import litseg_nb
from litseg_nb.segmenters.registry import chunk_units
from litseg_nb.evaluation import boundaries as B

WHOLE = {"corpus": {"max_unit_words": 10 ** 6}}  # the benchmark keeps each window one unit


def _nonspace(text: str) -> set[int]:
    return {i for i, ch in enumerate(text) if not ch.isspace()}


def _covered(chunks) -> set[int]:
    return {i for c in chunks for a, b in c.spans for i in range(a, b)}


@pytest.fixture(scope="module")
def windows(data_dir):
    cfg = B.BoundaryConfig.for_profile("test")
    gold = B.load_gold(cfg)
    items = [(b, u) for b in gold.books for u in b.units]
    assert len(items) >= 4
    return cfg, gold.books, items


@pytest.mark.parametrize("method", ["token", "paragraph", "recursive"])
def test_every_window_as_text_keeps_every_sentence_and_the_benchmarks_boundaries(windows, method):
    cfg, books, items = windows
    bcfg = B.baselines_config(cfg, books)
    for book, unit in items:
        text = unit.text(book.text)
        ref, _ = chunk_units(method, [(book, unit)], bcfg)
        got = litseg_nb.segment(text=text, method=method, profile="test", **WHOLE)
        where = f"{book.book_id}/{unit.unit_id}"
        # every character of the text lies in a chunk, every sentence of the text's book in one
        assert _nonspace(text) <= _covered(got), where
        tb = litseg_nb.load_text(text=text, max_unit_words=10 ** 6)
        assert [u.n_sentences for u in tb.units] == [unit.n_sentences], where  # one unit, same sentences
        assert [(s.start, s.end) for s in tb.units[0].sentences] == \
            [(s.start - unit.start, s.end - unit.start) for s in unit.sentences], where
        for u in tb.units:
            assert B.check_coverage(u, got).ok, where
        ref_cuts = sorted({c.spans[0][0] - unit.start for c in ref if c.from_idx > 1})
        got_cuts = sorted({c.spans[0][0] for c in got if c.from_idx > 1})
        assert got_cuts == ref_cuts, where
        assert B.method_boundaries(got, unit.n_sentences) == B.method_boundaries(ref, unit.n_sentences), where


def test_a_short_first_paragraph_is_a_sentence_not_a_title(fresh_dirs):
    text = ("It rained.\n\nMara climbed the stairs of the old lighthouse and looked at the harbour below. "
            "The wind pushed against the glass.\n\nCHAPTER II\n\nShe opened the logbook. It was empty.")
    chunks = litseg_nb.segment(text=text, method="paragraph", profile="test")
    assert _nonspace(text) <= _covered(chunks)
    assert chunks[0].main_text.startswith("It rained.")
    assert len({c.unit_id for c in chunks}) == 1  # the heading-like line is text, not a unit border
    # heading detection is an explicit option on a text, with a book's rules (what the text route did
    # before): the heading starts the first unit and the paragraphs before it are front matter, dropped
    book = litseg_nb.load_text(text=text, headings=True)
    assert [u.title for u in book.units] == ["CHAPTER II"]
    assert book.meta["structure"]["dropped_chars"] > 0
    assert litseg_nb.load_text(text=text).meta["headings"] is False


def test_default_unit_cap_splits_a_long_text_but_loses_nothing(windows):
    _, _, items = windows
    book, unit = max(items, key=lambda it: len(it[1].text(it[0].text)))
    text = unit.text(book.text)
    words = len(text.split())
    chunks = litseg_nb.segment(text=text, method="token", profile="test", corpus={"max_unit_words": words // 3})
    assert len({c.unit_id for c in chunks}) >= 2
    assert _nonspace(text) <= _covered(chunks)
    got = sorted(re.sub(r"\s+", "", litseg_nb.load_text(text=text).text[a:b])
                 for c in chunks for a, b in c.spans)
    assert got  # spans index the text


def test_headings_option_is_checked(fresh_dirs, data_dir):
    with pytest.raises(TypeError, match="headings"):
        litseg_nb.load_text(text="One. Two.", headings="yes")
    book = litseg_nb.load_text(data_dir / "gutenberg" / "11.txt", max_unit_words=10 ** 6)
    assert book.meta["headings"] is True and len(book.units) >= 12  # a file: chapters as today
    with pytest.raises(TypeError, match="Book keeps its units"):
        litseg_nb.segment(book, "paragraph", profile="test", headings=False)
