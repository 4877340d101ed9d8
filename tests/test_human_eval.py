"""Human-evaluation statistics against published worked examples, and the sheet round trip."""
import csv

import numpy as np
import pytest

from litseg_nb.human_eval import (DIMENSIONS, RatingSheetError, cohen_kappa, export_rating_sheets,
                                  fleiss_kappa, icc_2_1, import_ratings, labels_to_counts,
                                  pairwise_agreement_table, raw_agreement, summarize_ratings)
from litseg_nb.metrics.pairwise import pairwise_win_rate
from litseg_nb.schema import Book, Chunk

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
