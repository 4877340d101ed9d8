"""Notebook 05 end to end in the test profile (after notebook 04 when it exists, for real chunk sets)."""
import pandas as pd
import pytest

from litseg_nb.paths import NOTEBOOKS_DIR


@pytest.mark.slow
def test_notebook_05_test_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    from litseg_nb.runner import run_notebooks

    only = ("04", "05") if list(NOTEBOOKS_DIR.glob("04_*.ipynb")) else ("05",)
    run_notebooks("test", only=only)
    tables = tmp_path / "outputs" / "test" / "tables"
    retr = pd.read_csv(tables / "05_retrieval_all_modes.csv")
    assert {"dataset", "method", "mode", "MRR", "Hit@1", "DCG@20", "Recall@20", "n_no_relevant_chunk"} <= set(retr.columns)
    assert {"dense", "bm25", "hybrid"} <= set(retr["mode"])
    t3 = pd.read_csv(tables / "05_table3_retrieval.csv")
    assert {"dataset", "method", "CR", "MRR", "Hit@1", "Hit@5", "Hit@10"} <= set(t3.columns)
    t4 = pd.read_csv(tables / "05_table4_generation.csv")
    assert {"dataset", "method", "EM", "F1", "ROUGE_L", "METEOR", "AA"} <= set(t4.columns)
    lat = pd.read_csv(tables / "05_latency.csv")
    assert {"embed query", "dense search", "sparse search (BM25)", "fusion", "generate"} <= set(lat["stage"])
    assert (tmp_path / "outputs" / "test" / "figures" / "05_dcg_recall_hybrid.png").is_file()
    assert list((tmp_path / "outputs" / "test" / "artifacts" / "rag" / "index").rglob("dense.faiss"))
