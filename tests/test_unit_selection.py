"""Unit selection under a cap: small profiles keep units that hold GutenQA evidence."""
import pytest

from litseg_nb.corpus import cap_units, load_corpus, units_with_evidence
from litseg_nb.config import CorpusConfig, StageConfig
from litseg_nb.schema import Book, Question, Sentence, Unit


def _toy_book():
    text = "Alpha one. Beta two. Gamma three. Delta four."
    spans = [(0, 10), (11, 20), (21, 33), (34, 45)]
    units = [Unit("b", f"u{i}", i, f"T{i}", a, e, (Sentence(1, a, e),)) for i, (a, e) in enumerate(spans)]
    qs = [Question("q1", "b", "?", ("x",), evidence="gamma THREE"), Question("q2", "b", "?", ("y",), evidence="nowhere")]
    return Book("b", "B", "gutenqa", text, units=units, questions=qs)


def test_questions_selection_prefers_evidence_units_then_fills_in_order():
    book = cap_units(_toy_book(), 2, "questions")
    assert [u.unit_id for u in book.units] == ["u0", "u2"]  # evidence unit u2 kept, filled with u0
    assert [u.unit_id for u in cap_units(_toy_book(), 2, "first").units] == ["u0", "u1"]
    with pytest.raises(ValueError, match="unknown unit_selection 'best' .* book b"):
        cap_units(_toy_book(), 2, "best")


def test_test_profile_emma_units_hold_evidence(data_dir):
    cfg = StageConfig.for_profile("test").corpus
    assert cfg.unit_selection == "questions"
    emma = [b for b in load_corpus(CorpusConfig(**{**cfg.to_dict(), "datasets": ("gutenqa",)})) if "Emma" in b.book_id][0]
    assert len(emma.units) == 2
    assert units_with_evidence(emma) == emma.units  # both kept units answer some question
