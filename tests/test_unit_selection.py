"""Unit selection under a cap: small profiles keep units that hold GutenQA evidence."""
import pytest

from litseg_nb.corpus import cap_units, load_corpus, question_cover
from litseg_nb.config import CorpusConfig, StageConfig
from litseg_nb.core.schema import Book, Question, Sentence, Unit


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
    assert all(question_cover(emma, u) for u in emma.units)  # both kept units answer some question


# ---------------------------------------------------------------- one selection for every LLM method
from litseg_nb.config import PROFILES, UnitSelection  # noqa: E402
from litseg_nb.corpus import SelectionError, question_cover, select_units  # noqa: E402


def _toy_books():
    b = _toy_book()
    qs = [Question("q3", "b", "?", ("z",), evidence="alpha one"), Question("q4", "b", "?", ("w",), evidence="Beta")]
    b.questions = b.questions + qs
    return [b]


def test_select_units_strategies_caps_and_cover():
    books = _toy_books()
    ids = lambda pairs: [u.unit_id for _, u in pairs]  # noqa: E731
    assert ids(select_units(books, UnitSelection())) == ["u0", "u1", "u2", "u3"]
    assert ids(select_units(books, UnitSelection(max_units=2))) == ["u0", "u1"]
    # evidence units first (u0, u1, u2 hold q3, q4, q1), then corpus order in the result
    assert ids(select_units(books, UnitSelection(strategy="questions", max_units=2))) == ["u0", "u1"]
    assert ids(select_units(books, UnitSelection(strategy="questions", max_units=3))) == ["u0", "u1", "u2"]
    assert ids(select_units(books, UnitSelection(min_questions=2))) == ["u0", "u1"]
    assert ids(select_units(books, UnitSelection(units=("b/u3", "b/u1")))) == ["u1", "u3"]
    assert question_cover(books[0], books[0].units[2]) == {"q1"}
    with pytest.raises(SelectionError, match="only 3 question"):
        select_units(books, UnitSelection(min_questions=4))
    with pytest.raises(SelectionError, match="b/u9"):
        select_units(books, UnitSelection(units=("b/u9",)))
    with pytest.raises(SelectionError, match="matches no unit"):
        select_units(books, UnitSelection(books=("nosuch",)))


@pytest.mark.parametrize("profile", PROFILES)
def test_every_llm_stage_shares_one_selection(profile):
    from litseg_nb.chunkers.config import BaselinesConfig
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.litseg.config import LitSegConfig
    from litseg_nb.rag.config import RagConfig

    sels = {c.__name__: c.for_profile(profile).selection for c in (LitSegConfig, LiteConfig, BaselinesConfig, RagConfig)}
    assert len(set(sels.values())) == 1, sels


def test_smoke_selection_covers_two_questions_with_the_fewest_emma_units(data_dir):
    """Smoke's selection (2 questions): the fewest Emma units holding
    >= 2 questions' evidence, the same units for every stage."""
    from litseg_nb.chunkers.config import BaselinesConfig
    from litseg_nb.litseg.config import LitSegConfig

    lit = LitSegConfig.for_profile("smoke")
    pairs = select_units(load_corpus(lit.corpus), lit.selection)
    covered = set().union(*(question_cover(b, u) for b, u in pairs))
    assert len(covered) >= 2 and {b.book_id for b, _ in pairs} == {"gutenqa:Emma_-_Jane_Austen"}
    assert all(question_cover(b, u) for b, u in pairs)  # no unit without evidence
    assert len(pairs) == 2 and sum(u.n_sentences for _, u in pairs) < 30  # affordable on the CPU
    base = BaselinesConfig.for_profile("smoke")  # the LLM baselines pick the very same units
    same = select_units(load_corpus(base.corpus), base.selection)
    assert [(b.book_id, u.unit_id) for b, u in same] == [(b.book_id, u.unit_id) for b, u in pairs]


def test_the_two_word_caps_have_their_own_names_and_a_real_none():
    """``CorpusConfig.max_unit_words`` is the paper's split cap n (None = never split);
    the selection's length filter is ``UnitSelection.skip_units_over_words`` (None = any length)."""
    from litseg_nb.config import ConfigError, CorpusConfig, UnitSelection
    from litseg_nb.preprocess.structure import build_units

    assert UnitSelection().skip_units_over_words is None and CorpusConfig(max_unit_words=None).max_unit_words is None
    with pytest.raises(ConfigError, match="max_unit_words is now skip_units_over_words"):
        UnitSelection.replace(UnitSelection(), max_unit_words=5)
    with pytest.raises(ConfigError, match="below the minimum"):
        UnitSelection(skip_units_over_words=0)
    text = " ".join(f"Word{i} is here." for i in range(400))
    whole = build_units("b", text, [(0, len(text))], None)
    assert len(whole) == 1 and len(build_units("b", text, [(0, len(text))], 300)) > 1


def test_question_cover_is_the_relevance_test_of_every_question_on_every_emma_unit(data_dir):
    """``question_cover`` normalises a unit once for all questions (it used to normalise the unit once per
    question, ~60 s of notebook 04): the same sets as ``is_relevant`` asked question by question."""
    from litseg_nb.config import CorpusConfig
    from litseg_nb.metrics.retrieval import is_relevant

    emma, = [b for b in load_corpus(CorpusConfig(datasets=("gutenqa",))) if "Emma" in b.book_id]
    slow = {u.unit_id: {q.qid for q in emma.questions if q.evidence and is_relevant(u.text(emma.text), q.evidence)}
            for u in emma.units}
    assert {u.unit_id: question_cover(emma, u) for u in emma.units} == slow
    assert sum(map(len, slow.values())) >= 25  # the evidence of (nearly) all 30 questions is found
    book = _toy_book()
    book.questions = book.questions + [Question("q9", "b", "?", ("z",), evidence="  \u00ad ")]
    with pytest.raises(ValueError, match="q9 has an empty evidence"):
        question_cover(book, book.units[0])
