"""Retrieval on a small synthetic corpus with known answers: dense, BM25, hybrid; book filter; disk round trip."""
import pytest

from litseg_nb.config import EmbeddingConfig
from fakes import ScriptedBackend
from litseg_nb.rag.config import RagConfig
from litseg_nb.rag.index import rrf_fuse, weighted_fuse
from litseg_nb.rag.pipeline import EvalQuestion, RagEvaluator, evidence_window, retrieval_table
from litseg_nb.rag.rerank import LLMPointwiseReranker, rerank
from litseg_nb.core.schema import Chunk

BOOK_A = ["The blacksmith hammered a horseshoe in his forge at dawn.",
          "Captain Marlow sailed the steamer up the dark river toward the inner station.",
          "The orchard was full of ripe apples and the children gathered baskets.",
          "At the wedding, Emma danced with Mr. Knightley under the lanterns."]
BOOK_B = ["A wedding feast was held in the castle; the queen danced with the king.",
          "The old sailor told a tale of a ship frozen in polar ice.",
          "In the forge the dwarf crafted a golden ring for the prince."]


def _chunks(book_id, texts):
    return [Chunk(book_id, "u0", f"u0.c{i:04d}", "synthetic", i + 1, i + 1, [(0, len(t))], t, t)
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    from litseg_nb.llm.embeddings import load_embedder

    return load_embedder(EmbeddingConfig(), cache_root=tmp_path_factory.mktemp("emb"))


def _q(qid, book, text, evidence):
    return EvalQuestion(qid, "gutenqa", book, book, text, ("x",), evidence)


QUESTIONS = [_q("q1", "A", "Who sailed the steamer up the river?", "Captain Marlow sailed"),
             _q("q2", "A", "What did the children gather in the orchard?", "ripe apples"),
             _q("q3", "B", "Who crafted a golden ring in the forge?", "the dwarf crafted"),
             _q("q4", "A", "With whom did Emma dance at the wedding?", "Emma danced with Mr. Knightley")]


def test_dense_sparse_hybrid_find_known_answers_and_never_leak(embedder):
    cfg = RagConfig.for_profile("test", reranker="none", hyde=False, dense_top_k=3, sparse_top_k=3)
    ev = RagEvaluator(cfg, embedder)
    ev.build_indices({"synthetic": _chunks("A", BOOK_A) + _chunks("B", BOOK_B)})
    rows = ev.retrieve(QUESTIONS)
    for r in rows:
        assert r["rank"] == 1, (r["mode"], r["qid"], r["top"])
        # every retrieved chunk belongs to the question's own book
        book = r["book_id"]
        texts = BOOK_A if book == "A" else BOOK_B
        assert all(0 <= i < len(texts) for i in r["top"])
    q3 = [r for r in rows if r["qid"] == "q3"]
    lib = ev.indices["synthetic"]
    assert all(lib.book("B").texts[r["top"][0]].startswith("In the forge the dwarf") for r in q3)
    # the wedding question on book B can only see book B's chunks, although A holds the answer
    leak = ev.retrieve([_q("q5", "B", "With whom did Emma dance at the wedding?", "Emma danced")])
    assert {r["mode"] for r in leak} == {"dense", "bm25", "hybrid"}
    assert all(r["rank"] is None and r["answerable"] is False for r in leak)
    assert all(set(r["top_chunk_ids"]) <= {c.chunk_id for c in _chunks("B", BOOK_B)} for r in leak)
    with pytest.raises(KeyError, match="no index for book 'C'"):
        lib.book("C")
    table = retrieval_table(rows + leak)
    assert set(table["mode"]) == {"dense", "bm25", "hybrid"}
    assert (table["n_no_relevant_chunk"] == 1).all() and (table["MRR"] == 4 / 5).all()
    assert set(ev.latency.frame()["stage"]) >= {"embed query", "dense search", "sparse search (BM25)", "fusion"}


def test_fusion_hand_computed():
    dense = [(1, 0.9), (2, 0.8), (3, 0.1)]
    sparse = [(3, 7.0), (1, 5.0)]
    fused = rrf_fuse([dense, sparse], k=60)
    assert [d for d, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    w = weighted_fuse(dense, sparse, dense_weight=0.5)
    # dense minmax: 1 -> 1, 2 -> 0.875, 3 -> 0; sparse: 3 -> 1, 1 -> 0
    assert dict(w) == pytest.approx({1: 0.5, 2: 0.4375, 3: 0.5})
    assert [d for d, _ in w] == [1, 3, 2]


def test_llm_pointwise_reranker_uses_yes_minus_no():
    def lp(conv, cands):
        assert cands == ["yes", "no"]
        good = "orchard" in conv[1]["content"]
        return {"yes": -0.1 if good else -3.0, "no": -2.0 if good else -0.2}

    scorer = LLMPointwiseReranker(ScriptedBackend(logprob_fn=lp))
    out = rerank([(0, 1.0), (2, 0.9), (1, 0.5)], BOOK_A, scorer, "A", "apples?", n=2)
    assert [d for d, _ in out] == [2, 0, 1]
    assert out[0][1] == pytest.approx(1.9)


def test_evidence_window_tolerates_quotes_and_case():
    text = "x" * 50 + 'She cried, \u201cOh, Mr. Knightley!\u201d and wept.' + "y" * 50
    w = evidence_window(text, '"oh, mr. knightley!"', 10)
    start = text.index("\u201cOh")
    end = text.index("\u201d") + 1
    assert w == text[start - 10:end + 10]
    assert evidence_window(text, "not there", 10) is None
