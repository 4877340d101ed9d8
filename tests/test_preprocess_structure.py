"""Structure splitting: ToC skipping, front matter, no headings, recursive splitting, huge input."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg_nb.corpus import index_book
from litseg_nb.data.gutenberg import clean_gutenberg_text
from litseg_nb.preprocess.structure import (FRONT_MATTER, StructureReport, build_units,
                                            check_unit_coverage, detect_headings)
from litseg_nb.schema import Book


def _paras(*paras: str):
    text = "\n\n".join(paras)
    spans, pos = [], 0
    for p in paras:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    return text, spans


def _prose(n_words: int, tag: str = "w") -> str:
    words = [f"{tag}{i}" for i in range(n_words)]
    return " ".join(" ".join(words[i:i + 10]) + "." for i in range(0, n_words, 10))


def test_toc_entries_do_not_become_units():
    text, spans = _paras("MY BOOK", "CONTENTS", "Chapter 1", "Chapter 2", "Chapter 1",
                         _prose(40, "a"), "Chapter 2", _prose(30, "b"))
    report = StructureReport()
    units = build_units("b", text, spans, 1000, report=report)
    assert [u.title for u in units] == ["Chapter 1", "Chapter 2"]
    assert "a0" in units[0].text(text) and not any("CONTENTS" in u.text(text) for u in units)
    assert [d[2] for d in report.dropped] == ["front matter", "CONTENTS"]
    check_unit_coverage(text, spans, units, report.dropped)
    with pytest.raises(AssertionError, match="in no unit"):  # the dropped spans are the only gaps
        check_unit_coverage(text, spans, units)


def test_title_toc_is_matched_after_the_list():
    text, spans = _paras("Contents", "The Sisters\nAn Encounter", "THE SISTERS", _prose(20, "s"),
                         "AN ENCOUNTER", _prose(20, "e"))
    report = StructureReport()
    units = build_units("b", text, spans, 1000, report=report)
    assert [u.title for u in units] == ["THE SISTERS", "AN ENCOUNTER"]
    assert (report.toc_entries, report.toc_matched) == (2, 2)


def test_volume_glued_to_chapter_and_prefixed():
    text, spans = _paras("VOLUME I", "CHAPTER I", _prose(20), "CHAPTER II", _prose(20), "VOLUME II",
                         "CHAPTER I", _prose(20))
    units = build_units("b", text, spans, 1000)
    assert [u.title for u in units] == ["VOLUME I / CHAPTER I", "VOLUME I / CHAPTER II",
                                        "VOLUME II / CHAPTER I"]
    assert units[2].text(text).startswith("VOLUME II")


def test_prose_starting_with_a_keyword_is_not_a_heading():
    text, spans = _paras("Part of her meaning was to conceal it.", "Letter I received today.",
                         "Chapter the First", _prose(20))
    heads = detect_headings(text, spans)
    assert [h.title for h in heads] == ["Chapter the First"]
    assert heads[0].value == 1


def test_book_without_headings_is_whole_or_recursive():
    text, spans = _paras(_prose(50, "a"), _prose(50, "b"))
    whole = build_units("b", text, spans, 1000, whole_title="My Book")
    assert [(u.title, u.split) for u in whole] == [("My Book", "whole")]
    parts = build_units("b", text, spans, 60)
    assert [u.split for u in parts] == ["recursive", "recursive"]
    assert [u.unit_id for u in parts] == ["u0000.1", "u0000.2"]
    check_unit_coverage(text, spans, parts)


def test_unit_longer_than_n_is_split_by_paragraphs_then_sentences():
    text, spans = _paras("CHAPTER I", _prose(30, "a"), _prose(30, "b"), _prose(95, "c"), _prose(10, "d"))
    units = build_units("b", text, spans, 40)
    assert all(u.split == "recursive" for u in units)
    for u in units:
        assert len(u.text(text).split()) <= 40
    check_unit_coverage(text, spans, units)
    # paragraphs that fit are never cut: each of a and b lies inside one unit
    for tag in ("a0", "b0"):
        start = text.index(tag)
        owner = [u for u in units if u.start <= start < u.end]
        assert len(owner) == 1 and text.index(tag[0] + "29") < owner[0].end


def test_single_1mb_paragraph_without_punctuation_is_cut_at_words():
    para = " ".join(f"words{i % 1000}" for i in range(120_000))  # >1 MB, one "sentence"
    assert len(para) > 1_000_000
    cleaned = clean_gutenberg_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n" + para
                                   + "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n")
    book = Book("gutenberg:big", "Big", "gutenberg", cleaned.text, paragraphs=cleaned.paragraphs)
    index_book(book, max_unit_words=2000)
    assert len(book.units) == 60
    assert all(len(u.text(book.text).split()) <= 2000 for u in book.units)
    assert sum(u.n_sentences for u in book.units) == 60
    check_unit_coverage(book.text, book.paragraphs, book.units)
    assert book.meta["structure"]["split_sentences"] == 59


def test_bad_n_and_empty_text_name_the_book():
    text, spans = _paras("Hello there.")
    with pytest.raises(ValueError, match="book 'bk'.*max_unit_words"):
        build_units("bk", text, spans, 0)
    with pytest.raises(ValueError, match="book 'bk'.*no text"):
        build_units("bk", "", [], 10)


_para = st.one_of(
    st.sampled_from(["CHAPTER I", "CHAPTER II", "Chapter 3. The End", "VOLUME I", "CONTENTS",
                     "STAVE I: A Ghost", "I", "II", "PREFACE"]),
    st.lists(st.sampled_from(["Mr.", "Dr.", "said", "“Go!”", "she", "wept.", "...", "yes?", "no"]),
             min_size=1, max_size=40).map(" ".join),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_para, min_size=1, max_size=25), st.integers(min_value=3, max_value=60))
def test_units_cover_the_text_and_sentences_round_trip(paras, n):
    text, spans = _paras(*paras)
    report = StructureReport()
    units = build_units("b", text, spans, n, report=report)
    check_unit_coverage(text, spans, units, report.dropped)
    for u in units:
        assert [s.index for s in u.sentences] == list(range(1, u.n_sentences + 1))
        covered = " ".join(text[s.start:s.end] for s in u.sentences)
        assert covered.split() == u.text(text).split()  # only whitespace is outside sentences
        assert text[u.start:u.end] == u.text(text) and u.text(text) == u.text(text).strip()
        if u.split == "recursive":
            assert len(u.text(text).split()) <= n
