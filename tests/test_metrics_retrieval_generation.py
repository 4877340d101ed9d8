"""Retrieval and answer metrics against hand-computed values."""
import math

import pytest

from litseg_nb.metrics.generation import (exact_match, load_wordnet, meteor, meteor_variant, rouge_l,
                                          token_f1)
from litseg_nb.metrics.retrieval import (dcg_at_k, is_relevant,
                                         normalize_for_match, summarize_scopes)


def test_no_hit_scores_zero_everywhere():
    s = summarize_scopes([None], [False])
    assert s["MRR@20"] == 0 and s["Hit@20"] == 0 and s["DCG@20"] == 0 and s["Recall@20"] == 0


def test_rank_one_hit_scores_one_everywhere():
    s = summarize_scopes([1], [True])
    assert s["MRR@20"] == 1 and s["Hit@1"] == 1 and s["DCG@1"] == 1 and s["DCG@20"] == 1 and s["Recall@1"] == 1


def test_mixed_ranks_hand_computed():
    s = summarize_scopes([1, 3, None, 2], [True, True, False, True])
    assert s["MRR@20"] == pytest.approx((1 + 1 / 3 + 0 + 1 / 2) / 4)
    assert (s["Hit@1"], s["Hit@2"], s["Hit@5"]) == (0.25, 0.5, 0.75)
    assert s["DCG@2"] == pytest.approx((1 + 1 / math.log2(3)) / 4)
    assert s["DCG@5"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(4)) / 4)
    assert s["Recall@5"] == s["Hit@5"]
    assert s["n_no_relevant_chunk"] == 1 and s["MRR@20_answerable"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)


def test_lumberchunker_published_dcg_is_consistent_with_first_hit_rule():
    # LumberChunker's table: Semantic Recall@1 = 29.50, Recall@2 = 38.70 -> DCG@2 = 35.31
    assert 29.50 + (38.70 - 29.50) * dcg_at_k(2, 2) == pytest.approx(35.31, abs=0.01)


def test_several_relevant_chunks_only_first_counts():
    ranked = ["nothing here", "She said Harriet Smith was there", "harriet smith again"]
    r = next(i for i, t in enumerate(ranked, 1) if is_relevant(t, "Harriet Smith"))
    assert r == 2
    assert summarize_scopes([r], [True])["DCG@5"] == pytest.approx(1 / math.log2(3))


def test_unicode_quotes_and_spaces_in_evidence():
    text = 'He said, "It is Mr. Knightley\'s\n  horse" \u2014 and left.'
    assert is_relevant(text, "\u201cIt is Mr.\u00a0Knightley\u2019s horse\u201d")
    assert is_relevant(text, "MR. KNIGHTLEY'S HORSE\" - AND")
    assert not is_relevant(text, "Mr. Elton's horse")
    assert normalize_for_match("\u2018a\u2019\u00a0 B") == "'a' b"
    with pytest.raises(ValueError):
        is_relevant(text, "  ")


def test_unanswerable_with_hit_is_an_error():
    with pytest.raises(ValueError):
        summarize_scopes([1], [False])


def test_exact_match_and_f1():
    assert exact_match("Emma Woodhouse.", ["emma woodhouse"]) == 1.0
    assert exact_match("The Emma", "emma") == 1.0
    assert exact_match("Emma W", "emma") == 0.0
    # "cat sat on mat" vs "cat on mat": P = 3/4, R = 1
    assert token_f1("the cat sat on the mat", "a cat on a mat") == pytest.approx(2 * 0.75 / 1.75)
    assert token_f1("x y", ["z", "y"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # best reference


def test_empty_answers():
    assert exact_match("", "Emma") == 0.0 and token_f1("", "Emma") == 0.0
    assert rouge_l("", "Emma") == 0.0 and meteor("", "Emma") == 0.0
    assert token_f1("", "") == 1.0 and exact_match("", "") == 1.0
    with pytest.raises(ValueError):
        token_f1("a", [])


def test_rouge_l_hand_computed():
    # LCS("the cat sat", "the cat was sat") = 3; P = 3/3, R = 3/4
    assert rouge_l("the cat was sat", "the cat sat") == pytest.approx(2 * 1 * 0.75 / 1.75)


def test_meteor_identical_hand_computed():
    # P = R = 1, one chunk over 3 matches: penalty 0.5 * (1/3)^3
    assert meteor("Emma loves Knightley", "emma loves knightley") == pytest.approx(1 - 0.5 / 27, abs=1e-4)


def test_meteor_uses_wordnet_synonyms_when_available():
    wn, desc = load_wordnet()
    if wn is None:
        pytest.skip(desc)
    assert "synonym" in meteor_variant()
    # couch.n.01 has the lemma "sofa": all four words match in one chunk
    assert meteor("the sofa is red", "the couch is red") == pytest.approx(1 - 0.5 / 64, abs=1e-4)
