"""The benchmark's scoring core: budget-matched hits, the LiteraryQA answer rule, paired differences, tiers."""
import numpy as np
import pytest

from conftest import make_book
from litseg_nb.core.schema import Chunk, Question
from litseg_nb.rag.benchmark import (BenchQuestion, TierResult, answer_form, answer_relevance_rule, benchmark_questions,
                                     budget_hit_matrix, budget_hits, paired_difference, paired_table,
                                     pooled_vectors, ranking_table, score_tier, summary_table,
                                     tokens_to_first_relevant, verdict)


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


def test_a_passage_has_an_answer_after_the_same_normalisation():
    from litseg_nb.metrics.retrieval import normalize_for_match

    def has(passage, answer):
        return BenchQuestion("q", "literaryqa", "b", "?", (answer,)).relevant(normalize_for_match(passage))

    assert has("He saw the SILVER\n\u2018locket\u2019.", "silver 'locket'")
    assert has("He saw a silver locket.", "The silver locket.")
    assert not has("He saw the silverlocket.", "silver locket")


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


def _chunk(book, method, i, spans):
    text = " ".join(book.text[a:b] for a, b in spans)
    return Chunk(book.book_id, "u0000", f"{method}-{i}", method, 1, 1, list(spans), text, text)


def test_pooled_vectors_weight_sentences_by_overlapping_characters():
    book = make_book(units=1, n=3)
    s1, s2, s3 = book.units[0].sentences
    starts, ends = np.array([s1.start, s2.start, s3.start]), np.array([s1.end, s2.end, s3.end])
    vecs = np.eye(3, dtype=np.float32)
    half = (s2.end - s2.start) // 2
    chunks = [_chunk(book, "m", 0, [(s1.start, s2.start + half)]),  # sentence 1 whole, half of sentence 2
              _chunk(book, "m", 1, [(s3.start, s3.end)]),
              _chunk(book, "m", 2, [(s3.end + 5, s3.end + 9)])]  # past every sentence: no vector, counted
    out, missing = pooled_vectors(chunks, starts, ends, vecs)
    want = np.array([s1.end - s1.start, half, 0], dtype=float)
    assert np.allclose(out[0], want / np.linalg.norm(want))
    assert np.allclose(out[1], [0, 0, 1]) and not out[2].any() and missing == 1


class _BagEmbedder:
    """Hashed bag-of-words vectors: a question shares dimensions with the chunks that hold its words."""

    def encode(self, texts, kind="passage"):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(".", " ").split():
                out[i, sum(map(ord, w)) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class _Words:
    def count_many(self, texts):
        return [len(t.split()) for t in texts]


def test_score_tier_ranks_and_counts_tokens_on_a_toy_book():
    words = ["Emma walked.", "Harriet sang songs.", "The silver locket lay on the table.", "Rain fell."]
    book = make_book(units=1, n=4, sentence=lambda i, u, b: words[i - 1], dataset="gutenqa")
    sents = book.units[0].sentences
    sets = {"sentence": [_chunk(book, "sentence", i, [(s.start, s.end)]) for i, s in enumerate(sents)],
            "unit": [_chunk(book, "unit", 0, [(sents[0].start, sents[-1].end)])]}
    q = BenchQuestion("q1", "gutenqa", book.book_id, "Where was the silver locket?", ("silver locket",))
    rows, stats = score_tier("A", sets, [book], [q], _BagEmbedder(), _Words(), vectors="text")
    r = rows.set_index(["method", "mode"])
    for mode in ("dense", "bm25", "hybrid"):
        assert r.loc[("sentence", mode), "rank"] == 1 and r.loc[("sentence", mode), "tokens_needed"] == 7
        assert r.loc[("unit", mode), "rank"] == 1 and r.loc[("unit", mode), "tokens_needed"] == 14
    summ = summary_table(rows, stats, budgets=(8, 16)).set_index(["method", "mode"])
    # the one-sentence chunk fits 8 tokens; the whole unit (14 tokens) only 16: the budget tells them apart
    assert summ.loc[("sentence", "hybrid"), "hit@8"] == 1 and summ.loc[("unit", "hybrid"), "hit@8"] == 0
    assert summ.loc[("unit", "hybrid"), "hit@16"] == 1 and summ.loc[("unit", "hybrid"), "MRR@20"] == 1
    assert summ.loc[("unit", "hybrid"), "chunks"] == 1 and summ.loc[("sentence", "hybrid"), "mean_tokens"] == 3.5
    with pytest.raises(ValueError, match="tier"):
        score_tier("C", sets, [book], [q], _BagEmbedder(), _Words())


def test_benchmark_questions_apply_the_rule_and_report_every_literaryqa_question():
    book = make_book(units=1, n=2, sentence=lambda i, u, b: ["Knightley found the silver locket.",
                                                             "Knightley left. Knightley came. Knightley sat."][i - 1],
                     dataset="literaryqa")
    book.questions = [Question("a", book.book_id, "Who found it?", ("Knightley",), dataset="literaryqa"),
                      Question("b", book.book_id, "What was found?", ("the silver locket", "a locket of silver"),
                               dataset="literaryqa")]
    qs, report = benchmark_questions([book])
    assert [(q.qid, q.targets) for q in qs] == [("b", ("the silver locket",))]
    assert report["kept"].tolist() == [False, True] and report["why"][0].startswith("too frequent")
    assert qs[0].relevant("he found the silver locket.") and not qs[0].relevant("a silver-ish locket")


def _rows(diffs_by_dataset):
    import pandas as pd

    rows = []
    for ds, (n_books, ref_hits, m_hits) in diffs_by_dataset.items():
        for i, (a, b) in enumerate(zip(ref_hits, m_hits)):
            for m, hit in (("recursive", a), ("m", b)):
                rows.append({"tier": "A", "dataset": ds, "book_id": f"{ds}{i % n_books}", "qid": f"{ds}{i}",
                             "method": m, "mode": "hybrid", "rank": 1 if hit else None, "n_relevant": 1,
                             "tokens_needed": 100.0 if hit else float("inf")})
    return pd.DataFrame(rows)


def test_paired_table_per_dataset_and_pooled_with_question_counts():
    rows = _rows({"gutenqa": (1, [0] * 20, [1] * 20), "literaryqa": (4, [1, 0] * 6, [1, 0] * 6)})
    p = paired_table(rows, budget=512, n_boot=200, n_perm=200).set_index(["dataset", "score"])
    assert set(p.index) == {(d, s) for d in ("gutenqa", "literaryqa", "all") for s in ("hit@512", "MRR@20")}
    assert p.loc[("gutenqa", "hit@512"), "mean_difference"] == 1 and p.loc[("gutenqa", "hit@512"), "excludes_zero"]
    assert p.loc[("literaryqa", "MRR@20"), "mean_difference"] == 0 and not p.loc[("literaryqa", "MRR@20"),
                                                                                   "excludes_zero"]
    assert p.loc[("all", "hit@512"), "n_questions"] == 32 and p.loc[("all", "hit@512"), "n_books"] == 5
    with pytest.raises(ValueError, match=r"\['m'\] have no ranking"):  # a question m was not scored on
        paired_table(rows.drop(rows.index[(rows.method == "m") & (rows.qid == "gutenqa3")]), budget=512)
    res = TierResult("A", rows, None, None, p.reset_index(), "")
    text = verdict(res, "gutenqa", "hit@512")
    assert "better with a 95 % interval above 0: m (+1.00)" in text and "20 questions" in text




@pytest.mark.parametrize("argv, says", [(["--books", " , "], "names no book"),
                                        (["--books", "literaryqa:nosuch"], "nosuch")])
def test_retrieval_benchmark_cli_refuses_bad_books_in_one_line(argv, says, data_dir, fresh_dirs, capsys):
    from litseg_nb.cli import main

    assert main(["retrieval-benchmark", "--profile", "test", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[litseg_nb] retrieval-benchmark:") and says in err[0]


def test_retrieval_benchmark_cli_checks_the_outputs_folder_before_any_work(data_dir, tmp_path, monkeypatch, capsys):
    from litseg_nb.cli import main

    blocker = tmp_path / "outputs"
    blocker.write_text("a file where the outputs folder should be")
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(blocker))
    assert main(["retrieval-benchmark", "--profile", "test", "--books", "literaryqa:31976"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not writable" in err[0]
