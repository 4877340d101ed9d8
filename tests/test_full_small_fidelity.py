"""Issue 31's smaller `full` settings: the reranker rescores the whole MRR@20 ranking."""
from __future__ import annotations

from litseg_nb.rag.config import RagConfig
from litseg_nb.rag.rerank import rerank


class _ByLength:
    def score(self, title, query, docs):
        return [float(len(d)) for d in docs]


def test_full_reranks_every_candidate_the_mrr20_ranking_holds():
    full = RagConfig.for_profile("full")
    assert full.rerank_candidates == 0 and full.rerank_depth == full.retrieve_top_k == 20
    assert RagConfig.for_profile("test").rerank_depth == 3  # the CPU profiles keep their small caps
    texts = ["x" * (i + 1) for i in range(30)]  # the longest text scores highest
    fused = [(i, 1.0 / (i + 1)) for i in range(30)]
    out = rerank(fused, texts, _ByLength(), "t", "q", full.rerank_depth)
    assert [i for i, _ in out[:20]] == list(range(19, -1, -1))  # rank 20 of the fused list can reach rank 1
    assert [i for i, _ in out[20:]] == list(range(20, 30))  # beyond the metrics' depth: fused order
