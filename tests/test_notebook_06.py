"""Notebook 06 end to end in the test profile (after notebook 04 when it exists, for real chunk sets)."""
import pandas as pd
import pytest

from litseg_nb.paths import NOTEBOOKS_DIR


@pytest.mark.slow
def test_notebook_06_test_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    from litseg_nb.runner import run_notebooks

    only = ("04", "06") if list(NOTEBOOKS_DIR.glob("04_*.ipynb")) else ("06",)
    run_notebooks("test", only=only)
    out = tmp_path / "outputs" / "test"
    t2 = pd.read_csv(out / "tables" / "06_table2_boundary_similarity.csv")
    assert {"dataset", "method", "boundary_similarity", "n_boundaries"} <= set(t2.columns) and len(t2)
    assert t2.boundary_similarity.between(-1, 1).all()
    stats = pd.read_csv(out / "tables" / "06_chunk_statistics.csv")
    assert {"method", "n_chunks", "tokens_mean", "tokens_median"} <= set(stats.columns)
    judge = pd.read_csv(out / "tables" / "06_rubric_judge.csv")
    assert {"method", "event_validity", "unity_of_action", "cut_point_logic", "n_neutral"} <= set(judge.columns)
    sheets = out / "artifacts" / "human_eval"
    assert (sheets / "rater1.csv").is_file() and (sheets / "rater1.html").is_file() and (sheets / "key.csv").is_file()
