"""Units on raw books the rules were not written on: one synthetic test per kind of miss (the books are our
own made-up text), each with the real local book of that kind where one exists."""
from __future__ import annotations

import gzip

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
