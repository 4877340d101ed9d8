"""The benchmark's scoring core: budget-matched hits, the LiteraryQA answer rule, paired differences, tiers."""
import numpy as np
import pytest

from litseg_nb.rag.benchmark import (answer_form, answer_relevance_rule, budget_hit_matrix, budget_hits, kept_answers,
                                     paired_difference, passage_has_answer, ranking_table, tokens_to_first_relevant)


def test_budget_hits_hand_computed():
    # chunks of 300, 200, 100, 500 tokens; the third is relevant. Running totals 300, 500, 600:
    # B=256: 300 > 256, nothing taken -> miss; B=512: 300+200 = 500 taken, +100 = 600 > 512 -> miss;
    # B=1024 and B=2048: 600 <= B, the relevant chunk is taken -> hit.
    counts, rel = [300, 200, 100, 500], [False, False, True, False]
    assert tokens_to_first_relevant(counts, rel) == 600
    assert budget_hits(counts, rel) == {256: False, 512: False, 1024: True, 2048: True}


def test_budget_hits_long_first_chunk_takes_nothing():
    # a relevant first chunk of 300 tokens: 300 > 256 takes nothing at B=256; 300 <= 512 is a hit at B=512
    assert budget_hits([300, 10], [True, False], budgets=(256, 512)) == {256: False, 512: True}


def test_budget_hits_stop_at_first_chunk_that_overflows():
    # 100 taken, +400 = 500 > 256 stops the walk at B=256 although 100 + 50 (the relevant third) would fit;
    # B=512: 500 taken, +50 = 550 > 512 -> miss; B=1024: 550 -> hit
    assert budget_hits([100, 400, 50], [False, False, True], budgets=(256, 512, 1024)) == \
        {256: False, 512: False, 1024: True}
    assert budget_hits([100, 200], [False, False]) == {256: False, 512: False, 1024: False, 2048: False}


def test_budget_hit_matrix_matches_per_question_scorer():
    ranked = [([300, 200, 100], [False, False, True]), ([300, 10], [True, False]), ([5], [False])]
    needed = [tokens_to_first_relevant(c, r) for c, r in ranked]
    mat = budget_hit_matrix(needed, (256, 512, 1024))
    assert mat.tolist() == [[False, False, True], [False, True, True], [False, False, False]]
    with pytest.raises(ValueError):
        tokens_to_first_relevant([1, 2], [True])


BOOK = ("Mr. Knightley walked to Hartfield. Knightley saw the \u201csilver  locket\u201d on the table. "
        "Knightley, Knightley and Knightley again. He walked to the garden at night.")


def test_answer_rule_on_a_toy_book():
    keep, reason = answer_relevance_rule(BOOK, "The SILVER locket.")  # case, article, end punctuation: 1 occurrence
    assert keep and "(2 words, 1 occurrence" in reason
    assert answer_form("The “Silver Locket.” ") == "silver locket"
    keep, reason = answer_relevance_rule(BOOK, "he walked to the garden at night")  # 7 words > 5
    assert not keep and reason.startswith("too long")
    keep, reason = answer_relevance_rule(BOOK, "Knightley")  # 5 occurrences > 3
    assert not keep and reason.startswith("too frequent (5")
    assert answer_relevance_rule(BOOK, "Knightley", max_occurrences=5)[0]
    assert answer_relevance_rule(BOOK, "a golden ring") == (False, "absent from the book")
    assert answer_relevance_rule(BOOK, "Hart") == (False, "absent from the book")  # whole words only
    assert kept_answers(BOOK, ["Knightley", "silver locket"]) == ("silver locket",)


def test_passage_has_answer_uses_the_same_normalisation():
    assert passage_has_answer("He saw the SILVER\n\u2018locket\u2019.", "silver 'locket'")
    assert passage_has_answer("He saw a silver locket.", "The silver locket.")
    assert not passage_has_answer("He saw the silverlocket.", "silver locket")
    assert not passage_has_answer("anything", "  ")


def _toy_scores():
    # 4 books x 10 questions; d = 0.5 + (+e, -e) pairs, so the true (and sample) mean difference is exactly 0.5
    noise = np.repeat(np.linspace(0.1, 0.4, 20), 2) * np.tile([1, -1], 20)
    ref = np.zeros(40)
    return {"recursive": ref, "m": ref + 0.5 + noise, "same": ref.copy()}, np.repeat(["b1", "b2", "b3", "b4"], 10)


def test_bootstrap_interval_contains_true_difference_and_is_seeded():
    scores, books = _toy_scores()
    t = paired_difference(scores, books, n_boot=500, n_perm=500, seed=0).set_index("method")
    m = t.loc["m"]
    assert m["mean_difference"] == pytest.approx(0.5)
    assert 0 < m["ci_low"] < 0.5 < m["ci_high"]
    assert m["n_questions"] == 40 and m["n_books"] == 4
    again = paired_difference(scores, books, n_boot=500, n_perm=500, seed=0).set_index("method")
    assert again.equals(t)
    other = paired_difference(scores, books, n_boot=500, n_perm=500, seed=1).set_index("method")
    assert other.loc["m", "ci_low"] != m["ci_low"]


def test_permutation_p_value():
    scores, books = _toy_scores()
    t = paired_difference(scores, books, n_boot=100, n_perm=2000, seed=0).set_index("method")
    assert t.loc["m", "p_value"] < 0.01
    assert t.loc["same", "p_value"] == 1.0
    assert t.loc["same", "ci_low"] == t.loc["same", "ci_high"] == 0.0


def test_paired_difference_needs_same_questions():
    scores, books = _toy_scores()
    scores["short"] = np.zeros(39)
    with pytest.raises(ValueError, match="'short'"):
        paired_difference(scores, books, n_boot=10, n_perm=10)
    with pytest.raises(ValueError, match="reference"):
        paired_difference({"m": np.zeros(3)}, ["b"] * 3)


def test_tiers_never_share_a_ranking():
    rows = [{"tier": "A", "method": "recursive", "hit@512": 0.4}, {"tier": "A", "method": "token", "hit@512": 0.6},
            {"tier": "B", "method": "litseg", "hit@512": 0.9}]
    with pytest.raises(ValueError, match="tiers A and B"):
        ranking_table(rows, "A", by="hit@512")
    with pytest.raises(ValueError, match="tiers B and A"):
        ranking_table(rows, "B", by="hit@512")
    t = ranking_table(rows[:2], "A", by="hit@512")
    assert t["method"].tolist() == ["token", "recursive"] and t["rank"].tolist() == [1, 2]
