import pandas as pd
import pytest

from litseg_nb.efficiency import load_usage
from litseg_nb.paths import outputs_dir
from litseg_nb.runner import run_notebooks


@pytest.mark.slow
def test_notebook_08_runs_in_test_profile():
    run_notebooks("test", only=("08",))
    tables = outputs_dir("test") / "tables"
    cost = pd.read_csv(tables / "08_llm_cost.csv")
    assert {"method", "calls", "prompt_tokens_per_1k_sent", "seconds_per_1k_sent"} <= set(cost.columns)
    # every method that recorded usage earlier in this session appears in the cost table
    assert set(load_usage("test")["method"]) == set(cost["method"])
    walls = pd.read_csv(tables / "08_notebook_wall_times.csv")
    assert list(walls.columns) == ["notebook", "seconds", "status", "finished"]
    assert (tables / "08_llm_cost.md").read_text().startswith("**08_llm_cost** — profile=test")
