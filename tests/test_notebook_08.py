import pandas as pd
import pytest

from litseg_nb.evaluation.efficiency import load_usage


@pytest.mark.slow
def test_notebook_08_runs_in_test_profile(notebook_pipeline):
    tables = notebook_pipeline("08") / "tables"  # after 02-04: LitSeg, LitSeg-Lite and the baselines ran
    cost = pd.read_csv(tables / "08_llm_cost.csv")
    assert {"method", "calls", "prompt_tokens_per_1k_sent", "seconds_per_1k_sent"} <= set(cost.columns)
    usage = load_usage("test")
    assert {"litseg", "litseg-lite", "lumber", "margin"} <= set(usage["method"])  # never an empty ledger
    assert (cost["calls"] > 0).all() and len(cost)
    # every method that recorded usage earlier in this session appears in the cost table
    assert set(usage["method"]) == set(cost["method"])
    assert cost.set_index("method").loc["litseg-student", "sentences"] > 0  # notebook 08's own chunk set
    walls = pd.read_csv(tables / "08_notebook_wall_times.csv")
    assert list(walls.columns) == ["notebook", "seconds", "status", "finished", "ran_beside", "torch_threads"]
    # the tests run notebooks one at a time (logs/schedule.json): nothing ran beside another
    assert walls["ran_beside"].astype("string").fillna("").eq("").all(), walls
    assert (tables / "08_llm_cost.md").read_text().startswith("**08_llm_cost** — profile=test")
    # §4.4 from the ledgers: same units, ratios beside the paper's, hardware and models named
    from litseg_nb.evaluation.efficiency import PAPER_COLUMNS

    paper = pd.read_csv(tables / "08_ledger_efficiency.csv")
    assert list(paper.columns) == PAPER_COLUMNS
    # 02-04 ran before: all three methods, measured on the same units, only their segmentation work
    # + LitSeg's three stages on the student's model (teacher-size control; one model in `test`: cached)
    assert set(paper["method"]) == {"litseg", "litseg-lite", "lumber", "litseg-student"} and paper["same_units"].all()
    assert (paper["calls"] > 0).all() and (paper["sentences"] == paper["sentences"].iloc[0]).all()
    lit = usage[(usage["method"] == "litseg") & (usage["notebook"] == "02")]
    assert paper.set_index("method").loc["litseg", "calls"] == lit["calls"].sum()  # no calibration/train rows
    ratios = pd.read_csv(tables / "08_ledger_ratios.csv")
    assert list(ratios["paper (end-to-end seconds)"]) == [0.37, 0.37, 0.70]
    assert ratios["denominator"].str.contains("student's model").sum() == 1
    md = (tables / "08_ledger_ratios.md").read_text()
    assert "hardware: " in md and "LitSeg (teacher)=" in md and "LitSeg-Lite (student)=" in md
    assert "§4.4 units: every unit all three methods segmented (the profile's evaluation set)" in md
    assert "not the §4.4 measurement" in md

    # §4.4 measured side by side: one process, one engine per model, interleaved, same units, same batching,
    # cache bypassed; `test`'s teacher and student are one model in two configurations (max_model_len): LitSeg
    # runs on each; hf serves Lite merged only (no LoRA row)
    from litseg_nb.evaluation.efficiency import PAIRED_COLUMNS

    methods = ["litseg", "litseg-student", "lumber", "litseg-lite"]
    passes = pd.read_csv(tables / "08_paired_passes.csv")
    assert set(passes["method"]) == set(methods)
    assert passes["repeat"].nunique() == 3 and (passes["cache_hits"] == 0).all() and (passes["wall_s"] > 0).all()
    assert passes["prefix_cache_reset"].all()  # hf: each pass starts with an empty prefix store
    # interleaved: forward order in block 0, reversed in block 1
    order = lambda b: list(passes[passes["block"] == b].sort_values("position")["method"])  # noqa: E731
    assert order(0) == methods and order(1) == methods[::-1]
    starts = pd.read_csv(tables / "08_paired_engine_starts.csv")  # hf engines stay loaded: one start each
    assert sorted(starts["engine"]) == ["lite", "student", "teacher"] and (starts["start_s"] > 0).all()
    # the same units for every method in every block, and the same batching (all of them in one call)
    assert passes.groupby("block")["sentences"].nunique().eq(1).all()
    assert passes.groupby("block")["units"].nunique().eq(1).all()
    assert (passes["max_concurrency"] == passes["units"]).all()
    eff = pd.read_csv(tables / "08_paper_efficiency.csv")
    assert list(eff.columns) == PAIRED_COLUMNS and set(eff["method"]) == set(methods)
    assert (eff["max_concurrency"] == eff["units"]).all() and (eff["mean_concurrency"] > 0).all()
    pr = pd.read_csv(tables / "08_paper_ratios.csv").set_index("ratio")
    assert pr.index[0] == "litseg-lite / litseg" and pr["quantity"].iloc[0].startswith("HEADLINE")
    assert pr.loc["litseg-lite / litseg", "denominator_model"].endswith("(teacher: LitSeg's 3 stages)")
    assert pr.loc["litseg-lite-lora / litseg-lite", "note"].startswith("not measured")
    pr = pr[pr["note"].isna()]  # the measured rows
    assert list(pr["paper (end-to-end seconds)"].fillna(-1)) == [0.37, -1, 0.70]
    for col in ("wall_ratio_median", "wall_ratio_min", "wall_ratio_max", "wall_ratio_iqr",
                "computed_prefill_tokens_ratio_median", "prompt_tokens_ratio_median", "load_avg_mean"):
        assert pr[col].notna().all(), col
    assert (pr["wall_ratio_min"] <= pr["wall_ratio_median"]).all() and (pr["wall_ratio_median"] <= pr["wall_ratio_max"]).all()
    md = (tables / "08_paper_ratios.md").read_text()
    assert "PAIRED §4.4 measurement" in md and "request cache bypassed" in md and "load average" in md
    assert md.startswith("**08_paper_ratios** — profile=test | hardware: ") and "usage ledgers" not in md


def test_toy_passes_give_the_papers_ratios_from_its_seconds():
    """Notebook 08's worked example: the paper's §4.4 seconds, one block, through the paired ratio code."""
    from litseg_nb.evaluation import efficiency

    t = efficiency.paired_ratio_table(efficiency.toy_passes({"litseg-lite": [9442], "litseg": [25362],
                                                             "lumber": [13514]})).set_index("ratio")
    assert round(t.loc["litseg-lite / litseg", "wall_ratio_median"], 3) == 0.372
    assert round(t.loc["litseg-lite / lumber", "wall_ratio_pooled"], 3) == 0.699
    two = efficiency.paired_ratio_table(efficiency.toy_passes({"litseg-lite": [10, 11], "litseg": [27, 29]}))
    assert round(two["wall_ratio_median"].iloc[0], 3) == 0.375 and round(two["wall_ratio_pooled"].iloc[0], 3) == 0.375
