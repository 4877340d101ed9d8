"""GutenQA and LiteraryQA loaders (local folders; the hub path pointed at the local copy)."""
from __future__ import annotations

import json
import shutil

import pytest

from litseg_nb.data import gutenqa, literaryqa
from litseg_nb.data.gutenqa import load_gutenqa
from litseg_nb.data.literaryqa import load_literaryqa


@pytest.fixture(scope="module")
def gutenqa_dir(data_dir):
    folder = data_dir / "gutenqa"
    if not folder.is_dir():
        pytest.skip(f"GutenQA copy not found at {folder}")
    return folder


def _check_emma(book):
    assert book.book_id == "gutenqa:Emma_-_Jane_Austen"
    assert book.title == "Emma"
    chapters = book.meta["chapters"]
    assert len(chapters) == 55 and chapters[0][0] == "VOLUME I. CHAPTER I"
    assert len(book.paragraphs) == 2287
    assert book.text.startswith("Emma Woodhouse, handsome, clever, and rich")
    for title, start, end, p0, p1 in chapters:  # chapters tile the text exactly
        assert book.text[start:end] == "\n\n".join(book.text[a:b] for a, b in book.paragraphs[p0:p1])
    assert len(book.questions) == 30
    q = book.questions[0]
    assert q.evidence and q.dataset == "gutenqa" and q.answers


def test_gutenqa_local(gutenqa_dir):
    books = load_gutenqa(gutenqa_dir)
    assert len(books) == 1
    _check_emma(books[0])


def test_gutenqa_errors(gutenqa_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="questions.parquet"):
        shutil.copy(gutenqa_dir / gutenqa.PARAGRAPHS_FILE, tmp_path / gutenqa.PARAGRAPHS_FILE)
        load_gutenqa(tmp_path)


@pytest.fixture(scope="module")
def literaryqa_dir(data_dir):
    folder = data_dir / "literaryqa"
    if not folder.is_dir():
        pytest.skip(f"LiteraryQA copy not found at {folder}")
    return folder


def test_literaryqa_skips_missing_texts_loudly(literaryqa_dir, caplog):
    wanted = ["literaryqa:2349", "1710", "174"]  # 174 has no text in the local copy
    with caplog.at_level("WARNING"):
        books, report = load_literaryqa(literaryqa_dir, books=wanted)
    assert [b.book_id for b in books] == ["literaryqa:1710", "literaryqa:2349"] or \
        sorted(b.book_id for b in books) == ["literaryqa:1710", "literaryqa:2349"]
    assert report.skipped == {"literaryqa:174": "no text file texts/validation/174.txt"}
    assert "skipped 1: literaryqa:174 (no text file" in report.summary()
    b = next(b for b in books if b.book_id == "literaryqa:2349")
    assert b.questions and all(q.evidence is None and q.answers for q in b.questions)
    assert "PROJECT GUTENBERG" not in b.text.upper()
    assert len(b.source_map) == len(b.paragraphs)


def test_literaryqa_full_split_counts(literaryqa_dir):
    books, report = load_literaryqa(literaryqa_dir)
    assert len(books) == 18 and len(report.skipped) == 29
    assert sum(len(b.questions) for b in books) == 530


def test_literaryqa_record_with_text(tmp_path):
    (tmp_path / "annotations").mkdir()
    rec = {"gutenberg_id": "1", "title": "T", "qas": [{"question": "Q?", "answers": ["A"]}],
           "text": "First para\r\nline two.\r\n\r\nSecond   para."}
    (tmp_path / "annotations" / "test.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    books, report = load_literaryqa(tmp_path, split="test")
    assert books[0].text == "First para\nline two.\n\nSecond para."
    assert report.loaded == ["literaryqa:1"]


def test_load_corpus_reports_skipped_literaryqa_books_once(literaryqa_dir, data_dir, caplog):
    """load_corpus prints its report; the loader's own summary is not repeated beside it."""
    from litseg_nb.config import CorpusConfig
    from litseg_nb.corpus import load_corpus

    cfg = CorpusConfig(datasets=("literaryqa",))  # 29 validation books have no local text
    with caplog.at_level("WARNING"):
        load_corpus(cfg, use_cache=False, root=data_dir)
    lines = [r.getMessage() for r in caplog.records if "literaryqa:174" in r.getMessage()]
    assert len(lines) == 1 and "skipped 29" in lines[0] and "no text file" in lines[0]
