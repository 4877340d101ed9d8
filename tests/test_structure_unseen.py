"""Units on raw books the rules were not written on: one synthetic test per kind of miss (the books are our
own made-up text), each with the real local book of that kind where one exists."""
from __future__ import annotations

import gzip
import textwrap

import pytest

from litseg_nb.config import CorpusConfig
from litseg_nb.corpus import load_corpus
from litseg_nb.data.gutenberg import clean_gutenberg_text
from litseg_nb.preprocess.structure import StructureReport, build_units
import litseg_nb
from checks import check_unit_coverage
from test_preprocess_structure import _paras, _prose  # the same synthetic-book helpers

ROMANS = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII"]


def _units(*paras: str, author: str | None = None, whole_title: str = "My Book"):
    text, spans = _paras(*paras)
    report = StructureReport()
    units = build_units("b", text, spans, None, report=report, whole_title=whole_title, author=author)
    check_unit_coverage(text, spans, units, report.dropped)
    return text, units, report


def _real(data_dir, rel: str):
    """Units of a local raw book, as the gold scorer builds them (the header's author given)."""
    path = data_dir / rel
    data = path.read_bytes()
    cleaned = clean_gutenberg_text(gzip.decompress(data) if path.suffix == ".gz" else data, source=str(path))
    report = StructureReport()
    units = build_units("b", cleaned.text, cleaned.paragraphs, None, report=report, whole_title="@front",
                        sentences=[tuple(p) for p in cleaned.paragraphs], author=cleaned.report.author)
    check_unit_coverage(cleaned.text, cleaned.paragraphs, units, report.dropped)
    return cleaned.text, units, report


def _gutenberg_file(body: list[str], author: str, title: str = "The Quiet House") -> str:
    return (f"The Project Gutenberg eBook of {title}\n\nTitle: {title}\n\nAuthor: {author}\n\n"
            f"*** START OF THE PROJECT GUTENBERG EBOOK {title.upper()} ***\n\n"
            + "\n\n".join(body) + f"\n\n*** END OF THE PROJECT GUTENBERG EBOOK {title.upper()} ***\n")


# kind 7: one loader path ------------------------------------------------------------------------------

def test_load_text_and_load_corpus_give_one_file_the_same_units(tmp_path, fresh_dirs):
    """A preface signed by someone else than the header's author is front matter: ``load_text`` and
    ``load_corpus`` build the book on one path, so both drop it (on main ``load_text`` never passed the
    author on and kept the preface as a unit)."""
    body = ["THE QUIET HOUSE", "by Mary Writer", "PREFACE", _prose(200, "pf"), "J. K. OTHERSON.",
            "CHAPTER I.", _prose(300, "a"), "CHAPTER II.", _prose(300, "b")]
    folder = tmp_path / "data" / "gutenberg"
    folder.mkdir(parents=True)
    (folder / "777.txt").write_text(_gutenberg_file(body, "Mary Writer"), encoding="utf-8")
    direct = litseg_nb.load_text(folder / "777.txt", max_unit_words=None)
    (book,) = load_corpus(CorpusConfig(datasets=("gutenberg",), max_unit_words=None), use_cache=False,
                          root=tmp_path / "data")
    assert [u.title for u in direct.units] == [u.title for u in book.units] == ["CHAPTER I.", "CHAPTER II."]
    assert direct.units == book.units and direct.title == book.title == "The Quiet House"
    assert direct.meta["structure"]["dropped"] == book.meta["structure"]["dropped"]
    assert direct.meta["clean"]["author"] == "Mary Writer"


# kind 2: decorated chapter headings --------------------------------------------------------------------

@pytest.mark.parametrize("sep", ["~~", "==", "::", "|", "~", "//", "•"])
def test_chapter_headings_with_a_separator_before_their_title(sep):
    """``CHAPTER THE FIRST ~~ THE BOY GROWS UP``: a separator between the chapter word and its title is
    still a heading (on main the book was one unit)."""
    ords = ["FIRST", "SECOND", "THIRD", "FOURTH"]
    names = ["THE BOY GROWS UP", "A LETTER COMES", "THE OLD MILL", "HOME AGAIN"]
    body = ["THE STORY OF A BOY"]
    for k, (o, t) in enumerate(zip(ords, names)):
        body += [f"CHAPTER THE {o} {sep} {t}", _prose(400, f"p{k}x")]
    _, units, _ = _units(*body)
    assert [u.title for u in units] == [f"CHAPTER THE {o} {sep} {t}" for o, t in zip(ords, names)]
    # the same with Roman numerals
    body = ["THE STORY OF A BOY"] + [x for k, t in enumerate(names) for x in (f"CHAPTER {ROMANS[k]}. {sep} {t}",
                                                                              _prose(300, f"q{k}x"))]
    _, units, _ = _units(*body)
    assert len(units) == 4 and units[3].title.startswith("CHAPTER IV")


def test_a_separator_does_not_make_prose_a_heading():
    """Counter-case: ``Chapter one ~~ was the one he liked`` (lower-case after the separator) is prose."""
    _, units, _ = _units("CHAPTER I.", _prose(200, "a"), "Chapter one ~~ was the one he liked best of all.",
                         _prose(200, "b"), "CHAPTER II.", _prose(200, "c"))
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II."]


# kind 4: contents entries with their page numbers glued on ---------------------------------------------

def test_contents_entries_with_page_numbers_glued_on_still_match_their_chapters():
    """``IV Different Opinions47``: the page number glued to the entry's last word is no part of the
    title; every listed chapter is found (on main chapter IV was demoted into III as a section)."""
    titles = ["The Arrival", "A Walk in the Park", "The Letter", "Different Opinions", "The Storm"]
    pages = [1, 12, 30, 47, 61]
    contents = "\n".join(f"{ROMANS[k]} {t}{p}" for k, (t, p) in enumerate(zip(titles, pages)))
    body = [x for k, t in enumerate(titles) for x in (ROMANS[k], t, _prose(300, f"c{k}x"))]
    _, units, report = _units("MY BOOK", "CONTENTS", contents, *body)
    assert [u.title for u in units] == [f"{r} {t}" for r, t in zip(ROMANS, titles)]
    assert report.toc_matched == 5 and report.sections == 0
    # a footnote mark on a body heading ("THE STORM[2]") is no part of its title either
    body = [x for k, t in enumerate(titles) for x in (t.upper() + ("[2]" if k == 4 else ""), _prose(300, f"d{k}x"))]
    _, units, _ = _units("MY BOOK", "CONTENTS", "\n".join(titles), *body)
    assert [u.title for u in units] == [t.upper() for t in titles]
    # a title that ends in a number is left alone when its body heading has it too
    _, units, _ = _units("CONTENTS", "I Room 101\nII Catch 22", "I", "Room 101", _prose(300, "a"),
                         "II", "Catch 22", _prose(300, "b"))
    assert len(units) == 2


# kind 5: a contents list that swallows the first heading -----------------------------------------------

@pytest.mark.parametrize("first_line", ["It was late.", "_Spring, 1850._"])
def test_a_contents_list_ends_at_the_first_chapter_over_a_short_line_and_prose(first_line):
    """``CHAPTER I`` / a short first line / prose right after a contents list that does not name it: the
    chapter is the body's first unit, none of its words are dropped (on main the heading and the line
    were read as contents entries and the rest of chapter I was dropped as front matter, while the
    report said it was a unit)."""
    body = ["MY BOOK", "by A. Writer", "CONTENTS", "The Arrival\nThe Storm\nHome Again",
            "CHAPTER I", first_line, _prose(880, "a"), "CHAPTER II", _prose(300, "b"), "CHAPTER III", _prose(300, "c")]
    text, units, report = _units(*body)
    assert [u.title.split(" ", 2)[:2] for u in units] == [["CHAPTER", n] for n in ("I", "II", "III")]
    assert units[0].text(text).startswith("CHAPTER I") and "a879" in units[0].text(text)
    assert [d[2] for d in report.dropped] == ["front matter", "CONTENTS"]


def test_prose_after_a_contents_list_reported_as_a_unit_is_one():
    """The load report's "prose words before the first heading: a unit" is kept: the unit exists and
    holds that prose (on main a "Front matter" mark at the same paragraph dropped it)."""
    body = ["MY BOOK", "CONTENTS", "The Arrival\nThe Storm", "Some Opening Words", _prose(400, "a"),
            "THE STORM", _prose(300, "b")]
    text, units, report = _units(*body)
    assert "a unit" in report.front_decision
    assert any("a399" in u.text(text) for u in units)
    assert not any(d[2] == "Front matter" for d in report.dropped)


def test_a_contents_list_whose_items_wrap_stays_a_list():
    """Numbered contents items that wrap over two lines (``IV. Farther Ascent. ...`` / its continuation)
    are a list, not a prose paragraph that would become a front unit."""
    items = []
    for k in range(8):
        items += [f"   {ROMANS[k]}. The Place of the {k}th Meeting.  The Friends.  The Long Road",
                  f"        and the Return Home by the Sea.  The {k}th Storm.  The End."]
    prose = [textwrap.fill(_prose(300, tag), 70) for tag in "ab"]
    raw = "\n".join(["MY BOOK", "", "CONTENTS", "", *items, "", "CANTO I", "", prose[0], "", "CANTO II", "", prose[1]])
    cleaned = clean_gutenberg_text(_gutenberg_file([raw], "A. Writer"))
    report = StructureReport()
    units = build_units("b", cleaned.text, cleaned.paragraphs, None, report=report, whole_title="My Book")
    assert [u.title for u in units] == ["CANTO I", "CANTO II"]
    assert "\n" in cleaned.text[slice(*cleaned.paragraphs[2])]  # one item a line


def test_real_book_a_contents_list_over_a_footnoted_first_title(data_dir):
    """Turgenev's stories (``A RECKLESS CHARACTER[1]`` / ``(1881)`` / ``I`` / a short first line, right after
    the contents): the first story is a unit and its opening is in it (main dropped 9,009 words)."""
    text, units, report = _real(data_dir, "gutenberg_train/15994.txt.gz")
    first = next(u for u in units if "There were eight of us in the room" in u.text(text))
    assert first.title.startswith("A RECKLESS CHARACTER") and "CHARACTER1" not in first.title
    assert not any(d[2] == "Front matter" for d in report.dropped)


# kind 3: whose preface it is ----------------------------------------------------------------------------

def _editor_note(n: int = 3) -> str:
    return " ".join(f"In {1800 + k} Writer began the work, and Writer's friends thought it his best." for k in range(n))


@pytest.mark.parametrize("title", ["INTRODUCTION", "INTRODUCTORY NOTE", "PREFATORY NOTE"])
def test_an_unsigned_editors_note_speaking_of_the_author_is_not_narrative(title):
    """An unsigned introduction that speaks of the author in the third person (his surname, no I/my) is an
    editor's: front matter (on main it was kept as a unit, and an ``INTRODUCTORY NOTE`` never checked)."""
    _, units, report = _units("THE BOOK", title, _editor_note(8), _prose(200, "n"), "CHAPTER I.", _prose(300, "a"),
                              "CHAPTER II.", _prose(300, "b"), author="John Writer")
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II."]
    assert [d[2] for d in report.dropped][-1] == title
    assert any("editor's note" in n for n in report.level_notes)


def test_the_authors_own_unsigned_preface_speaking_in_the_first_person_stays():
    """Counter-case: the author's preface says I and my; naming the book's hero (no surname of the author)
    it stays a unit."""
    own = " ".join("I wrote this story of Tom in my own house, and I thank my readers." for _ in range(8))
    _, units, _ = _units("THE BOOK", "INTRODUCTORY NOTE", own, "CHAPTER I.", _prose(300, "a"),
                         "CHAPTER II.", _prose(300, "b"), author="John Writer")
    assert [u.title for u in units] == ["INTRODUCTORY NOTE", "CHAPTER I.", "CHAPTER II."]


def test_a_signature_with_a_place_and_a_date_is_read():
    """``E. A. V. MERTON, SURREY: August, 1898.``: a name with its place and date, someone else's (on main the
    line was skipped for its digits, the preface read as unsigned and kept)."""
    _, units, report = _units("THE BOOK", "PREFACE", _prose(200, "p"), "Writer is the finest author of his time.",
                              "E. A. V. MERTON, SURREY: August, 1898.", "CHAPTER I.", _prose(300, "a"),
                              "CHAPTER II.", _prose(300, "b"), author="John Writer")
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II."]
    assert "PREFACE" in [d[2] for d in report.dropped]
    # a dated place is no name: the author's preface dated "LONDON, May 1850." stays
    _, units, _ = _units("THE BOOK", "PREFACE", _prose(200, "p"), "LONDON, May 1850.", "CHAPTER I.",
                         _prose(300, "a"), "CHAPTER II.", _prose(300, "b"), author="John Writer")
    assert units[0].title == "PREFACE"


def test_the_authors_preface_to_the_first_edition_is_a_unit():
    """``PREFACE TO THE FIRST EDITION`` signed with the author's initials is the author's: a unit (on main
    any preface to an edition was non-narrative)."""
    _, units, _ = _units("THE BOOK", "PREFACE TO THE FIRST EDITION", _prose(200, "p"), "J. W.", "CHAPTER I.",
                         _prose(300, "a"), "CHAPTER II.", _prose(300, "b"), author="John Writer")
    assert [u.title for u in units] == ["PREFACE TO THE FIRST EDITION", "CHAPTER I.", "CHAPTER II."]


def test_a_title_page_after_the_authors_preface_is_no_signature():
    """The author's preface followed by a second title page (``THE HOUSE OF MIRTH`` / ``by`` / the author):
    the title is not read as someone else's signature, the preface stays (on main it was dropped)."""
    _, units, _ = _units("THE HOUSE OF MIRTH", "PREFACE", _prose(200, "p"), "THE HOUSE OF MIRTH", "by",
                         "John Writer", "CHAPTER I.", _prose(300, "a"), "CHAPTER II.", _prose(300, "b"),
                         author="John Writer")
    assert units[0].title == "PREFACE" and len(units) == 3


@pytest.mark.parametrize("sig, own", [("H. M.", False), ("H. W.", True), ("HORACE WALPOLE.", True), ("WALPOLE.", True),
                                      ("M. H. W.", False), ("THE AUTHOR.", True)])
def test_initials_must_be_the_authors_in_order(sig, own):
    """``H. M.`` is not Horace Walpole (on main one shared initial was enough)."""
    _, units, _ = _units("THE BOOK", "PREFACE", _prose(200, "p"), sig, "CHAPTER I.", _prose(300, "a"),
                         "CHAPTER II.", _prose(300, "b"), author="Horace Walpole")
    assert (units[0].title == "PREFACE") is own


def test_real_books_whose_preface(data_dir):
    """An editor's unsigned introductory note speaking of Goethe is front matter; Harris's own introductory
    note (``J. C. H.``, then the book's title) and Defoe's preface to the first edition are units."""
    _, units, report = _real(data_dir, "gutenberg_train/1945.txt.gz")
    assert units[0].title == "ACT I" and "INTRODUCTORY NOTE" in [d[2] for d in report.dropped]
    _, units, _ = _real(data_dir, "gutenberg_train/50701.txt.gz")
    assert units[0].title.startswith("INTRODUCTORY NOTE")
    _, units, _ = _real(data_dir, "gutenberg_train/12259.txt.gz")
    assert units[0].title.startswith("PREFACE TO THE FIRST EDITION")


# kind 6: a book without headings keeps its opening scene ------------------------------------------------

def test_a_book_without_headings_keeps_an_opening_scene_of_short_speeches():
    """No heading, an opening scene in short quoted speeches (no paragraph of twelve words), then ``* * *``:
    the whole-text unit starts at the first speech (on main it started at the first long paragraph, after
    the rule, and the opening was dropped as front matter)."""
    opening = [f'"Is that you, Tom{k}?" she called.' if k % 2 else f'"It is, mother{k}."' for k in range(60)]
    text, units, report = _units("THE LONG NIGHT", "by A. Writer", *opening, "* * * * *", _prose(2000, "b"),
                                 "* * * * *", _prose(2000, "c"), whole_title="The Long Night")
    assert len(units) == 1 and units[0].text(text).startswith('"It is, mother0."')
    assert [text[a:b] for a, b, _ in report.dropped] == ["THE LONG NIGHT\n\nby A. Writer"]


# kind 1: numbered sections inside chapters that restart in each part ------------------------------------

NAMES = ["THE RIVER", "THE TOWN", "THE SEA", "THE HILL", "THE ROAD"]


@pytest.mark.parametrize("chapter", ["{r}", "{r}|{n}", "{r}\n{n}"])
def test_arabic_sections_inside_restarting_roman_chapters_are_sections(chapter):
    """Three parts, five chapters each (``I`` .. ``V``, restarting in each part; bare, or over their title in
    the next paragraph or the same one), each chapter with sections ``1``, ``2``, ``3`` on lines of their own:
    the fifteen chapters are the units (on main the 45 sections were)."""
    body = ["THE BOOK"]
    for p, part in enumerate(["PART ONE", "PART TWO", "PART THREE"]):
        body.append(part)
        for c in range(5):
            body += chapter.format(r=ROMANS[c], n=NAMES[c]).split("|")
            for s in range(1, 4):
                body += [str(s), _prose(300, f"p{p}c{c}s{s}x")]
    _, units, report = _units(*body)
    assert len(units) == 15 and report.sections == 45
    assert [u.title.split(" / ")[1].split()[0] for u in units] == ROMANS[:5] * 3
    assert [t for _, t in units[0].sections] == ["1", "2", "3"]
