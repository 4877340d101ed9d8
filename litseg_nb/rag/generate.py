"""Answer generation with the paper's prompts (Appendix I.1.2) and HyDE query rewriting.

Prompt assembly (the paper gives the pieces, not how they are joined; our choice):
system = the I.1.2 system prompt + " " + the per-dataset answer instruction; user = the I.1.2
template with references (``Book Title / Question / References: Chunk: ...``, one ``Chunk:`` block
per retrieved chunk) or without references when no chunk is given.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..llm.base import SamplingParams, UsageTag
from ..core.prompts import load_prompt, render_prompt
from ..llm.replies import answer_text

ANSWER_INSTRUCTIONS = {"gutenqa": "rag/answer_instruction_gutenqa", "literaryqa": "rag/answer_instruction_literaryqa"}


def answer_conversation(dataset: str, title: str, question: str, chunks: Sequence[str]) -> list[dict[str, str]]:
    key = "literaryqa" if dataset == "literaryqa" else "gutenqa"
    system = load_prompt("rag/system") + " " + load_prompt(ANSWER_INSTRUCTIONS[key])
    if chunks:
        doc = "\nChunk: ".join(c.strip() for c in chunks)
        user = render_prompt("rag/user_with_reference", title=title, query=question, doc=doc)
    else:
        user = render_prompt("rag/user_no_reference", title=title, query=question)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def clean_answer(text: str) -> str:
    """First non-empty paragraph of the reply's answer, stripped (the prompt asks for one sentence);
    reasoning blocks are removed first (:func:`litseg_nb.llm.replies.answer_text`)."""
    for part in answer_text(text).strip().split("\n\n"):
        if part.strip():
            return part.strip()
    return ""


def generate_answers(backend: Any, items: Sequence[dict[str, Any]], max_new_tokens: int, seed: int = 0,
                     tag: UsageTag = UsageTag("rag-generate", stage="generate")) -> list[str]:
    """``items``: dicts with dataset, title, question, chunks → one cleaned answer each (batched)."""
    convs = [answer_conversation(it["dataset"], it["title"], it["question"], it["chunks"]) for it in items]
    if not convs:
        return []
    gens = backend.chat(convs, SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, seed=seed), tag)
    return [clean_answer(g.text) for g in gens]


def hyde_passages(backend: Any, titles: Sequence[str], questions: Sequence[str], max_new_tokens: int,
                  seed: int = 0, tag: UsageTag = UsageTag("rag-hyde", stage="hyde")) -> list[str]:
    """Hypothetical passages answering each question (HyDE, Gao et al. 2023) for dense retrieval.

    An empty generation falls back to the question itself; the caller counts those.
    """
    convs = [[{"role": "user", "content": render_prompt("rag/hyde", title=t, query=q)}]
             for t, q in zip(titles, questions)]
    if not convs:
        return []
    gens = backend.chat(convs, SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, seed=seed), tag)

    return [answer_text(g.text).strip() for g in gens]  # reasoning blocks removed
