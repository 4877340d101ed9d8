"""load_corpus: datasets, caps, cache, ids, statistics."""
from __future__ import annotations

import pytest

from litseg_nb import corpus
from litseg_nb.config import CorpusConfig, StageConfig
from checks import check_unit_coverage


@pytest.fixture
def cfg(data_dir, fresh_dirs):
    return StageConfig.for_profile("test").corpus


def test_test_profile_corpus(cfg):
    books = corpus.load_corpus(cfg)
    assert [b.book_id for b in books] == ["gutenqa:Emma_-_Jane_Austen", "gutenberg:11", "gutenberg:35"]
    for b in books:
        assert len(b.units) == 2
        for u in b.units:
            assert u.title != "Front matter" and u.sentences
            assert len(u.text(b.text).split()) <= cfg.max_unit_words
            for s in u.sentences:
                assert b.text[s.start:s.end] == b.text[s.start:s.end].strip() != ""
    assert books[0].units[0].split == "recursive"  # Emma's chapter I is longer than n=300
    again = corpus.load_corpus(cfg)
    assert again.report.from_cache and not books.report.from_cache
    assert [b.units for b in again] == [b.units for b in books]
    assert [b.questions for b in again] == [b.questions for b in books]


def test_books_filter_and_full_coverage(data_dir, fresh_dirs):
    cfg = CorpusConfig(datasets=("gutenberg",), books=("46", "gutenberg:219"), max_unit_words=5000)
    books = corpus.load_corpus(cfg, use_cache=False)
    assert [b.book_id for b in books] == ["gutenberg:46", "gutenberg:219"]
    carol = books[0]
    assert carol.title.startswith("A Christmas Carol")
    check_unit_coverage(carol.text, carol.paragraphs, carol.units, carol.meta["structure"]["dropped"])
    assert carol.units[0].title == "PREFACE"  # the title page and contents are dropped, not units
    assert [u.unit_id for u in carol.units[:3]] == ["u0000", "u0001.1", "u0001.2"]
    with pytest.raises(corpus.CorpusError, match="not found"):
        corpus.load_corpus(CorpusConfig(datasets=("gutenberg",), books=("nope",)), use_cache=False)
    from litseg_nb.config import ConfigError

    with pytest.raises(ConfigError, match="CorpusConfig.datasets: 'imdb'"):  # rejected when the config is built
        CorpusConfig(datasets=("imdb",))


def test_statistics_columns_and_totals(data_dir, fresh_dirs):
    cfg = CorpusConfig(datasets=("gutenberg",), books=("46",), max_unit_words=5000)
    books = corpus.load_corpus(cfg, use_cache=False)
    stats = corpus.corpus_statistics(books, tokenizer=lambda t: len(t) // 4)
    assert list(stats["book_id"]) == ["gutenberg:46", "TOTAL gutenberg"]
    row = stats.iloc[0]
    assert row["narrative_units"] == 6 and row["units"] == len(books[0].units)
    assert row["units_structure"] + row["units_recursive"] == row["units"]
    assert row["split_method"] == "structure+recursive"
    assert row["tokens"] > row["words"] > 25_000
    assert stats.iloc[1]["sentences"] == row["sentences"]


def test_book_json_round_trip(data_dir, fresh_dirs):
    books = corpus.load_corpus(CorpusConfig(datasets=("gutenqa",), max_unit_words=2000), use_cache=False)
    emma = books[0]
    assert {u.split for u in emma.units} <= {"dataset", "recursive"}
    back = corpus.book_from_json(corpus.book_to_json(emma))
    assert back.units == emma.units and back.questions == emma.questions and back.text == emma.text
