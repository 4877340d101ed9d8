"""LumberChunker's downstream QA comparison (Duarte et al., 2024), as far as the local data allows (notebook 05).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from ..llm.base import UsageTag
from .pipeline import EvalQuestion, answer_conversation, generate_answers
from ..metrics.generation import generation_scores
from .report import add_ragas

MEASURES = ("AA", "EM", "F1", "ROUGE_L", "METEOR")  # Table 4's names (answers' columns: SOURCE)
SOURCE = {"AA": "answer_accuracy", "EM": "EM", "F1": "F1", "ROUGE_L": "ROUGE-L", "METEOR": "METEOR"}
LONG_CONTEXT = "no retrieval, whole book in context"
MANUAL = "RAG-Manual (hand-segmented chunks)"
PROMPT_MARGIN = 32  # tokens the chat template adds around the messages (upper bound)
NOTE = ("LumberChunker's downstream QA comparison on the GutenQA questions answered here: RAG-<chunker> "
        "(Table 4's pipeline and measures; AA = RAGAS answer accuracy on its subset), the whole book in the "
        "generator's context where it fits, RAG-Manual not available locally (status column)")


def _row(system: str, method: str, frame: pd.DataFrame | None, status: str) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system, "method": method, "status": status,
                           "n_questions": 0 if frame is None else int(frame["qid"].nunique())}
    scored = frame[frame["ragas_scored"].astype(bool)] if frame is not None and "ragas_scored" in frame else None
    for m in MEASURES:  # AA over the RAGAS-scored answers only
        part = scored if m == "AA" else frame
        row[m] = float(part[SOURCE[m]].mean()) if part is not None and len(part) else float("nan")
    row["n_ragas"] = 0 if scored is None else int(len(scored))
    return row


def long_context_fit(backend: Any, books: Mapping[str, Any], questions: Sequence[EvalQuestion],
                     max_model_len: int, answer_max_new_tokens: int) -> tuple[bool, str]:
    """Whether every question's prompt with its whole book fits the generator's context; the reason if not."""
    worst: tuple[int, str] | None = None
    book_tokens: dict[str, int] = {}  # each book tokenised once (a GutenQA book is ~1 MB of text)
    for q in questions:
        if q.book_id not in book_tokens:
            book_tokens[q.book_id] = backend.count_tokens(books[q.book_id].text)
        conv = answer_conversation(q.dataset, q.title, q.question, ["-"])  # the prompt around the book
        need = (sum(backend.count_tokens(m["content"]) for m in conv) + book_tokens[q.book_id]
                + PROMPT_MARGIN + answer_max_new_tokens)
        if need > max_model_len and (worst is None or need > worst[0]):
            worst = (need, q.title)
    if worst is None:
        return True, ""
    return False, (f"not run: {worst[1]!r} with the prompt and answer needs {worst[0]:,} tokens, the generator "
                   f"({getattr(backend, 'model_id', '?')}) reads {max_model_len:,} (LumberChunker gave Gemini 1.5 "
                   "Pro the whole book); no book is cut")


def lumber_qa_comparison(gen: pd.DataFrame, books: Mapping[str, Any], questions: Sequence[EvalQuestion],
                         backend: Any, cfg: Any, seed: int = 0, dataset: str = "gutenqa") -> pd.DataFrame:
    """One row per system of LumberChunker's QA comparison on ``dataset``'s questions in ``gen`` (notebook 05's
    answers; ``questions`` give the references)."""

    g = gen[gen["dataset"] == dataset] if len(gen) else gen
    rows = [_row(f"RAG-{m}", m, part, "run") for m, part in g.groupby("method", sort=False)] if len(g) else []
    qids = set(g["qid"]) if len(g) else set()
    qs = [q for q in questions if q.qid in qids and q.dataset == dataset]
    fits, why = (long_context_fit(backend, books, qs, cfg.llm.max_model_len, cfg.answer_max_new_tokens) if qs
                 else (False, f"not run: no {dataset} question was answered"))
    if not fits:
        rows.append(_row(LONG_CONTEXT, "", None, why))
    else:
        items = [{"dataset": q.dataset, "title": q.title, "question": q.question,
                  "chunks": [books[q.book_id].text]} for q in qs]
        answers = generate_answers(backend, items, cfg.answer_max_new_tokens, cfg.seed,
                                   tag=UsageTag("rag-long-context", stage="generate"))
        lc = pd.DataFrame([{"dataset": q.dataset, "method": "", "qid": q.qid, "book_id": q.book_id,
                            "question": q.question, "reference": q.answers[0] if q.answers else "",
                            "answer": a, "contexts": [books[q.book_id].text],
                            **generation_scores(a, list(q.answers) or [""])} for q, a in zip(qs, answers)])
        if cfg.ragas:
            lc = add_ragas(backend, lc, cfg.ragas_max_questions, seed, cfg.ragas_max_new_tokens, cfg.ragas_retries)
        rows.append(_row(LONG_CONTEXT, "", lc, "run"))
    rows.append(_row(MANUAL, "", None, "not available: no hand-segmented chunks in the local data (the GutenQA copy "
                                         "holds paragraphs only)"))
    cols = ["system", "method", "n_questions", *MEASURES, "n_ragas", "status"]
    return pd.DataFrame(rows)[cols]
