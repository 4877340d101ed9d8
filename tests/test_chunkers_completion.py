"""Meta-Chunking semantic completion: discriminator, three rewriting stages, two-level summary, and
what the retriever indexes — with a scripted LLM (exact control of every stage) and the tiny model."""
from __future__ import annotations

import pytest

from litseg_nb.chunkers.llm_chunkers import complete_book_chunks, parse_score
from litseg_nb.llm.replies import list_items as parse_items
from fakes import ScriptedBackend
from litseg_nb.core.prompts import load_prompt
from fakes import prompt_source
from litseg_nb.core.schema import Book, Chunk, Sentence, Unit

TEMPLATES = ("discriminator", "reflection", "refinement", "rewrite", "summary_global", "summary_local",
             "summary_fuse")


def _book():
    sents = ["Emma Woodhouse lived at Hartfield with her father.", "She was handsome, clever and rich.",
             "He worried about everyone's health.", "Mr. Knightley visited them that evening."]
    text = " ".join(sents)
    spans, pos = [], 0
    for s in sents:
        spans.append((pos, pos + len(s)))
        pos += len(s) + 1
    unit = Unit("b", "u0", 0, "I", 0, len(text), tuple(Sentence(i + 1, a, z) for i, (a, z) in enumerate(spans)),
                ((0, len(text)),), "dataset")
    book = Book("b", "Emma", "gutenqa", text, [(0, len(text))], [unit])
    chunks = [Chunk("b", "u0", f"u0.c{i}", "perplexity+merge", lo, hi, [(spans[lo - 1][0], spans[hi - 1][1])],
                    text[spans[lo - 1][0]:spans[hi - 1][1]], text[spans[lo - 1][0]:spans[hi - 1][1]])
              for i, (lo, hi) in enumerate([(1, 2), (3, 4)])]
    return book, chunks


def test_templates_are_labelled_as_our_own():
    for t in TEMPLATES:
        src = prompt_source(f"baselines/completion_{t}")
        assert "written for this project" in src and "print no prompt text" in src
        assert load_prompt(f"baselines/completion_{t}").strip()


def test_reply_parsing_goes_through_answer_text():
    assert parse_items("<think>- not this</think>\n- Who is he: Mr. Woodhouse\n* the estate\nnoise", 5) == \
        ["Who is he: Mr. Woodhouse", "the estate"]
    assert parse_score("<think>maybe 2</think> Score: 5") == 5
    assert parse_score("I rate it 12 out of 50") is None


def test_stages_rewrite_only_lacking_chunks_and_keep_spans():
    book, chunks = _book()

    def logprob(conv, cands):  # chunk 2 ("He worried ...") lacks context, chunk 1 does not
        return {"yes": -0.1, "no": -3.0} if "He worried" in conv[-1]["content"].split("Passage to check:")[1] \
            else {"yes": -3.0, "no": -0.1}

    def reply(conv):
        p = conv[-1]["content"]
        if p.startswith("The passage below was cut out"):
            return "- 'He' is Mr. Woodhouse, Emma's father\n- the weather was cold"
        if p.startswith("A passage from the book"):
            return "5" if "Mr. Woodhouse" in p.split("Piece of information:")[1] else "2"
        if p.startswith("Rewrite the passage"):
            assert "the weather" not in p.split("Missing information to add:")[1].split("Related")[0]
            return "Mr. Woodhouse, Emma's father, worried about everyone's health. Mr. Knightley visited them that evening."
        if p.startswith("Using the related passages"):
            return "Early in the novel, at Hartfield."
        if p.startswith("Summarise the core"):
            return "<think>hmm</think>A quiet evening at home."
        if p.startswith("Combine the two summaries"):
            return "A quiet early evening at Hartfield with the Woodhouses and Mr. Knightley."
        raise AssertionError(p[:60])

    be = ScriptedBackend(reply_fn=reply, logprob_fn=logprob)
    out, st = complete_book_chunks(book, chunks, be, "perplexity+merge+completion", embedder=None)
    assert st.chunks == 2 and st.lacking == 1 and st.rewritten == 1 and st.invalid_scores == 0
    a, b = out
    assert a.metadata["completion"]["lacks_context"] is False and a.metadata["completion"]["rewritten"] is None
    assert b.metadata["completion"]["kept_items"] == ["'He' is Mr. Woodhouse, Emma's father"]
    assert b.metadata["completion"]["item_scores"] == [5, 2]
    # retriever text = enhanced summary + rewrite; spans / sentence indices / main_text unchanged
    assert b.text.startswith("A quiet early evening") and "Mr. Woodhouse, Emma's father, worried" in b.text
    assert a.text.startswith("A quiet early evening") and a.text.endswith(chunks[0].main_text)
    for c, o in zip(out, chunks):
        assert (c.spans, c.from_idx, c.to_idx, c.main_text) == (o.spans, o.from_idx, o.to_idx, o.main_text)
        assert c.method == "perplexity+merge+completion" and c.metadata["base_method"] == "perplexity+merge"
        assert c.metadata["completion"]["summary_local"] == "A quiet evening at home."
    assert a.metadata["completion"]["context"] == "neighbouring chunks"
    # every call is recorded under the method's usage tag (efficiency, notebook 08)
    rows = be.ledger.rows()
    assert {r["method"] for r in rows} == {"perplexity+merge+completion"} and sum(r["calls"] for r in rows) == 2 + 1 + 2 + 1 + 6


def test_bad_replies_are_counted_and_keep_the_original():
    book, chunks = _book()
    be = ScriptedBackend(reply_fn=lambda conv: "", logprob_fn=lambda conv, c: {"yes": 0.0, "no": -1.0})
    out, st = complete_book_chunks(book, chunks, be, "m")
    assert st.lacking == 2 and st.no_items == 2 and st.rewritten == 0 and st.empty_summaries == 2
    assert [c.text for c in out] == [c.main_text for c in chunks]

    def short(conv):
        p = conv[-1]["content"]
        return {"The": "- x", "A p": "4", "Rew": "Short."}.get(p[:3], "s")
    out, st = complete_book_chunks(book, chunks, ScriptedBackend(reply_fn=short, logprob_fn=lambda c, k: {"yes": 0.0, "no": -1.0}),
                                   "m", index_summary=False)
    assert st.rejected_rewrites == 2 and all(c.text == c.main_text for c in out)
    assert "shorter than half" in out[0].metadata["completion"]["rewrite_rejected"]


@pytest.mark.slow
def test_runs_with_the_tiny_model(data_dir):
    from litseg_nb.config import LLMConfig
    from litseg_nb.llm import make_backend

    book, chunks = _book()
    be = make_backend(LLMConfig(backend="hf", model="tiny-random", max_new_tokens=8, max_model_len=2048))
    out, st = complete_book_chunks(book, chunks, be, "perplexity+merge+completion", max_new_tokens=8)
    assert len(out) == 2 and st.chunks == 2
    assert all(c.spans == o.spans for c, o in zip(out, chunks))
    assert sum(r["calls"] for r in be.ledger.rows()) >= 2 + 2 * 3


@pytest.mark.slow
def test_registered_method_runs_in_test_profile_with_usage(data_dir, fresh_dirs):
    from litseg_nb.chunkers import ALL_METHODS, LLM_METHODS, BaselinesConfig
    from litseg_nb.segmenters import RunReport, run_chunker
    from litseg_nb.corpus import load_corpus
    from litseg_nb.llm.embeddings import load_embedder
    from litseg_nb.llm import make_backend
    from litseg_nb.core.schema import check_coverage

    assert "perplexity+merge+completion" in ALL_METHODS and "perplexity+merge+completion" in LLM_METHODS
    cfg = BaselinesConfig.for_profile("test")
    books = load_corpus(cfg.corpus)
    be, emb = make_backend(cfg.llm), load_embedder(cfg.embedding)
    rep = RunReport()
    chunks = run_chunker("perplexity+merge+completion", books, cfg, backend=be, embedder=emb, report=rep)
    assert chunks and all("completion" in c.metadata for c in chunks)
    assert all(c.metadata["completion"]["context"].startswith("top-2 similar") for c in chunks)
    base = run_chunker("perplexity+merge", books, cfg, backend=be, embedder=emb)
    assert [(c.chunk_id, c.spans, c.from_idx, c.to_idx) for c in chunks] == \
        [(c.chunk_id, c.spans, c.from_idx, c.to_idx) for c in base]
    by_book = {b.book_id: b for b in books}
    for key in {(c.book_id, c.unit_id) for c in chunks}:
        unit = by_book[key[0]].unit(key[1])
        assert check_coverage(unit, [c for c in chunks if (c.book_id, c.unit_id) == key]).ok
    runs = rep.to_frame()
    assert (runs["llm_calls"] > 0).all()
    assert any(r["method"] == "perplexity+merge+completion" and r["calls"] > 0 for r in be.ledger.rows())
