"""Notebook 06 end to end in the test profile, on the session's chunk sets of notebooks 02-04."""
import pandas as pd
import pytest


@pytest.mark.slow
def test_notebook_06_test_profile(notebook_pipeline):
    out = notebook_pipeline("06")
    t2 = pd.read_csv(out / "tables" / "06_table2_boundary_similarity.csv")
    assert {"dataset", "method", "boundary_similarity", "n_boundaries"} <= set(t2.columns) and len(t2)
    cut = t2.n_boundaries > 0  # a method that never cut inside a unit keeps its row, similarity NaN
    assert t2.boundary_similarity[cut].between(-1, 1).all() and t2.boundary_similarity[~cut].isna().all()
    assert {"litseg", "lumber", "token"} <= set(t2.method)  # LitSeg's and the baselines' chunk sets
    from fakes import TEST_PRESETS

    assert set(TEST_PRESETS) <= set(t2.method)  # and notebook 04's library splitters
    stats = pd.read_csv(out / "tables" / "06_chunk_statistics.csv")
    assert {"method", "total_chunks", "mean_tokens", "median_tokens", "mean_sentences"} <= set(stats.columns)
    for ext in ("png", "pdf"):  # where each method cuts one unit, against LitSeg's boundaries
        assert (out / "figures" / f"06_boundary_positions.{ext}").stat().st_size > 0
    judge = pd.read_csv(out / "tables" / "06_rubric_judge.csv")
    assert {"method", "event_validity", "unity_of_action", "cut_point_logic", "n_neutral"} <= set(judge.columns)
    sheets = out / "artifacts" / "human_eval"
    assert (sheets / "rater1.csv").is_file() and (sheets / "rater1.html").is_file() and (sheets / "key.csv").is_file()


@pytest.mark.slow
def test_notebook_06_computes_appendix_a_statistics_from_llm_filled_sheets(notebook_pipeline):
    """Without human sheets, the judges fill a copy, every table says so, and Tables 1 and 9
    and the agreement statistics are computed from it; notebook 05 does the same for its pairwise
    sheets (Appendix B), so 06 does not wait for 05."""
    out = notebook_pipeline("05", "06")
    for name in ("06_table1_human_quality", "06_table9_icc", "06_rating_agreement", "05_pairwise_fleiss",
                 "05_pairwise_agreement", "05_pairwise_win_rates"):
        assert "LLM ratings, not human" in (out / "tables" / f"{name}.md").read_text(), name
    assert not list((out / "tables").glob("06_pairwise*"))  # written by 05 only
    t1 = pd.read_csv(out / "tables" / "06_table1_human_quality.csv")
    assert {"dataset", "method", "content_completeness", "overall", "n_items"} <= set(t1.columns) and len(t1)
    t9 = pd.read_csv(out / "tables" / "06_table9_icc.csv")
    assert set(t9["dimension"]) == {"content_completeness", "topical_coherence", "boundary_placement"}
    assert (out / "artifacts" / "human_eval" / "pairwise" / "key.csv").is_file()  # notebook 05's B sheets
    assert (out / "artifacts" / "human_eval" / "llm_filled" / "SOURCE.txt").is_file()
    # the A.2 human rubric, and the raters named: in `test` one local model for both, and the label says so
    source = (out / "artifacts" / "human_eval" / "llm_filled" / "SOURCE.txt").read_text()
    assert "A.2 rubric" in source and '"rubric": "Appendix A.2' in source
    md = (out / "tables" / "06_table1_human_quality.md").read_text()
    assert "A.2 rubric" in md and "the SAME model tiny-random" in md
