"""Cleaning and heading detection on the eleven raw Gutenberg books, and bad raw input.

The expected unit counts and titles were verified by reading the texts (grep of the headings):
e.g. Emma has VOLUME I-III with 18+18+19 chapters, Frankenstein (1818 edition) a preface, four
letters and 7+9+7 chapters in three volumes, Dubliners 15 stories listed in its contents, Grimm 62
tales listed in its contents (Mrs Fox's two FIRST/SECOND STORY units; Chanticleer's three numbered
sub-stories are sections of that tale, the chapter level), Heart of Darkness parts I-III,
The Time Machine sixteen bare roman numerals (the first followed by "Introduction") and an
epilogue.
"""
from __future__ import annotations

import pytest

from litseg_nb.data.gutenberg import GutenbergFormatError, clean_gutenberg_file, clean_gutenberg_text
from litseg_nb.preprocess.structure import FRONT_MATTER, StructureReport, build_units
from checks import check_unit_coverage

BIG = None  # no recursive splitting: test the structure itself

# pg id -> (number of narrative units, first titles, last title); title pages and contents are dropped
EXPECTED = {
    "46": (6, ["PREFACE", "STAVE I: MARLEY'S GHOST", "STAVE II: THE FIRST OF THE THREE SPIRITS"],
           "STAVE V: THE END OF IT"),
    "11": (12, ["CHAPTER I. Down the Rabbit-Hole", "CHAPTER II. The Pool of Tears"],
           "CHAPTER XII. Alice’s Evidence"),
    "2814": (15, ["THE SISTERS", "AN ENCOUNTER", "ARABY"], "THE DEAD"),
    "158": (55, ["VOLUME I / CHAPTER I", "VOLUME I / CHAPTER II"], "VOLUME III / CHAPTER XIX"),
    "41445": (28, ["VOL. I. / PREFACE.", "LETTER I. To Mrs. SAVILLE, England.", "LETTER II. To Mrs. SAVILLE, England."],
              "VOL. III. / CHAPTER VII."),
    "2591": (63, ["THE GOLDEN BIRD", "HANS IN LUCK", "JORINDA AND JORINDEL"], "SNOW-WHITE AND ROSE-RED"),
    "219": (3, ["I", "II", "III"], "III"),
    "105": (24, ["Chapter 1", "Chapter 2"], "Chapter 24"),
    "215": (7, ["Chapter I. Into the Primitive", "Chapter II. The Law of Club and Fang"],
            "Chapter VII. The Sounding of the Call"),
    "43": (10, ["STORY OF THE DOOR", "SEARCH FOR MR. HYDE"], "HENRY JEKYLL’S FULL STATEMENT OF THE CASE"),
    "35": (17, ["I / Introduction", "II The Machine", "III The Time Traveller Returns"], "Epilogue"),
}


@pytest.fixture(scope="module")
def gutenberg_dir(data_dir):
    folder = data_dir / "gutenberg"
    if not folder.is_dir():
        pytest.skip(f"raw Gutenberg books not found at {folder}")
    return folder


@pytest.mark.parametrize("pg_id", sorted(EXPECTED))
def test_units_of_raw_books(gutenberg_dir, pg_id):
    cleaned = clean_gutenberg_file(gutenberg_dir / f"{pg_id}.txt")
    report = StructureReport()
    units = build_units(f"gutenberg:{pg_id}", cleaned.text, cleaned.paragraphs, BIG, report=report,
                        author=cleaned.report.author)
    n, first, last = EXPECTED[pg_id]
    titles = [u.title for u in units]
    assert FRONT_MATTER not in titles
    assert titles[:len(first)] == first
    assert titles[-1] == last
    assert len(units) == n, titles
    check_unit_coverage(cleaned.text, cleaned.paragraphs, units, report.dropped)
    assert report.dropped and report.dropped[0][0] == 0  # the title page is dropped, not a unit
    for u in units:  # every unit starts with its heading paragraph and has text
        assert u.sentences and u.text(cleaned.text).strip()


def test_cleaning_strips_licence_and_keeps_source_map(gutenberg_dir):
    path = gutenberg_dir / "46.txt"
    cleaned = clean_gutenberg_file(path)
    text = cleaned.text
    assert "PROJECT GUTENBERG" not in text.upper()
    assert "Produced by" not in text
    assert "\r" not in text and "\n\n\n" not in text
    assert text.endswith("God bless Us, Every One!")
    assert "MARLEY was dead: to begin with. There is no doubt whatever about that." in text
    raw_lines = path.read_bytes().decode("utf-8").replace("\r\n", "\n").split("\n")
    assert len(cleaned.source_map) == len(cleaned.paragraphs)
    for (a, b), (la, lb) in zip(cleaned.paragraphs, cleaned.source_map):
        para_words = text[a:b].split()
        raw_words = " ".join(raw_lines[la:lb]).split()
        assert para_words == raw_words  # unwrapping changed no word


def test_marker_wrapped_over_two_lines(gutenberg_dir):
    cleaned = clean_gutenberg_file(gutenberg_dir / "43.txt")
    assert cleaned.text.startswith("The Strange Case Of Dr. Jekyll And Mr. Hyde")
    assert "***" not in cleaned.text[:200]


# ---------------------------------------------------------------- bad input
def _book(body: str, header: str = "Title: X\n\n") -> str:
    return (f"{header}*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n{body}\n\n"
            "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence text\n")


def test_empty_file_names_the_file(tmp_path):
    path = tmp_path / "999.txt"
    path.write_bytes(b"")
    with pytest.raises(GutenbergFormatError, match="999.txt.*empty"):
        clean_gutenberg_file(path)
    path.write_bytes(b"  \r\n\r\n")
    with pytest.raises(GutenbergFormatError, match="999.txt"):
        clean_gutenberg_file(path)


def test_only_licence_is_an_error(tmp_path):
    path = tmp_path / "998.txt"
    path.write_text(_book(""), encoding="utf-8")
    with pytest.raises(GutenbergFormatError, match="998.txt.*no text"):
        clean_gutenberg_file(path)


def test_non_utf8_bytes_name_the_file(tmp_path):
    path = tmp_path / "997.txt"
    path.write_bytes(_book("Caf\xe9 au lait.").encode("latin-1"))
    with pytest.raises(GutenbergFormatError, match=r"997.txt: not valid UTF-8 \(byte \d+"):
        clean_gutenberg_file(path)


def test_declared_latin1_is_decoded(tmp_path):
    path = tmp_path / "996.txt"
    path.write_bytes(_book("Caf\xe9 au lait.", header="Character set encoding: ISO-8859-1\n\n")
                     .encode("latin-1"))
    cleaned = clean_gutenberg_file(path)
    assert cleaned.text == "Café au lait."
    assert cleaned.report.decode == "declared:iso-8859-1"


def test_crlf_and_cr_line_ends(tmp_path):
    body = ("CHAPTER I\n\nIt was a dark and stormy night; the rain fell in\ntorrents, except at "
            "occasional intervals.\n\nCHAPTER II\n\nThe end came soon, when the wind swept up\r"
            "the streets and rattled along the housetops.")
    path = tmp_path / "995.txt"
    path.write_bytes(_book(body).replace("\n", "\r\n").encode("utf-8"))
    cleaned = clean_gutenberg_file(path)
    assert cleaned.text == ("CHAPTER I\n\nIt was a dark and stormy night; the rain fell in torrents, "
                            "except at occasional intervals.\n\nCHAPTER II\n\nThe end came soon, when "
                            "the wind swept up the streets and rattled along the housetops.")
    units = build_units("x", cleaned.text, cleaned.paragraphs, 100)
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II"]


def test_missing_markers_error_or_keep(tmp_path):
    path = tmp_path / "994.txt"
    path.write_text("Just some text\nwithout markers.\n", encoding="utf-8")
    with pytest.raises(GutenbergFormatError, match="994.txt.*START"):
        clean_gutenberg_file(path)
    cleaned = clean_gutenberg_text(path.read_bytes(), source=str(path), missing_markers="keep")
    assert cleaned.text == "Just some text without markers."
    assert cleaned.report.markers_found is False


def test_verse_keeps_line_breaks():
    prose = ("It was the best of times, it was the worst of times, it was the age of\n"
             "wisdom, it was the age of foolishness, it was the epoch of belief, it\n"
             "was the epoch of incredulity.")
    verse = "Twinkle, twinkle, little star\nHow I wonder what you are\nUp above the world so high"
    cleaned = clean_gutenberg_text(_book(prose + "\n\n" + verse))
    paras = [cleaned.text[a:b] for a, b in cleaned.paragraphs]
    assert paras[0] == " ".join(prose.split("\n"))
    assert paras[1] == verse


# ---------------------------------------------------------------- regressions (cleaning)
OLD_HEADER = ("The Project Gutenberg Etext of X\n\n*****This file should be named x10.txt or x10.zip*****\n\n"
              "***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN ETEXTS**START***\nWhy is this \"Small Print!\" "
              "statement here?\n\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n")


def test_old_licence_format_is_cleaned():
    """``*END*THE SMALL PRINT!`` starts the body; ``End of ... Etext`` ends it."""
    body = ("CHAPTER I\n\nIt was a fine morning in the little town where we lived long ago\n"
            "and the birds sang in the trees.\n\nCHAPTER II\n\nThen came the evening, and all was still.")
    raw = OLD_HEADER + body + "\n\nEnd of The Project Gutenberg Etext of X\n\nmore licence\n"
    cleaned = clean_gutenberg_text(raw, source="x10.txt")
    assert cleaned.report.licence == "old"
    assert cleaned.text.startswith("CHAPTER I\n\nIt was a fine morning") and cleaned.text.endswith("all was still.")
    assert "SMALL PRINT" not in cleaned.text and "Etext" not in cleaned.text


def test_early_file_banner_html_note_and_copyright_blocks_are_dropped():
    """Gutenberg banners/notes inside the body are dropped and counted."""
    body = ("****THIS EBOOK WAS ONE OF PROJECT GUTENBERG'S EARLY FILES PRODUCED AT A\nTIME WHEN ...****\n\n"
            "Note: Project Gutenberg also has an HTML version of this\nfile which includes the illustrations.\n\n"
            "CHAPTER I\n\nThe story begins here and goes on for a while.\n\n"
            "<<THIS ELECTRONIC VERSION OF THE COMPLETE WORKS OF WILLIAM\nSHAKESPEARE IS COPYRIGHT 1990-1993.>>\n\n"
            "And it ends here.")
    cleaned = clean_gutenberg_text(_book(body))
    assert cleaned.text == "CHAPTER I\n\nThe story begins here and goes on for a while.\n\nAnd it ends here."
    assert len(cleaned.report.dropped_notes) == 3 and cleaned.report.dropped_chars > 150


def test_several_books_in_one_file_is_an_error_naming_file_and_markers(tmp_path):
    """Never load the first book of several silently."""
    path = tmp_path / "993.txt"
    path.write_text(_book("First book text.") + _book("Second book text."), encoding="utf-8")
    with pytest.raises(GutenbergFormatError, match=r"993.txt: several books in one file: START markers at "
                                                   r"lines \[3, 11\], END markers at lines \[7, 15\]"):
        clean_gutenberg_file(path)


def test_utf16_is_decoded_or_named(tmp_path):
    """UTF-16 with a BOM is decoded; without a BOM the error says UTF-16."""
    path = tmp_path / "992.txt"
    path.write_bytes(_book("Caf\xe9 au lait.").encode("utf-16"))
    cleaned = clean_gutenberg_file(path)
    assert cleaned.text == "Café au lait." and cleaned.report.decode == "utf-16"
    path.write_bytes(_book("Cafe au lait.").encode("utf-16-le"))
    with pytest.raises(GutenbergFormatError, match="992.txt: looks like UTF-16"):
        clean_gutenberg_file(path)


def _data_root(tmp_path, files: dict[str, bytes]):
    folder = tmp_path / "data" / "gutenberg"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return tmp_path / "data"


def test_one_bad_file_is_skipped_logged_and_listed(tmp_path, fresh_dirs):
    """An empty/undecodable/multi-book file does not abort the dataset; strict=True raises."""
    from litseg_nb import corpus
    from litseg_nb.config import CorpusConfig

    good = _book("CHAPTER I\n\nA short story about a dog who ran away and came back home.").encode("utf-8")
    root = _data_root(tmp_path, {"1.txt": good, "2.txt": b"", "3.txt": _book("Caf\xe9").encode("latin-1")})
    cfg = CorpusConfig(datasets=("gutenberg",), max_unit_words=100)
    books = corpus.load_corpus(cfg, use_cache=False, root=root)
    assert [b.book_id for b in books] == ["gutenberg:1"]
    skipped = books.report.loads["gutenberg"].skipped
    assert set(skipped) == {"gutenberg:2", "gutenberg:3"} and "empty" in skipped["gutenberg:2"]
    assert "skipped 2" in books.report.summary()
    with pytest.raises(corpus.CorpusError, match="2.txt: file is empty.*strict"):
        corpus.load_corpus(CorpusConfig(datasets=("gutenberg",), max_unit_words=100, strict=True),
                           use_cache=False, root=root)


def test_books_filter_cleans_only_the_named_books(tmp_path, fresh_dirs, monkeypatch):
    """``books=`` must not clean every book."""
    from litseg_nb import corpus
    from litseg_nb.config import CorpusConfig

    good = _book("CHAPTER I\n\nA short story about a dog who ran away and came back home.").encode("utf-8")
    root = _data_root(tmp_path, {f"{i}.txt": good for i in range(1, 6)})
    seen = []
    real = corpus.clean_gutenberg_file
    monkeypatch.setattr(corpus, "clean_gutenberg_file", lambda p, *a, **k: seen.append(p.name) or real(p, *a, **k))
    books = corpus.load_corpus(CorpusConfig(datasets=("gutenberg",), books=("3",), max_unit_words=100),
                               use_cache=False, root=root)
    assert [b.book_id for b in books] == ["gutenberg:3"] and seen == ["3.txt"]
