"""Notebook 05 end to end in the test profile, after the notebooks whose chunk sets it evaluates."""
import pandas as pd
import pytest



@pytest.mark.slow
def test_notebook_05_test_profile(notebook_pipeline):
    out = notebook_pipeline("05")  # after 02, 03, 04 (each once per session)
    tables = out / "tables"
    retr = pd.read_csv(tables / "05_retrieval_all_modes.csv")
    assert {"dataset", "method", "mode", "n_questions", "n_no_relevant_chunk", "n_answerable", "MRR@20", "MRR_full",
            "MRR@20_answerable", "MRR_full_answerable", "Hit@1", "Hit@1_answerable", "DCG@20", "Recall@20"} <= set(retr.columns)
    assert "MRR" not in retr.columns  # every MRR column says whether it is MRR@k or full-rank
    assert {"dense", "bm25", "hybrid", "hybrid-wrrf", "hybrid-linear", "hybrid+rerank"} <= set(retr["mode"])
    assert (retr["MRR@20"] <= retr["MRR_full"] + 1e-12).all()
    assert (retr["n_questions"] > 0).all()
    from fakes import TEST_PRESETS

    assert set(TEST_PRESETS) <= set(retr["method"])  # notebook 04's library splitters, evaluated beside ours
    label = (tables / "05_retrieval_all_modes.md").read_text()
    assert "_answerable = answerable ones" in label and "MRR_full = full ranking" in label
    fusion = pd.read_csv(tables / "05_fusion_modes.csv")
    assert {"hybrid", "hybrid-wrrf", "hybrid-linear"} <= set(fusion["mode"]) and "dense_weights" in fusion
    weights = pd.read_csv(tables / "05_fusion_weights.csv")
    assert {"method", "mode", "fold", "dense_weight", "dev_questions", "scored_questions"} <= set(weights.columns)
    t3 = pd.read_csv(tables / "05_table3_retrieval.csv")
    assert {"dataset", "method", "ranking", "n_questions", "n_no_relevant_chunk", "MRR@20", "MRR_full", "Hit@1",
            "Hit@5", "Hit@10", "MRR@20_answerable"} <= set(t3.columns)
    assert set(t3["ranking"]) == {"hybrid+rerank (paper configuration, App. I.1)", "hybrid before reranking"}
    for _, g in t3.groupby(["dataset", "method"]):
        assert g["n_questions"].nunique() == 1  # both rankings over the same questions
    t3h = pd.read_csv(tables / "05_table3_hybrid_all_questions.csv")
    assert {"CR", "MRR@20", "MRR_full", "n_questions", "n_no_relevant_chunk"} <= set(t3h.columns)
    t4 = pd.read_csv(tables / "05_table4_generation.csv")
    assert {"dataset", "method", "EM", "F1", "ROUGE_L", "METEOR", "AA"} <= set(t4.columns)
    from litseg_nb.rag import lumber_qa
    lqa = pd.read_csv(tables / "05_lumber_qa.csv")  # LumberChunker's QA comparison: its stated rows are there
    assert {lumber_qa.LONG_CONTEXT, lumber_qa.MANUAL} <= set(lqa["system"])
    lat = pd.read_csv(tables / "05_latency.csv")
    assert {"embed query", "dense search", "sparse search (BM25)", "fusion", "generate"} <= set(lat["stage"])
    assert (out / "figures" / "05_dcg_recall_hybrid.png").is_file()
    usage = pd.read_csv(out / "artifacts" / "usage" / "05.csv")
    assert usage["method"].notna().all() and {"rag-generate", "rag-rerank"} <= set(usage["method"])


@pytest.mark.slow
def test_notebook_05_reports_span_relevance_beside_containment(notebook_pipeline):
    """Both relevance rules on the same rankings; they agree on the verbatim chunk sets."""
    t = pd.read_csv(notebook_pipeline("05") / "tables" / "05_relevance_containment_vs_span.csv")
    assert {"MRR@20", "MRR@20_span", "Hit@1_span", "n_relevance_differs", "verbatim"} <= set(t.columns)
    assert {"hybrid", "hybrid+rerank"} <= set(t["mode"])
    verbatim = t[t["verbatim"] & (t["method"] != "litseg")]  # LitSeg: see its context-junction caveat
    assert len(verbatim) and (verbatim["n_relevance_differs"] == 0).all()
    assert (verbatim["MRR@20"] == verbatim["MRR@20_span"]).all()


@pytest.mark.slow
def test_notebook_05_sweeps_lumberchunkers_theta(notebook_pipeline):
    """LumberChunker's θ sweep, profile-sized (test: θ = 450 and 550 on one unit)."""
    out = notebook_pipeline("05")
    t = pd.read_csv(out / "tables" / "05_lumber_theta_sweep.csv")
    assert sorted(set(t["theta"])) == [450, 550] and set(t["mode"]) == {"dense", "hybrid"}
    assert {"DCG@1", "DCG@10", "Recall@5", "n_chunks", "mean_chunk_tokens"} <= set(t.columns)
    assert (t["n_questions"] > 0).all() and t["DCG@20"].between(0, 1).all()
    assert (out / "figures" / "05_lumber_theta_sweep.png").is_file()
    assert (out / "figures" / "05_case_study.png").is_file()  # the case study (Figures 4-5)
    assert "chosen by: among" in (out / "artifacts" / "rag" / "case_study.html").read_text()  # the stated rule


@pytest.mark.slow
def test_notebook_05_counts_chunks_over_the_embedder_and_reranker_limits(notebook_pipeline):
    """Per method, how many chunks the embedder and the reranker read only in part."""
    t = pd.read_csv(notebook_pipeline("05") / "tables" / "05_chunks_over_limits.csv")
    assert {"method", "chunks", "embedder limit", "over embedder limit", "max chunk tokens (embedder)",
            "reranker limit", "over reranker limit"} <= set(t.columns)
    assert (t["chunks"] > 0).all() and (t["over embedder limit"] <= t["chunks"]).all()
    assert ((t["max chunk tokens (embedder)"] > t["embedder limit"]) == (t["over embedder limit"] > 0)).all()


@pytest.mark.slow
def test_notebook_05_whole_book_benchmark_tiers(notebook_pipeline):
    """Tier A (whole books, every LLM-free method) and tier B (the LLM methods' units): separate tables, the same
    questions for every method of a tier, budget-matched columns, paired rows that say what they rest on."""
    from litseg_nb.rag.benchmark import tier_a_methods

    tables = notebook_pipeline("05") / "tables"
    a = pd.read_csv(tables / "05_tier_a_retrieval.csv")
    b = pd.read_csv(tables / "05_tier_b_retrieval.csv")
    assert set(a["tier"]) == {"A"} and set(b["tier"]) == {"B"}
    assert {"hit@256", "hit@512", "hit@1024", "hit@2048", "MRR@20", "mean_tokens"} <= set(a.columns)
    assert set(a["method"]) == set(tier_a_methods(embedding_presets=False))  # the test profile leaves those out
    assert {"litseg", "litseg-lite", "lumber", "recursive"} <= set(b["method"])
    for t in (a, b):
        assert (t.groupby(["dataset", "mode"])["n_questions"].nunique() == 1).all()  # same questions per method
    paired = pd.read_csv(tables / "05_tier_a_paired.csv")
    assert set(paired["reference"]) == {"recursive"} and "recursive" not in set(paired["method"])
    assert {"hit@1024", "MRR@20"} == set(paired["score"]) and (paired["n_questions"] > 0).all()
    assert "tier A:" in (tables / "05_tier_a_retrieval.md").read_text()
    assert (notebook_pipeline("05") / "figures" / "05_tier_a_budget_curves.png").is_file()
