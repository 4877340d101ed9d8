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
    assert list(walls.columns) == ["notebook", "seconds", "status", "finished"]
    assert (tables / "08_llm_cost.md").read_text().startswith("**08_llm_cost** — profile=test")
    # §4.4 as the paper measures it: same units, ratios beside the paper's, hardware and models named
    from litseg_nb.evaluation.efficiency import PAPER_COLUMNS

    paper = pd.read_csv(tables / "08_paper_efficiency.csv")
    assert list(paper.columns) == PAPER_COLUMNS
    # 02-04 ran before: all three methods, measured on the same units, only their segmentation work
    # + LitSeg's three stages on the student's model (teacher-size control; one model in `test`: cached)
    assert set(paper["method"]) == {"litseg", "litseg-lite", "lumber", "litseg-student"} and paper["same_units"].all()
    assert (paper["calls"] > 0).all() and (paper["sentences"] == paper["sentences"].iloc[0]).all()
    lit = usage[(usage["method"] == "litseg") & (usage["notebook"] == "02")]
    assert paper.set_index("method").loc["litseg", "calls"] == lit["calls"].sum()  # no calibration/train rows
    ratios = pd.read_csv(tables / "08_paper_ratios.csv")
    assert list(ratios["paper (end-to-end seconds)"]) == [0.37, 0.37, 0.70]
    assert ratios["denominator"].str.contains("student's model").sum() == 1
    md = (tables / "08_paper_ratios.md").read_text()
    assert "hardware: " in md and "LitSeg (teacher)=" in md and "LitSeg-Lite (student)=" in md
    assert "§4.4 units: every unit all three methods segmented (the profile's evaluation set)" in md
