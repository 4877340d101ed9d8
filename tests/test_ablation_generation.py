"""Notebook 07's Table 7 CR column and Table 8 come from notebook 05's generation code,
run on the ablation variants' chunk sets (ablation.generation_tables)."""
from __future__ import annotations

import pytest

from litseg_nb.evaluation import ablation
from litseg_nb.config import EmbeddingConfig
from fakes import ScriptedBackend
from litseg_nb.rag.config import RagConfig
from litseg_nb.rag.pipeline import RagEvaluator, retrieval_table

from test_rag_retrieval import BOOK_A, BOOK_B, QUESTIONS, _chunks


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    from litseg_nb.llm.embeddings import load_embedder

    return load_embedder(EmbeddingConfig(), cache_root=tmp_path_factory.mktemp("emb"))


def test_generation_tables_for_variants(embedder):
    cfg = RagConfig.for_profile("test", reranker="none", hyde=False, ragas=True, pairwise=False,
                                generation_max_questions=0, ragas_max_questions=0)
    backend = ScriptedBackend(reply_fn=lambda conv: "2")  # answers "2"; NV-metric ratings "2" (= 1.0)
    ev = RagEvaluator(cfg, embedder, backend)
    sets = {"lite": _chunks("A", BOOK_A) + _chunks("B", BOOK_B), "wo-ft": _chunks("A", BOOK_A[::-1]) + _chunks("B", BOOK_B)}
    ev.build_indices(sets)
    rows = ev.retrieve(QUESTIONS)
    names = {"lite": "LitSeg-Lite", "wo-ft": "w/o FT"}
    t7, t8 = ablation.generation_tables(ev, QUESTIONS, rows, retrieval_table(rows), backend, cfg, {}, names)
    assert set(t7["variant"]) == set(t8["variant"]) == {"LitSeg-Lite", "w/o FT"}
    assert "CR" in t7 and t7["CR"].notna().all() and (t7["n_ragas"] == len(QUESTIONS)).all()
    assert {"EM", "F1", "ROUGE_L", "METEOR"} <= set(t8.columns)
    assert (t8["n_answers"] == len(QUESTIONS)).all()
