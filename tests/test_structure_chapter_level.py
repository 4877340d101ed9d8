"""Chapters, not the numbered sections inside them; one synthetic test per failure kind."""
from __future__ import annotations

from litseg_nb.preprocess.headings import _classify
from litseg_nb.preprocess.structure import StructureReport, build_units
from checks import check_unit_coverage
from test_preprocess_structure import _paras, _prose  # the same synthetic-book helpers


def _units(*paras: str, n: int = 100_000, title: str = "My Book"):
    text, spans = _paras(*paras)
    report = StructureReport()
    units = build_units("b", text, spans, n, report=report, whole_title=title)
    check_unit_coverage(text, spans, units, report.dropped)
    return text, units, report


def test_kind1_numbered_sections_inside_chapters_are_recorded_on_the_unit_not_units():
    text, units, report = _units("CHAPTER I", "1", _prose(200, "a"), "2", _prose(200, "b"),
                                 "CHAPTER II", "1. THE FIRST WEEK", _prose(200, "c"), "2. THE SECOND WEEK",
                                 _prose(200, "d"))
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II"]
    assert [t for _, t in units[0].sections] == ["1", "2"]
    assert [t for _, t in units[1].sections] == ["1. THE FIRST WEEK", "2. THE SECOND WEEK"]
    assert all(text[a:a + len(t)] == t for u in units for a, t in u.sections)  # exact offsets
    assert report.sections == 4 and "numeral" in report.section_kinds
    assert any("sections, not units" in note for note in report.level_notes)


def test_kind1_stories_and_acts_are_the_units_their_numbered_parts_and_scenes_sections():
    _, units, _ = _units("CONTENTS", "THE DOOR\nTHE WINDOW", "THE DOOR", "I", _prose(200, "a"), "II",
                         _prose(200, "b"), "THE WINDOW", "I", _prose(200, "c"), "II", _prose(200, "d"))
    assert [u.title for u in units] == ["THE DOOR", "THE WINDOW"]
    assert [t for _, t in units[1].sections] == ["I", "II"]
    _, units, _ = _units("ACT I", "SCENE I", _prose(200, "a"), "SCENE II", _prose(200, "b"), "ACT II",
                         "SCENE I", _prose(200, "c"))
    assert [u.title.split()[:2] for u in units] == [["ACT", "I"], ["ACT", "II"]]
    assert [t for _, t in units[0].sections] == ["SCENE I", "SCENE II"]


def test_sections_are_the_preferred_cut_points_of_a_recursive_split():
    """Sections of 200 / 400 / 200 words (two paragraphs each), n = 600: greedy packing by
    paragraphs would cut inside the second section; the cuts fall on section starts instead."""
    text, units, report = _units("CHAPTER I", "1", _prose(100, "a"), _prose(100, "b"), "2", _prose(200, "c"),
                                 _prose(200, "d"), "3", _prose(100, "e"), _prose(100, "f"), n=600)
    assert [u.split for u in units] == ["recursive"] * 3
    assert [u.text(text).split("\n\n")[0] for u in units] == ["CHAPTER I", "2", "3"]
    assert [[t for _, t in u.sections] for u in units] == [["1"], ["2"], ["3"]]  # each piece's own sections
    assert all(len(u.text(text).split()) <= 600 for u in units)


def test_kind2_spelled_out_ordinals_are_chapter_and_book_headings():
    for line, kind, value in [("CHAPTER THE FIRST", "chapter", 1), ("Chapter the Twenty-third", "chapter", 23),
                              ("CHAPTER THE FORTY-SECOND", "chapter", 42), ("CHAPTER THIRTY-TWO", "chapter", 32),
                              ("THE FIRST CHAPTER", "chapter", 1), ("BOOK THE SECOND", "book", 2),
                              ("Chapter the Hundredth", "chapter", 100)]:
        (h,) = _classify(line)
        assert (h.kind, h.value) == (kind, value), line
    _, units, _ = _units("BOOK THE FIRST", "CHAPTER THE FIRST", _prose(200, "a"), "CHAPTER THE SECOND",
                         _prose(200, "b"), "BOOK THE SECOND", "CHAPTER THE THIRTIETH", _prose(200, "c"),
                         "CHAPTER THE THIRTY-FIRST", _prose(200, "d"))
    assert [u.title for u in units][-1] == "BOOK THE SECOND / CHAPTER THE THIRTY-FIRST"


def test_kind2_a_prefatory_note_is_never_a_parent_and_the_contents_level_is_the_chapter_level():
    body = ["PREFATORY NOTE", _prose(80, "p"), "I. THE OLD HOUSE", "1. The Door", _prose(200, "a"),
            "2. The Roof", _prose(200, "b"), "II. THE NEW HOUSE", "1. The Garden", _prose(200, "c"),
            "2. The Gate", _prose(200, "d")]
    for paras in (["CONTENTS", "I. THE OLD HOUSE\nII. THE NEW HOUSE"] + body, body):  # with and without contents
        _, units, report = _units(*paras)
        assert [u.title for u in units] == ["PREFATORY NOTE", "I. THE OLD HOUSE", "II. THE NEW HOUSE"], paras[0]
        assert [t for _, t in units[2].sections] == ["1. The Garden", "2. The Gate"]
        assert report.level_notes


def test_kind3_long_prose_before_the_contents_is_a_unit_and_reported():
    _, units, report = _units("MY BOOK", "by A. Writer", "AN HISTORICAL SKETCH", _prose(600, "s"), "CONTENTS",
                              "CHAPTER I\nCHAPTER II", "CHAPTER I", _prose(200, "a"), "CHAPTER II", _prose(200, "b"))
    assert [u.title for u in units] == ["AN HISTORICAL SKETCH", "CHAPTER I", "CHAPTER II"]
    assert "600 prose words" in report.front_decision and "kept as a unit" in report.front_decision
    # short prose there (a dedication) stays front matter, and the report says so
    _, units, report = _units("MY BOOK", _prose(60, "d"), "CONTENTS", "CHAPTER I\nCHAPTER II", "CHAPTER I",
                              _prose(200, "a"), "CHAPTER II", _prose(200, "b"))
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II"] and "front matter" in report.front_decision


def test_kind4_an_opening_preface_ends_where_the_unheaded_novel_starts():
    text, units, report = _units("MY NOVEL", "THE AUTHOR'S PREFACE", _prose(300, "p"), "J. S.",
                                 _prose(3000, "a"), _prose(3000, "b"), title="MY NOVEL")
    assert [u.title for u in units] == ["THE AUTHOR'S PREFACE", "MY NOVEL"]
    assert units[1].text(text).startswith("a0") and "J. S." in units[0].text(text)
    assert "signature" in report.preface_decision
    _, units, report = _units("MY NOVEL", "INTRODUCTION", _prose(300, "p"), "* * *", _prose(6000, "a"))
    assert [u.title for u in units] == ["INTRODUCTION", "My Book"] and "a rule" in report.preface_decision


def test_kind5_part_one_keeps_its_parent_after_a_chapters_only_contents():
    _, units, _ = _units("MY NOVEL", "CONTENTS", "THE START\nTHE MIDDLE\nTHE END", "PART ONE", "THE START",
                         _prose(200, "a"), "THE MIDDLE", _prose(200, "b"), "PART TWO", "THE END", _prose(200, "c"))
    assert [u.title for u in units] == ["PART ONE / THE START", "PART ONE / THE MIDDLE", "PART TWO / THE END"]
    _, units, _ = _units("MY NOVEL", "CONTENTS", "I. GOING OUT\nII. COMING IN\nIII. STAYING", "PART I",
                         "I. GOING OUT", _prose(200, "a"), "II. COMING IN", _prose(200, "b"), "PART II",
                         "III. STAYING", _prose(200, "c"))
    assert [u.title for u in units] == ["PART I / I. GOING OUT", "PART I / II. COMING IN", "PART II / III. STAYING"]


def test_kind6_book_title_repeated_as_a_heading_and_stories_titled_by_capital_lines():
    # the novel's title set again as a heading: a parent, its numerals are the chapters
    # (a guard for kind 1: numerals under a title are that story's sections, unless the title holds them all)
    _, units, report = _units("CONTENTS", "PREFACE\nTHE LONG ROAD", "PREFACE", _prose(100, "p"), "THE LONG ROAD",
                              "I", _prose(300, "a"), "II", _prose(300, "b"), "III", _prose(300, "c"))
    assert [u.title.split(" / ")[-1] for u in units] == ["PREFACE", "I", "II", "III"]
    assert any("book's title" in note for note in report.level_notes)
    # a collection without contents or CHAPTER words: one unit per capital-line title
    _, units, _ = _units("STORIES", "by A. Writer", "THE RED DOOR", _prose(700, "a"), "THE BLUE WINDOW",
                         _prose(700, "b"), "THE GREEN GATE", _prose(700, "c"))
    assert [u.title for u in units] == ["THE RED DOOR", "THE BLUE WINDOW", "THE GREEN GATE"]


def test_kind6_a_collection_with_one_story_in_numbered_sections_keeps_every_story():
    _, units, _ = _units("STORIES", "by A. Writer", "THE RED DOOR", _prose(700, "a"), "THE BLUE WINDOW", "I",
                         _prose(400, "b"), "II", _prose(400, "c"), "THE GREEN GATE", _prose(700, "d"))
    assert [u.title for u in units] == ["THE RED DOOR", "THE BLUE WINDOW", "THE GREEN GATE"]
    assert [t for _, t in units[1].sections] == ["I", "II"]
    # a novel whose numeral chapters run through the book: capital lines in it are not story titles
    _, units, _ = _units("MY NOVEL", "I", _prose(700, "a"), "DEAR SIR", _prose(700, "b"), "II", _prose(400, "c"),
                         "THE LETTER", _prose(700, "d"), "III", _prose(600, "e"), "THE END OF IT", _prose(600, "f"))
    assert [u.title for u in units] == ["I", "II", "III"]


def test_kind1_paragraph_sign_sections_inside_a_chapter():
    _, units, report = _units("CHAPTER I", "§ 1", _prose(300, "a"), "§ 2", _prose(300, "b"), "CHAPTER II",
                              _prose(300, "c"))
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II"]
    assert [t for _, t in units[0].sections] == ["§ 1", "§ 2"]


def test_kind3_a_fictional_editors_framing_introduction_is_a_unit_a_real_editors_is_not():
    def book(intro_words: str):
        text, spans = _paras("THE TALE", "INTRODUCTION", intro_words + " " + _prose(200, "i"), "J. BROWN.",
                             "CHAPTER I", _prose(300, "a"), "CHAPTER II", _prose(300, "b"))
        report = StructureReport()
        units = build_units("b", text, spans, 100_000, report=report, author="Mary Smith")
        return [u.title for u in units], report

    titles, report = book("These papers came to me from a drowned sailor's chest, and I print them as I found them.")
    assert titles == ["INTRODUCTION", "CHAPTER I", "CHAPTER II"]
    assert any("framing introduction" in note for note in report.level_notes)
    titles, _ = book("Mary Smith wrote this tale in 1850, and Smith's readers have loved it since then.")
    assert titles == ["CHAPTER I", "CHAPTER II"]
