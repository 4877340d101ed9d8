"""Structure splitting: ToC skipping, front matter, no headings, recursive splitting, huge input."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg_nb.corpus import index_book
from litseg_nb.data.gutenberg import clean_gutenberg_text
from litseg_nb.preprocess.structure import FRONT_MATTER, StructureReport, build_units, detect_headings
from checks import check_unit_coverage
from litseg_nb.core.schema import Book


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


# ---------------------------------------------------------------- regressions (structure)
def _units(*paras: str, n: int = 10_000, **kw):
    text, spans = _paras(*paras)
    report = StructureReport()
    units = build_units("b", text, spans, n, report=report, **kw)
    check_unit_coverage(text, spans, units, report.dropped)
    return text, units, report


def test_nested_book_with_bare_numeral_chapters_and_part_with_chapters():
    """Chapters inside BOOK/PART are the units; the parent is in the title."""
    _, units, report = _units("BOOK I", "I", _prose(300, "a"), "II.", _prose(300, "b"), "BOOK II", "I",
                              _prose(300, "c"), "II", _prose(300, "d"))
    assert [u.title for u in units] == ["BOOK I / I", "BOOK I / II.", "BOOK II / I", "BOOK II / II"]
    assert report.levels == ["book", "numeral"]
    _, units, _ = _units("PART I", "CHAPTER I", _prose(200, "a"), "CHAPTER II", _prose(200, "b"),
                         "PART II", "CHAPTER I", _prose(200, "c"))
    assert [u.title for u in units] == ["PART I / CHAPTER I", "PART I / CHAPTER II", "PART II / CHAPTER I"]


def test_titled_chapters_found_from_contents_despite_case_and_spacing():
    """Contents ``I. THE OLD PYNCHEON FAMILY``, body ``I The Old Pyncheon Family``."""
    _, units, report = _units("CONTENTS", "I. THE OLD PYNCHEON FAMILY\nII. THE LITTLE SHOP-WINDOW\n"
                              "III. THE FIRST CUSTOMER", "PREFACE", _prose(100, "p"),
                              "I The Old Pyncheon Family", _prose(200, "a"), "II The Little Shop-window",
                              _prose(200, "b"), "III The First Customer", _prose(200, "c"))
    assert [u.title for u in units] == ["PREFACE", "I The Old Pyncheon Family", "II The Little Shop-window",
                                        "III The First Customer"]
    assert (report.toc_entries, report.toc_matched) == (3, 3)


def test_contents_typed_as_headings_never_yields_units():
    """A contents list of headings (every chapter twice) gives each chapter once."""
    text, units, report = _units("MY NOVEL", "CHAPTER I. The Start", "CHAPTER II. The Middle",
                                 "CHAPTER III. The End", "CHAPTER I. The Start", _prose(200, "a"),
                                 "CHAPTER II. The Middle", _prose(200, "b"), "CHAPTER III. The End", _prose(200, "c"))
    assert [u.title for u in units] == ["CHAPTER I. The Start", "CHAPTER II. The Middle", "CHAPTER III. The End"]
    assert [u.text(text).split()[4] for u in units] == ["a0", "b0", "c0"]  # each unit is its chapter's text
    assert report.demoted_toc_headings == 3


def test_letters_with_lower_case_words_are_headings():
    """``I. LOUISE DE CHAULIEU TO RENEE DE MAUCOMBE. PARIS, September.``"""
    _, units, _ = _units("I. LOUISE DE CHAULIEU TO RENEE DE MAUCOMBE. PARIS, September.", _prose(150, "a"),
                         "II. RENEE DE MAUCOMBE TO LOUISE DE CHAULIEU. La Crampade, October.", _prose(150, "b"),
                         "III. THE SAME TO THE SAME. Paris, November.", _prose(150, "c"))
    assert [u.title.split(".")[0] for u in units] == ["I", "II", "III"]


def test_dialogue_equal_to_a_contents_entry_and_author_initial_are_not_headings():
    """``“Amanda!”`` in dialogue is no heading; ``L. FRANK BAUM`` is not chapter L."""
    _, units, _ = _units("CONTENTS", "AMANDA\nTHE RETURN", "AMANDA", _prose(100, "a"), "“Amanda!”",
                         _prose(100, "b"), "THE RETURN", _prose(100, "c"), "L. FRANK BAUM")
    assert [u.title for u in units] == ["AMANDA", "THE RETURN"]
    assert "“Amanda!”" in units[0].text(_paras("CONTENTS", "AMANDA\nTHE RETURN", "AMANDA", _prose(100, "a"),
                                                "“Amanda!”")[0])


def test_quoted_story_title_in_capitals_is_a_heading_but_quoted_dialogue_is_not():
    """A collection's story title printed in quotes (``“POLIKUSHKA;”``) heads its chapters; a
    shouted or quoted line of dialogue (``“AMANDA!”``, ``“Come in,” said he.``) does not."""
    _, units, _ = _units("CONTENTS", "THE FOOL\nPOLIKUSHKA", "THE FOOL", "CHAPTER I", _prose(100, "a"),
                         "“AMANDA!”", "“Come in,” said he.", "CHAPTER II", _prose(100, "b"),
                         "“POLIKUSHKA;”", "CHAPTER I", _prose(100, "c"), "CHAPTER II", _prose(100, "d"))
    assert [u.title for u in units] == ["THE FOOL / CHAPTER I", "THE FOOL / CHAPTER II",
                                        "“POLIKUSHKA;” / CHAPTER I", "“POLIKUSHKA;” / CHAPTER II"]


def test_narrative_before_the_first_heading_is_a_unit_titled_by_the_book():
    """A tale followed by POSTSCRIPT, and a long narrative before numbered maxims."""
    _, units, report = _units("THE TALE", "by Somebody", _prose(400, "t"), "POSTSCRIPT", _prose(60, "p"),
                              whole_title="The Tale")
    assert [u.title for u in units] == ["The Tale", "POSTSCRIPT"] and report.front_matter
    assert [d[2] for d in report.dropped] == ["front matter"]  # only the title lines
    text, units, _ = _units("MAXIMS", _prose(500, "n"), "1. Be Kind", _prose(200, "m"), "2. Be Brave",
                            _prose(200, "k"), whole_title="Maxims")
    assert units[0].title == "Maxims" and "n0" in units[0].text(text)


def test_non_narrative_matter_is_dropped_but_the_author_preface_is_a_unit():
    """Editor's introduction, transcriber's notes, ADDENDUM dropped (with spans); PREFACE kept."""
    text, units, report = _units(
        "A NOVEL", "Introduction by John Editor", _prose(300, "e"), "PREFACE", _prose(80, "p"),
        "CHAPTER I", _prose(200, "a"), "CHAPTER II", _prose(200, "b"), "ADDENDUM",
        "The following personages appear in other stories:\nMr. A, Book One\nMrs. B, Book Two",
        "TRANSCRIBER'S NOTES", "Typographical errors corrected.")
    assert [u.title for u in units] == ["PREFACE", "CHAPTER I", "CHAPTER II"]
    labels = [d[2] for d in report.dropped]
    assert labels == ["front matter", "Introduction by John Editor", "ADDENDUM", "TRANSCRIBER'S NOTES",
                      "Typographical errors corrected."]
    assert report.dropped_chars == sum(e - s for s, e, _ in report.dropped)
    # a preface signed by someone other than the author is an editor's
    _, units, _ = _units("PREFACE", _prose(80, "p"), "E. A. V.", "I", _prose(200, "a"), "II", _prose(200, "b"),
                         author="Émile Zola")
    assert [u.title for u in units] == ["I", "II"]


def test_capping_never_keeps_front_matter_pieces():
    """``max_units_per_book`` keeps narrative units, not "Front matter [1/2]" pieces."""
    from litseg_nb.corpus import cap_units

    text, spans = _paras(_prose(60, "f"), _prose(60, "g"), "CHAPTER I", _prose(40, "a"), "CHAPTER II",
                         _prose(40, "b"))
    units = build_units("b", text, spans, 1000, sections=[(0, FRONT_MATTER), (2, "CHAPTER I"), (4, "CHAPTER II")])
    pieces = build_units("b", text, spans, 70, sections=[(0, FRONT_MATTER), (2, "CHAPTER I"), (4, "CHAPTER II")])
    assert [u.title for u in pieces][:2] == [f"{FRONT_MATTER} [1/2]", f"{FRONT_MATTER} [2/2]"]
    book = Book("b", "B", "gutenberg", text, paragraphs=spans, units=pieces)
    cap_units(book, 2)
    assert [u.title for u in book.units] == ["CHAPTER I", "CHAPTER II"]
    assert units[0].title == FRONT_MATTER


def test_chapters_numbered_on_across_books_are_kept():
    """Nesting: BOOK II may go on with CHAPTER III (continuous numbering), not only restart at I."""
    _, units, _ = _units("BOOK I", "CHAPTER I", _prose(200, "a"), "CHAPTER II", _prose(200, "b"),
                         "BOOK II", "CHAPTER III", _prose(200, "c"), "CHAPTER IV", _prose(200, "d"), "EPILOGUE",
                         _prose(100, "e"))
    assert [u.title for u in units] == ["BOOK I / CHAPTER I", "BOOK I / CHAPTER II", "BOOK II / CHAPTER III",
                                        "BOOK II / CHAPTER IV", "EPILOGUE"]


def test_poetry_book_without_contents_has_one_unit_per_poem():
    """Poetry collections: each poem is a unit (capitalised title over verse, no contents list)."""
    verse = "\n".join(["The wind was in the willow tree", "And softly sang the rain", "Of all the things that"
                       " used to be", "And will not come again"] * 3)
    text, units, _ = _units("POEMS", "by A. Poet", "THE WILLOW", verse, verse, "TO A FRIEND", verse, "EVENING",
                            verse, verse)
    assert [u.title for u in units] == ["THE WILLOW", "TO A FRIEND", "EVENING"]


def test_numbered_list_items_inside_chapters_are_not_units():
    """Short ``1. First Point`` items between keyword chapters are list items, not units."""
    text, units, _ = _units("CHAPTER I", _prose(200, "a"), "1. The First Point", _prose(30, "p"),
                            "2. The Second Point", _prose(30, "q"), "CHAPTER II", _prose(200, "b"))
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II"] and "q0" in units[0].text(text)
