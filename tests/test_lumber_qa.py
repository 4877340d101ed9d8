"""LumberChunker's downstream QA comparison where the local data allows it
(RAG-<chunker> rows from notebook 05's answers; the whole book in context only where it fits; RAG-Manual
stated as unavailable)."""
from __future__ import annotations

import pandas as pd

from fakes import ScriptedBackend
from litseg_nb.rag.config import RagConfig
from litseg_nb.rag.lumber_qa import LONG_CONTEXT, MANUAL, lumber_qa_comparison
from litseg_nb.rag.pipeline import EvalQuestion

from conftest import make_book


def _gen(qs):
    rows = []
    for m, em in (("lumber", 1.0), ("token", 0.0)):
        for q in qs:
            rows.append({"dataset": "gutenqa", "method": m, "qid": q.qid, "book_id": q.book_id, "question": q.question,
                         "reference": q.answers[0], "answer": "x", "contexts": ["c"], "EM": em, "F1": em,
                         "ROUGE-L": em, "METEOR": em, "ragas_scored": q.qid == "q1",
                         "answer_accuracy": 0.5 if m == "lumber" else 0.0})
    rows.append({**rows[0], "dataset": "literaryqa", "method": "lumber", "qid": "lq"})  # another dataset: left out
    return pd.DataFrame(rows)


def test_rag_rows_long_context_where_it_fits_and_manual_stated():
    book = make_book("gutenqa:G", units=2, n=3, dataset="gutenqa")
    qs = [EvalQuestion(f"q{i}", "gutenqa", book.book_id, book.title, f"Who is {i}?", ("Sentence 2",), "Sentence 2")
          for i in (1, 2)]
    be = ScriptedBackend(reply_fn=lambda conv: "Sentence 2 of unit 0.\n\nextra")
    cfg = RagConfig.for_profile("test", ragas=False, llm={"max_model_len": 4096})
    t = lumber_qa_comparison(_gen(qs), {book.book_id: book}, qs, be, cfg).set_index("system")
    assert list(t.index) == ["RAG-lumber", "RAG-token", LONG_CONTEXT, MANUAL]
    assert t.loc["RAG-lumber", "EM"] == 1.0 and t.loc["RAG-token", "EM"] == 0.0
    assert t.loc["RAG-lumber", "n_questions"] == 2 and t.loc["RAG-lumber", "n_ragas"] == 1
    assert t.loc["RAG-lumber", "AA"] == 0.5  # RAGAS AA over the rated questions only
    # the long-context row: the whole book is the generator's one reference, one call per question
    assert t.loc[LONG_CONTEXT, "status"] == "run" and t.loc[LONG_CONTEXT, "n_questions"] == 2
    assert len(be.calls) == 2 and all(book.text.strip() in c[-1]["content"] for c in be.calls)
    assert t.loc[LONG_CONTEXT, "F1"] > 0
    assert t.loc[MANUAL, "status"].startswith("not available") and t.loc[MANUAL, "n_questions"] == 0
    # a book larger than the generator's context: not run, and the row says why (no book is cut)
    be2 = ScriptedBackend(reply_fn=lambda conv: "a")
    small = RagConfig.for_profile("test", ragas=False, llm={"max_model_len": 40})
    t2 = lumber_qa_comparison(_gen(qs), {book.book_id: book}, qs, be2, small).set_index("system")
    assert not be2.calls and t2.loc[LONG_CONTEXT, "status"].startswith("not run:")
    assert "reads 40" in t2.loc[LONG_CONTEXT, "status"] and pd.isna(t2.loc[LONG_CONTEXT, "F1"])
