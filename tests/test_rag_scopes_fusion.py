"""Question scopes (all / answerable, counts, MRR@k vs full-rank), empty-evaluation errors, the weighted
fusion modes with cross-fitted weights, and Table 3 from the reranked ranking beside the pre-rerank one."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from litseg_nb.metrics.retrieval import summarize_scopes
from litseg_nb.rag import pipeline, report
from litseg_nb.rag.config import RagConfig
from litseg_nb.rag.index import rrf_fuse, weighted_fuse, weighted_rrf_fuse
from litseg_nb.rag.index import BookIndex, LibraryIndex
from litseg_nb.rag.pipeline import EvalQuestion, EvaluationError, RagEvaluator, questions_in_scope, retrieval_table
from litseg_nb.core.schema import Book, Chunk


def test_summarize_scopes_reports_both_scopes_and_both_mrrs():
    s = summarize_scopes([1, None, None, 4], [True, True, False, True], [1, 30, None, 4], k=20)
    assert s["n_questions"] == 4 and s["n_no_relevant_chunk"] == 1 and s["n_answerable"] == 3
    assert s["MRR@20"] == pytest.approx((1 + 0 + 0 + 0.25) / 4)
    assert s["MRR_full"] == pytest.approx((1 + 1 / 30 + 0 + 0.25) / 4)
    assert s["MRR@20_answerable"] == pytest.approx((1 + 0 + 0.25) / 3)
    assert s["MRR_full_answerable"] == pytest.approx((1 + 1 / 30 + 0.25) / 3)
    assert s["Hit@1"] == 0.25 and s["Hit@1_answerable"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="no questions"):
        summarize_scopes([], [])
    with pytest.raises(ValueError, match="larger than 5"):
        summarize_scopes([7], [True], k=5)


def _book(bid, paras):
    text = "\n\n".join(paras)
    return Book(bid, bid, "gutenqa", text)


def _chunk(book, method, unit, i, para):
    a = book.text.index(para)
    return Chunk(book.book_id, unit, f"{unit}.c{i}", method, 1, 1, [(a, a + len(para))], para, para)


PARAS = ["Captain Marlow sailed the steamer.", "Ripe apples filled the orchard.", "Emma danced at the wedding."]


def _q(qid, ev):
    return EvalQuestion(qid, "gutenqa", "A", "A", "question?", ("x",), ev)


def test_common_units_keeps_evidence_missing_from_the_book_and_errors_on_nothing():
    book = _book("A", PARAS)
    sets = {"m1": [_chunk(book, "m1", "u0", 0, PARAS[0]), _chunk(book, "m1", "u1", 1, PARAS[1])],
            "m2": [_chunk(book, "m2", "u0", 0, PARAS[0])]}
    qs = [_q("q0", "Captain Marlow"), _q("q1", "ripe apples"), _q("q2", "words that occur nowhere")]
    kept, rep = questions_in_scope(qs, sets, {"A": book}, "common-units")
    # q1's evidence lies in u1, which m2 does not cover: dropped; q2's evidence is in no text: kept (a miss)
    assert [q.qid for q in kept] == ["q0", "q2"] and rep["n_evidence_not_in_text"] == 1 and rep["n_dropped"] == 1
    kept, rep = questions_in_scope(qs, sets, {"A": book}, "all")
    assert len(kept) == 3
    disjoint = {"m1": [_chunk(book, "m1", "u0", 0, PARAS[0])], "m2": [_chunk(book, "m2", "u1", 0, PARAS[1])]}
    with pytest.raises(EvaluationError, match="keeps 0 of 1 questions"):
        questions_in_scope([_q("q0", "Captain Marlow")], disjoint, {"A": book}, "common-units")
    with pytest.raises(EvaluationError, match="have no chunks"):
        questions_in_scope(qs, {"m1": []}, {"A": book}, "all")
    with pytest.raises(EvaluationError, match="leaves no chunk"):
        report.restrict_to_units(disjoint, {("A", "u0")})
    # imported chunks that could not be aligned (no spans) are kept for retrieval
    nf = Chunk("A", "", "import.c00001", "m2", 0, 0, [], "unaligned text", "", is_source_span=False)
    out = report.restrict_to_units({"m2": [nf, *disjoint["m2"]]}, {("A", "u0")})
    assert out["m2"] == [nf]


def test_weighted_rrf_at_half_is_rrf_and_linear_extremes_are_single_retrievers():
    d = [(0, 0.9), (1, 0.5), (2, 0.1)]
    s = [(2, 7.0), (0, 3.0)]
    assert [x for x, _ in weighted_rrf_fuse(d, s, 0.5)] == [x for x, _ in rrf_fuse([d, s])]
    assert [x for x, _ in weighted_fuse(d, s, 1.0)][:3] == [0, 1, 2]
    assert [x for x, _ in weighted_fuse(d, s, 0.0)][:2] == [2, 0]
    with pytest.raises(ValueError):
        rrf_fuse([d, s], weights=[1.0])


def _evaluator(n_docs=12, n_q=8, seed=0):
    cfg = RagConfig.for_profile("test", reranker="none", hyde=False, dense_top_k=10, sparse_top_k=10,
                                retrieve_top_k=5, seed=seed)
    texts = [f"doc {i}" for i in range(n_docs)]
    idx = BookIndex.build("A", [f"c{i}" for i in range(n_docs)], texts, np.eye(n_docs, dtype=np.float32))
    ev = RagEvaluator(cfg, embedder=None)
    ev.indices = {"m": LibraryIndex({"A": idx})}
    qs, lists = [], {}
    rng = np.random.default_rng(seed)
    for k in range(n_q):
        rel = int(rng.integers(n_docs))
        others = [i for i in range(n_docs) if i != rel]
        good = [rel] + others
        bad = others[:6] + [rel] + others[6:]
        dense_first = k % 3 != 0  # most questions: dense finds the answer, BM25 does not
        dl, sl = (good, bad) if dense_first else (bad, good)
        lists[("m", f"q{k}")] = ([(i, 1.0 - 0.01 * r) for r, i in enumerate(dl)],
                                 [(i, 10.0 - 0.1 * r) for r, i in enumerate(sl)], {rel})
        qs.append(EvalQuestion(f"q{k}", "gutenqa", "A", "A", "q", ("x",), f"doc {rel}"))
    ev._lists = lists
    return ev, qs


def _mrr_at(ev, mode, qids, w):
    c = ev.cfg
    tot = 0.0
    for q in qids:
        d, s, rel = ev._lists[("m", q)]
        fused = ev._tuned_fuse(mode, d[: c.dense_top_k], s[: c.sparse_top_k], w)[: c.retrieve_top_k]
        r = next((i for i, (doc, _) in enumerate(fused, 1) if doc in rel), None)
        tot += 0 if r is None else 1 / r
    return tot / len(qids)


def test_tuned_fusion_weights_are_chosen_on_the_other_folds_only():
    ev, qs = _evaluator()
    rows = ev.tuned_fusion_rows(qs)
    assert {r["mode"] for r in rows} == {"hybrid-wrrf", "hybrid-linear"}
    assert len(rows) == 2 * len(qs)  # every question scored once per mode
    # the full ranking starts with the mode's top-k: a hit within k has the same full rank
    assert all(r["rank_full"] == r["rank"] for r in rows if r["rank"] is not None)
    assert all(r["rank_full"] is not None for r in rows)  # every chunk is ranked in the full ranking
    grid = ev.cfg.fusion_weight_grid
    assert all(w["dev_questions"] + w["scored_questions"] == len(qs) for w in ev.fusion_weights)
    by_mode: dict = {}
    for r in rows:
        by_mode.setdefault(r["mode"], {})[r["qid"]] = r["dense_weight"]
    for mode in by_mode:
        assert sum(w["mode"] == mode for w in ev.fusion_weights) == ev.cfg.fusion_dev_folds
        # brute force: for each scored question, its weight maximises MRR@k on the questions NOT in its fold
        fold_of = {}
        order = sorted(qs, key=lambda q: q.qid)
        import random
        random.Random(f"{ev.cfg.seed}-fusion-folds").shuffle(order)
        for i, q in enumerate(order):
            fold_of[q.qid] = i % ev.cfg.fusion_dev_folds
        for q, wq in by_mode[mode].items():
            dev = [x for x in fold_of if fold_of[x] != fold_of[q]]
            best = max(_mrr_at(ev, mode, dev, w) for w in grid)
            assert _mrr_at(ev, mode, dev, wq) == pytest.approx(best)
    table = retrieval_table(rows, k=ev.cfg.retrieve_top_k)
    assert set(table["mode"]) == {"hybrid-wrrf", "hybrid-linear"} and "dense_weights" in table
    assert (table["n_questions"] == len(qs)).all()


def test_fusion_needs_two_folds():
    ev, qs = _evaluator()
    ev.cfg = ev.cfg.replace(fusion_dev_folds=1)
    with pytest.raises(ValueError, match="never chosen on the questions it scores"):
        ev.tuned_fusion_rows(qs)


class _ReverseScorer:
    """A reranker that prefers the candidates the fused ranking put last (makes reranking visible)."""

    def score(self, title, query, docs):
        return [float(i) for i in range(len(docs))]


def test_table3_reports_reranked_and_pre_rerank_rankings_on_the_same_questions(tmp_path):
    from litseg_nb.config import EmbeddingConfig
    from litseg_nb.llm.embeddings import load_embedder

    emb = load_embedder(EmbeddingConfig(), cache_root=tmp_path / "emb")
    book = _book("A", PARAS)
    chunks = [_chunk(book, "m", "u0", i, p) for i, p in enumerate(PARAS)]
    cfg = RagConfig.for_profile("test", reranker="none", hyde=False, rerank_candidates=3)
    ev = RagEvaluator(cfg, emb, reranker=_ReverseScorer())
    ev.build_indices({"m": chunks})
    qs = [EvalQuestion("q0", "gutenqa", "A", "A", "Who sailed the steamer?", ("Marlow",), "Captain Marlow"),
          EvalQuestion("q1", "gutenqa", "A", "A", "What filled the orchard?", ("apples",), "ripe apples"),
          EvalQuestion("q2", "gutenqa", "A", "A", "Who danced?", ("Emma",), "Emma danced")]
    rows = ev.retrieve(qs, rerank_qids={"q0", "q1"})
    t3 = report.table3_reranked(rows, pd.DataFrame())
    assert set(t3["ranking"]) == {report.RERANK_LABEL, report.PRE_RERANK_LABEL}
    assert (t3["n_questions"] == 2).all()  # both rankings over the reranked questions only
    pre = t3[t3.ranking == report.PRE_RERANK_LABEL].iloc[0]
    post = t3[t3.ranking == report.RERANK_LABEL].iloc[0]
    assert pre["MRR@20"] == 1.0 and post["MRR@20"] < 1.0  # the reversing reranker moved the hits down
    assert {"MRR_full", "MRR@20_answerable", "n_no_relevant_chunk"} <= set(t3.columns)
    full = retrieval_table(rows)
    assert set(full[full["mode"] == "hybrid"]["n_questions"]) == {3}


def test_tuned_fusion_is_skipped_not_faked_with_too_few_questions():
    ev, qs = _evaluator(n_q=1)
    assert ev.tuned_fusion_rows(qs) == []
    assert all(w["skipped"] and w["dense_weight"] is None for w in ev.fusion_weights)


def test_table3_evaluator_passes_the_configured_reranker_length(monkeypatch):
    """Table 3's FlagEmbedding reranker reads RagConfig.reranker_max_length tokens (full: 8192),
    not FlagEmbedding's default 512."""
    from litseg_nb.rag import rerank, report
    from litseg_nb.rag.config import RagConfig

    seen = {}
    monkeypatch.setattr(rerank, "make_reranker", lambda *a, **kw: seen.update(kw) or "scorer")
    monkeypatch.setattr(report, "RagEvaluator", lambda cfg, emb, be, scorer: scorer)
    cfg = RagConfig.for_profile("full")
    assert report.table3_evaluator(cfg, None, None) == "scorer"
    assert seen["max_length"] == cfg.reranker_max_length == 8192
