"""Human-evaluation statistics against published worked examples, and the sheet round trip."""
import csv

import numpy as np
import pytest

from litseg_nb.evaluation.human_eval import (DIMENSIONS, RatingSheetError, cohen_kappa, export_rating_sheets,
                                  fleiss_kappa, icc_2_1, import_ratings, labels_to_counts,
                                  pairwise_agreement_table, raw_agreement, summarize_ratings)
from litseg_nb.metrics.pairwise import pairwise_win_rate
from litseg_nb.core.schema import Book, Chunk

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges; published ICC(2,1) = .29
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]

# The standard Fleiss' kappa worked example (10 subjects, 14 raters, 5 categories): kappa = 0.210
FLEISS_EXAMPLE = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                  [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_icc_shrout_fleiss_example():
    assert icc_2_1(SHROUT_FLEISS) == pytest.approx(0.29, abs=0.005)
    # exact value from the ANOVA table (BMS=11.24, JMS=32.49, EMS=1.02)
    assert icc_2_1(SHROUT_FLEISS) == pytest.approx(0.2898, abs=1e-3)


def test_icc_perfect_agreement_and_bad_input():
    assert icc_2_1([[1, 1], [3, 3], [5, 5]]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        icc_2_1([[1, 2, 3]])


def test_fleiss_published_example():
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(0.210, abs=0.001)
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 1], [2, 1]])  # unequal raters per item


def test_cohen_kappa_hand_computed():
    # 10 items: agree on 7 (4 yes-yes, 3 no-no); A says yes 6 times, B yes 5 times
    a = ["y", "y", "y", "y", "y", "y", "n", "n", "n", "n"]
    b = ["y", "y", "y", "y", "n", "n", "y", "n", "n", "n"]
    po, pe = 0.7, 0.6 * 0.5 + 0.4 * 0.5
    assert raw_agreement(a, b) == pytest.approx(po)
    assert cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))


def test_fleiss_equals_two_rater_form_via_labels():
    a, b = ["w", "t", "l", "w"], ["w", "l", "l", "w"]
    counts = labels_to_counts([a, b], categories=["w", "t", "l"])
    assert counts.tolist() == [[2, 0, 0], [0, 1, 1], [0, 0, 2], [2, 0, 0]]
    # hand: P_i = [1, 0, 1, 1] -> 0.75; p = [4/8, 1/8, 3/8] -> Pe = (16 + 1 + 9)/64
    pe = 26 / 64
    assert fleiss_kappa(counts) == pytest.approx((0.75 - pe) / (1 - pe))
    tab = pairwise_agreement_table({"A1": a, "A2": b, "A3": a})
    assert len(tab) == 3 and tab.loc[1, "raw_agreement"] == 1.0


def test_pairwise_win_rate_ties_are_half():
    # 3 instances x 2 annotators: (1 + 1)/2, (0.5 + 0)/2, (0.5 + 0.5)/2 -> mean = (1 + .25 + .5)/3
    r = pairwise_win_rate([["win", "win"], ["tie", "loss"], ["tie", "tie"]])
    assert r["win_rate"] == pytest.approx((1 + 0.25 + 0.5) / 3)
    assert r["tie_frac"] == pytest.approx(3 / 6) and r["loss_frac"] == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        pairwise_win_rate([["better"]])


def _toy():
    text = "One. Two. Three. Four. Five. Six."
    book = Book("b1", "Toy Book", "gutenqa", text)
    mk = lambda m, i, s, e: Chunk("b1", "u0", f"u0.c{i}", m, 1, 1, [(s, e)], text[s:e], text[s:e])
    chunks = {"alpha": [mk("alpha", 0, 0, 9), mk("alpha", 1, 10, 33)],
              "beta": [mk("beta", 0, 0, 16), mk("beta", 1, 17, 33)]}
    return book, chunks


def test_sheets_are_blinded_and_round_trip(tmp_path):
    book, chunks = _toy()
    paths = export_rating_sheets(chunks, {"b1": book}, tmp_path, n_per_method=2, raters=("r1", "r2"))
    assert paths["n_items"] == 4
    content = paths["sheets"]["r1"].read_text() + paths["html"]["r1"].read_text()
    assert "alpha" not in content and "beta" not in content  # blinded
    assert "Content Completeness" in paths["html"]["r1"].read_text()
    scores = {"r1": {"alpha": 4, "beta": 2}, "r2": {"alpha": 5, "beta": 2}}
    key = {r["item_id"]: r["method"] for r in csv.DictReader(paths["key"].open())}
    for rater in ("r1", "r2"):
        rows = list(csv.DictReader(paths["sheets"][rater].open()))
        for row in rows:
            for d in DIMENSIONS:
                row[d] = scores[rater][key[row["item_id"]]]
        with paths["sheets"][rater].open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    long = import_ratings(paths["sheets"], paths["key"])
    means, icc = summarize_ratings(long)
    m = means.set_index("method")
    assert m.loc["alpha", "overall"] == pytest.approx(4.5) and m.loc["beta", "content_completeness"] == 2
    assert set(icc.dimension) == set(DIMENSIONS) and (icc.n_raters == 2).all()


def test_import_rejects_bad_scores(tmp_path):
    book, chunks = _toy()
    paths = export_rating_sheets(chunks, {"b1": book}, tmp_path, n_per_method=1, raters=("r1",))
    rows = list(csv.DictReader(paths["sheets"]["r1"].open()))
    for row in rows:
        for d in DIMENSIONS:
            row[d] = "7"
    with paths["sheets"]["r1"].open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(RatingSheetError, match=r"r1.csv:2: content_completeness = 7.0 outside 1-5"):
        import_ratings(paths["sheets"], paths["key"])


def _two_dataset_chunks():
    from conftest import make_book
    from litseg_nb.core.schema import make_sentence_chunk

    g, lq = make_book("gutenqa:G", units=1, n=8, dataset="gutenqa"), make_book("literaryqa:L", units=1, n=8, dataset="literaryqa")
    sets = {m: [make_sentence_chunk(b, b.units[0], m, i, i + 1, i + 1) for b in (g, lq) for i in range(8)]
            for m in ("alpha", "beta")}
    return {g.book_id: g, lq.book_id: lq}, sets


def test_sheets_sample_n_chunks_per_method_on_each_dataset(tmp_path):
    """A.1: n = 100 chunks per strategy on EACH of GutenQA and LiteraryQA."""
    books, sets = _two_dataset_chunks()
    paths = export_rating_sheets(sets, books, tmp_path, n_per_method=3, raters=("r1", "r2"))
    key = list(csv.DictReader(paths["key"].open()))
    counts = {}
    for r in key:
        counts[(r["method"], r["dataset"])] = counts.get((r["method"], r["dataset"]), 0) + 1
    assert counts == {(m, ds): 3 for m in ("alpha", "beta") for ds in ("gutenqa", "literaryqa")}


def test_filled_human_sheets_give_tables_1_and_9_and_agreement(fresh_dirs):
    from litseg_nb.evaluation.human_eval import evaluate_rating_sheets, filled_sheets_dir

    books, sets = _two_dataset_chunks()
    from litseg_nb.core.paths import outputs_dir

    paths = export_rating_sheets(sets, books, outputs_dir("test") / "artifacts" / "he", n_per_method=3)
    assert evaluate_rating_sheets("test", "segment_quality", paths)["source"] == "none"  # nothing filled, no judge
    key = {r["item_id"]: r for r in csv.DictReader(paths["key"].open())}
    folder = filled_sheets_dir("test", "segment_quality")
    folder.mkdir(parents=True)
    for k, rater in enumerate(("rater1", "rater2")):
        rows = list(csv.DictReader(paths["sheets"][rater].open()))
        for row in rows:
            base = 4 if key[row["item_id"]]["method"] == "alpha" else 2
            for d in DIMENSIONS:
                row[d] = base + (k if d == "boundary_placement" else 0)
        with (folder / f"{rater}.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    res = evaluate_rating_sheets("test", "segment_quality", paths, backend=None)
    assert res["source"] == "human ratings"
    t1 = res["table1"].set_index(["dataset", "method"])
    assert t1.loc[("literaryqa", "alpha"), "content_completeness"] == 4
    assert t1.loc[("gutenqa", "beta"), "boundary_placement"] == pytest.approx(2.5)
    assert t1.loc[("gutenqa", "beta"), "overall"] == pytest.approx((2 + 2 + 2.5) / 3)
    t9 = res["table9"].set_index(["dataset", "dimension"])
    assert t9.loc[("gutenqa", "content_completeness"), "icc_2_1"] == pytest.approx(1.0)
    ag = res["agreement"].set_index(["dataset", "dimension"])
    assert ag.loc[("gutenqa", "content_completeness"), "cohen_kappa"] == pytest.approx(1.0)
    assert ag.loc[("gutenqa", "boundary_placement"), "raw_agreement"] == 0.0
    (folder / "rater2.csv").unlink()  # one rater's sheet missing: an error, never a partial table
    with pytest.raises(RatingSheetError, match="rater2"):
        evaluate_rating_sheets("test", "segment_quality", paths)


def test_llm_filled_copy_is_labelled_and_scored_with_the_a2_rubric(fresh_dirs):
    from litseg_nb.evaluation.human_eval import LLM_SOURCE, evaluate_rating_sheets
    from fakes import ScriptedBackend
    from litseg_nb.core.paths import outputs_dir

    books, sets = _two_dataset_chunks()
    paths = export_rating_sheets(sets, books, outputs_dir("test") / "artifacts" / "he", n_per_method=2)
    temps, systems = [], []

    def rater(reply):
        def fn(conv):
            systems.append(conv[0]["content"])
            return reply
        return fn

    # two DIFFERENT models as the two raters: each greedy, each its own scores
    r1 = ScriptedBackend(reply_fn=rater('{"content_completeness": 5, "topical_coherence": 4, "boundary_placement": 5}'),
                         model_id="rater-a")
    r2 = ScriptedBackend(reply_fn=rater('{"content_completeness": 3, "topical_coherence": 4, "boundary_placement": 1}'),
                         model_id="rater-b")
    for be in (r1, r2):
        orig = be.chat
        be.chat = lambda convs, params, tag, _o=orig: temps.append(params.temperature) or _o(convs, params, tag)
    res = evaluate_rating_sheets("test", "segment_quality", paths, backend=[r1, r2], llm_max_items=4)
    assert res["source"] == LLM_SOURCE and res["info"]["n_items"] == 4
    assert res["info"]["models"] == {"rater1": "rater-a", "rater2": "rater-b"} and not res["info"]["same_model"]
    assert "different models: rater-a, rater-b" in res["info"]["raters_label"]
    t1 = res["table1"]  # the mean of the two raters per item
    assert (t1["content_completeness"] == 4).all() and (t1["topical_coherence"] == 4).all()
    assert (t1["boundary_placement"] == 3).all()
    assert set(temps) == {0.0}  # two models: both greedy
    # the A.2 text verbatim, not the E.3 rubric (the GRPO reward)
    assert all("Boundary Placement. Whether the cut is made at a natural transition point" in s for s in systems)
    assert not any("Unity of Action" in s for s in systems)
    filled = next(iter(res["info"]["raters"]))
    assert LLM_SOURCE in (outputs_dir("test") / "artifacts" / "he" / "llm_filled" / f"{filled}.csv").read_text()


def test_one_model_for_both_raters_says_so_and_samples_the_second(fresh_dirs):
    from litseg_nb.evaluation.human_eval import evaluate_rating_sheets
    from fakes import ScriptedBackend
    from litseg_nb.core.paths import outputs_dir

    books, sets = _two_dataset_chunks()
    paths = export_rating_sheets(sets, books, outputs_dir("test") / "artifacts" / "he", n_per_method=2)
    temps = []
    be = ScriptedBackend(reply_fn=lambda c: "no scores here", model_id="only-model")
    orig = be.chat
    be.chat = lambda convs, params, tag: temps.append(params.temperature) or orig(convs, params, tag)
    res = evaluate_rating_sheets("test", "segment_quality", paths, backend=be, llm_max_items=4, retries=1)
    assert res["info"]["same_model"] and "the SAME model only-model" in res["info"]["raters_label"]
    assert sorted(set(temps)) == [0.0, 0.7]  # rater 1 greedy, rater 2 (same model) sampled; retries sampled
    assert res["info"]["n_neutral"] == 8  # unreadable replies: the neutral 3, counted
    assert (res["table1"]["content_completeness"] == 3).all()


def test_pairwise_sheets_round_trip_to_kappa_fleiss_and_heatmap(tmp_path):
    from litseg_nb.evaluation.human_eval import (export_pairwise_sheets, import_pairwise_verdicts, pairwise_agreement,
                                      plot_agreement_heatmap)

    items = [{"dataset": ds, "qid": f"{ds}{i}", "target": "TGT", "opponent": "OPP", "context": "ctx",
              "question": "q?", "reference": "r", "target_answer": "good", "other_answer": "bad"}
             for ds in ("gutenqa", "literaryqa") for i in range(6)]
    paths = export_pairwise_sheets(items, tmp_path)
    assert sorted(paths["sheets"]) == ["A1", "A2", "A3", "A4", "A5"]  # B.1: 5 on GutenQA, 3 on LiteraryQA
    assert "good" in paths["sheets"]["A1"].read_text() and "TGT" not in paths["sheets"]["A1"].read_text()
    for a, p in paths["sheets"].items():
        rows = list(csv.DictReader(p.open()))
        for r in rows:  # every annotator prefers the target's answer, except A5 who calls everything a tie
            r["verdict"] = "Tie" if a == "A5" else ("A" if r["response_a"] == "good" else "B")
        with p.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    long = import_pairwise_verdicts(paths["sheets"], paths["key"])
    assert len(long) == 6 * 5 + 6 * 3
    wins, pairs, fleiss = pairwise_agreement(long)
    w = wins.set_index("dataset")
    assert w.loc["literaryqa", "win_rate"] == 1.0 and w.loc["gutenqa", "win_rate"] == pytest.approx(0.9)
    lq = pairs[pairs.dataset == "literaryqa"]
    assert len(lq) == 3 and (lq["raw_agreement"] == 1.0).all()
    assert len(pairs[pairs.dataset == "gutenqa"]) == 10
    assert (pairs[(pairs.dataset == "gutenqa") & (pairs.annotator_b == "A5")]["raw_agreement"] == 0).all()
    fig = plot_agreement_heatmap(pairs, fleiss, "gutenqa", "test")
    assert "Fleiss" in fig.axes[0].get_title()


def test_llm_filled_pairwise_copy_drops_items_without_a_verdict(fresh_dirs, tmp_path):
    from litseg_nb.evaluation.human_eval import LLM_SOURCE, evaluate_pairwise_sheets, export_pairwise_sheets
    from fakes import ScriptedBackend

    items = [{"dataset": "literaryqa", "qid": f"q{i}", "target": "T", "opponent": "O", "context": f"ctx{i}",
              "question": "q?", "reference": "r", "target_answer": "good", "other_answer": "bad"} for i in range(4)]
    paths = export_pairwise_sheets(items, tmp_path)
    # the judge never answers item ctx3 readably; otherwise it prefers "good"
    be = ScriptedBackend(reply_fn=lambda conv: "no idea" if "ctx3" in conv[1]["content"] else
                         ("Verdict: A" if conv[1]["content"].index("good") < conv[1]["content"].index("bad") else "Verdict: B"))
    res = evaluate_pairwise_sheets("test", paths, be, llm_max_items=0)
    assert res["source"] == LLM_SOURCE and res["info"]["n_items"] == 3 and res["info"]["n_dropped"] == 1
    assert res["win_rates"].iloc[0]["win_rate"] == 1.0 and (res["pairs"]["cohen_kappa"].notna()).all()


def test_icc_of_a_single_rated_item_is_nan_with_its_counts_not_an_error():
    """A tiny profile can leave one rated item in a dataset: Table 9's ICC is NaN there (n_items says
    why), the Table 1 means are still computed, and the notebook does not stop."""
    import pandas as pd

    long = pd.DataFrame([{"item_id": "i1", "rater": r, "method": "alpha", "dimension": d, "score": s}
                         for r, s in (("r1", 4), ("r2", 5)) for d in DIMENSIONS])
    means, icc = summarize_ratings(long)
    assert icc["icc_2_1"].isna().all() and (icc.n_items == 1).all() and (icc.n_raters == 2).all()
    assert means.set_index("method").loc["alpha", DIMENSIONS[0]] == pytest.approx(4.5)
