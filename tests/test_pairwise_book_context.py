"""LiteraryQA pairwise judge context: the entire source book (§4.2, B.1), or a stated,
deterministic excerpt (the chapters holding either system's chunks) where the book exceeds the judge's context."""
import pandas as pd

from fakes import ScriptedBackend
from litseg_nb.metrics.pairwise import BOOK_POLICIES, book_judge_context, judge_context_budget
from litseg_nb.rag.pipeline import EvalQuestion
from litseg_nb.rag.report import pairwise_vs_target
from litseg_nb.core.schema import Chunk

from conftest import make_book

words = lambda t: len(t.split())  # noqa: E731


def test_book_context_policy_is_whole_book_then_chapters_then_chunks():
    book = make_book("literaryqa:7", units=4, n=10)  # ~9 words a sentence, ~95 words a chapter
    n_book = words(book.text)
    text, pol = book_judge_context(book, ["u0002"], ["u0000"], ["c a"], ["c b"], words, n_book)
    assert (text, pol) == (book.text, BOOK_POLICIES[0])
    # room for two chapters: u0002 (A's first) and u0000 (B's first), printed in book order
    text, pol = book_judge_context(book, ["u0002", "u0003"], ["u0000"], ["c a"], ["c b"], words, 200)
    assert pol == BOOK_POLICIES[1]
    assert text.index("[Chapter 0]") < text.index("[Chapter 2]") and "[Chapter 3]" not in text
    assert book.units[2].text(book.text) in text and "[Chapter 1]" not in text
    text, pol = book_judge_context(book, ["u0002"], ["u0000"], ["chunk a"], ["chunk b"], words, 20)
    assert (text, pol) == ("chunk a\nchunk b", BOOK_POLICIES[2])


def test_literaryqa_judge_reads_the_book_not_the_retrieved_chunks():
    book = make_book("literaryqa:7", units=3, n=6)
    q = EvalQuestion("q1", "literaryqa", book.book_id, book.title, "Who?", ("Emma",), None)
    gen = pd.DataFrame([{"dataset": "literaryqa", "method": m, "qid": "q1", "reference": "Emma", "answer": a,
                         "contexts": [f"{m} chunk"], "context_chunk_ids": ["x"]} for m, a in (("t", "Emma"), ("o", "?"))])
    seen = []
    be = ScriptedBackend(reply_fn=lambda conv: seen.append(conv[1]["content"]) or "Verdict: A")
    big = pairwise_vs_target(be, gen, {book.book_id: book}, [q], "t", 0, 500, 8, 0, max_model_len=100_000)
    assert book.text in seen[0] and "t chunk" not in seen[0]
    assert big.iloc[0]["n_context_whole book"] == 1 and big.iloc[0]["n_saw_whole_book"] == 1
    seen.clear()
    sets = {"t": [Chunk(book.book_id, "u0001", "x", "t", 1, 6, [(0, 1)], "t chunk", "t chunk")],
            "o": [Chunk(book.book_id, "u0002", "x", "o", 1, 6, [(0, 1)], "o chunk", "o chunk")]}
    overhead = 100_000 - judge_context_budget(words, 100_000, 8, "Who?", "Emma", "Emma", "?")
    small = pairwise_vs_target(be, gen, {book.book_id: book}, [q], "t", 0, 500, 8, 0, chunk_sets=sets,
                               max_model_len=overhead + words(book.text) - 1)  # the book is one word too long
    assert small.iloc[0]["n_context_chapters holding either system's chunks"] == 1
    assert small.iloc[0]["n_saw_whole_book"] == 0
    assert book.units[1].text(book.text) in seen[0] and book.units[2].text(book.text) in seen[0]
    assert book.units[0].text(book.text) not in seen[0]


def test_profile_cap_on_the_book_context_is_applied_and_counted():
    book = make_book("literaryqa:7", units=3, n=6)
    q = EvalQuestion("q1", "literaryqa", book.book_id, book.title, "Who?", ("Emma",), None)
    gen = pd.DataFrame([{"dataset": "literaryqa", "method": m, "qid": "q1", "reference": "Emma", "answer": "a",
                         "contexts": [f"{m} chunk"], "context_chunk_ids": ["x"]} for m in ("t", "o")])
    sets = {m: [Chunk(book.book_id, "u0001", "x", m, 1, 6, [(0, 1)], "c", "c")] for m in ("t", "o")}
    be = ScriptedBackend(reply_fn=lambda conv: "Verdict: Tie")
    capped = pairwise_vs_target(be, gen, {book.book_id: book}, [q], "t", 0, 500, 8, 0, chunk_sets=sets,
                                max_model_len=100_000, book_max_tokens=words(book.text) - 1)
    assert capped.iloc[0]["n_context_chapters holding either system's chunks"] == 1


def test_the_pairwise_judge_is_its_own_setting_and_named_with_the_whole_book_count():
    from litseg_nb.rag.config import PAIRWISE_JUDGE_CONTEXT, RagConfig
    from litseg_nb.rag.report import pairwise_judge_note

    full = RagConfig.for_profile("full")
    # the judge server, not the generator whose answers it compares; Qwen3 + YaRN x4: 131,072 tokens
    assert full.judge_llm.model == "Qwen/Qwen3-32B" and full.judge_llm.backend == "openai"
    assert full.judge_llm.model != full.llm.model and full.judge_llm.max_model_len == PAIRWISE_JUDGE_CONTEXT == 131072
    pair = pd.DataFrame([{"dataset": "literaryqa", "n_pairs": 3, "n_context_whole book": 2},
                         {"dataset": "literaryqa", "n_pairs": 2, "n_context_whole book": 1},
                         {"dataset": "gutenqa", "n_pairs": 4}])
    note = pairwise_judge_note(full, pair)
    assert "Qwen/Qwen3-32B (openai, context 131,072 tokens)" in note
    assert "LiteraryQA pairs that saw the whole book: 3 of 5" in note
