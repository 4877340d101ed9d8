"""The B.2 LLM annotators of Figures 2-3 (notebook 05) read sheets budgeted to their own context: a context
longer than a reader's is rebuilt from the book for it, a request a server refuses fails that item only (never
the annotator's whole sheet), and what was lost is counted per annotator. Figures 2-3 say which annotator
pairs are one model with itself."""
from __future__ import annotations

import json

import pytest

from fakes import FakeOpenAI
from litseg_nb.config import LLMConfig
from litseg_nb.evaluation import human_eval as he
from litseg_nb.llm import make_backend
from tests.conftest import make_book

LONG_WORDS = 1000  # the B.2 guideline alone is ~560 words


def _verdict(body):  # prefers the answer "good"
    user = body["messages"][-1]["content"]
    return "Verdict: A" if user.index("good") < user.index("bad") else "Verdict: B"


def _items(book):
    """Four LiteraryQA pairs; q3's context is the whole (long) book, built for a long-context judge."""
    out = []
    for i in range(4):
        it = {"dataset": "literaryqa", "qid": f"q{i}", "target": "T", "opponent": "O", "context": f"short context {i}",
              "question": "q?", "reference": "r", "target_answer": "good", "other_answer": "bad"}
        if i == 3:
            it.update(context=book.text, book_id=book.book_id, units_a=[book.units[1].unit_id], units_b=[],
                      chunks_a=["one chunk"], chunks_b=["another chunk"])
        out.append(it)
    return out


def _book():
    return make_book("literaryqa:1", units=8, n=10, sentence="Sentence {i} of unit {u} is a few words long.")


def _backend(url):
    return make_backend(LLMConfig(backend="openai", model="fake-rater", base_urls=(url,), use_cache=False,
                                  max_retries=0, max_wait_s=5.0))


def test_a_refused_request_fails_one_item_not_the_annotators_sheet(fresh_dirs, tmp_path):
    book = _book()
    assert 600 + len(book.text.split()) > LONG_WORDS  # the server refuses q3's request (guideline + book)
    paths = he.export_pairwise_sheets(_items(book), tmp_path / "sheets")
    with FakeOpenAI(max_words=LONG_WORDS, reply=_verdict) as server:
        res = he.evaluate_pairwise_sheets("test", paths, [_backend(server.url), _backend(server.url)])
    info = res["info"]
    assert info["n_items"] == 3 and info["n_dropped"] == 1  # q3 only; the three others judged by A1-A3
    assert {a: v["request_failed"] for a, v in info["lost_by_annotator"].items()} == {"A1": 1, "A2": 1, "A3": 1}
    assert info["n_llm_errors"] >= 3 and "maximum context length" in info["llm_errors"][0]
    assert res["win_rates"].iloc[0]["win_rate"] == 1.0 and res["win_rates"].iloc[0]["n_items"] == 3


def test_a_context_is_rebuilt_for_the_reader_that_reads_it(fresh_dirs, tmp_path):
    book = _book()
    paths = he.export_pairwise_sheets(_items(book), tmp_path / "sheets")
    with FakeOpenAI(max_words=LONG_WORDS, reply=_verdict) as server:
        res = he.evaluate_pairwise_sheets("test", paths, [_backend(server.url)], context_limits=LONG_WORDS,
                                          books={book.book_id: book})
        longest = max(sum(len(m["content"].split()) for m in r["messages"]) for r in server.chat_requests)
    info = res["info"]
    assert info["n_items"] == 4 and info["n_dropped"] == 0 and info["n_llm_errors"] == 0
    assert all(v["rebuilt_context"] == 1 and v["request_failed"] == 0 for v in info["lost_by_annotator"].values())
    assert longest <= LONG_WORDS  # no request over the reader's context was sent


def test_without_the_book_an_oversized_context_fails_its_item_before_any_request(fresh_dirs, tmp_path):
    book = _book()
    paths = he.export_pairwise_sheets(_items(book), tmp_path / "sheets")
    with FakeOpenAI(max_words=LONG_WORDS, reply=_verdict) as server:
        res = he.evaluate_pairwise_sheets("test", paths, [_backend(server.url)], context_limits=LONG_WORDS)
        sent = [sum(len(m["content"].split()) for m in r["messages"]) for r in server.chat_requests]
    info = res["info"]
    assert info["n_items"] == 3 and info["n_dropped"] == 1 and info["n_llm_errors"] == 0
    assert all(v["over_context"] == 1 for v in info["lost_by_annotator"].values())
    assert len(sent) == 3 * 3 and max(sent) <= LONG_WORDS  # three items for each of A1-A3; q3 never sent


def test_the_export_keeps_what_rebuilds_a_book_context_as_the_sheet_shows_it(tmp_path):
    book = _book()
    paths = he.export_pairwise_sheets(_items(book), tmp_path)
    (rec,) = he.read_book_contexts(paths["key"]).values()
    key = {r["item_id"]: r for r in he._read_rows(paths["key"])}[rec["item_id"]]
    target_units = [book.units[1].unit_id]
    assert (rec["units_a"] if key["target_shown_as"] == "A" else rec["units_b"]) == target_units


def test_figures_2_3_name_the_annotators_that_are_one_model_with_itself(fresh_dirs, tmp_path):
    from fakes import ScriptedBackend

    items = [{"dataset": "gutenqa", "qid": f"q{i}", "target": "T", "opponent": "O", "context": f"c{i}",
              "question": "q?", "reference": "r", "target_answer": "good", "other_answer": "bad"} for i in range(3)]
    paths = he.export_pairwise_sheets(items, tmp_path / "sheets")
    one, two = ScriptedBackend(reply_fn=lambda c: "Verdict: A"), ScriptedBackend(reply_fn=lambda c: "Verdict: B")
    one.model_id, two.model_id = "model-1", "model-2"
    res = he.evaluate_pairwise_sheets("test", paths, [one, two])
    pairs = res["pairs"]
    assert len(pairs) == 10 and int(pairs["same_model"].sum()) == 4  # A1-A3, A1-A5, A3-A5, A2-A4
    assert set(pairs.loc[pairs["annotator_a"] == "A1", "model_a"]) == {"model-1 (greedy)"}
    fig = he.plot_agreement_heatmap(pairs, res["fleiss"], "gutenqa")
    label = " ".join(fig.axes[0].get_xlabel().split())
    assert "4 of 10 pairs are ONE model with itself" in label and "A3 = model-1 (T=0.7)" in label
    assert sum(t.get_text().endswith("*") for t in fig.axes[0].texts) == 8  # both triangles


def test_an_a2_rater_request_refused_loses_that_item_for_every_rater_and_is_counted(fresh_dirs, tmp_path):
    """Tables 1/5/9 (A.2 rubric): a refused request fails its item, not the rater's call; the item leaves every
    sheet (the raters rate the same items) and the info counts it."""
    import csv

    from litseg_nb.core.schema import make_sentence_chunk

    book = make_book("gutenqa:G", units=1, n=8, dataset="gutenqa")
    sets = {m: [make_sentence_chunk(book, book.units[0], m, i, i + 1, i + 1) for i in range(8)] for m in ("a", "b")}
    paths = he.export_rating_sheets(sets, {book.book_id: book}, tmp_path / "sheets", n_per_method=2)
    long_item = sorted(r["item_id"] for r in csv.DictReader(paths["key"].open()))[0]
    for sheet in paths["sheets"].values():  # one chunk too long for the server
        rows = list(csv.DictReader(sheet.open()))
        for r in rows:
            if r["item_id"] == long_item:
                r["chunk_text"] = "word " * 2 * LONG_WORDS
        with sheet.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    reply = json.dumps({d: 4 for d in he.DIMENSIONS})
    with FakeOpenAI(max_words=LONG_WORDS, reply=lambda body: reply) as server:
        filled, key, info = he.llm_fill_rating_sheets(paths["sheets"], paths["key"], tmp_path / "filled",
                                                      [_backend(server.url), _backend(server.url)])
    assert info["n_items_exported"] == 4 and info["n_items"] == 3 and info["n_dropped"] == 1
    assert info["request_failed_by_rater"] == {"rater1": 1, "rater2": 1} and info["n_neutral"] == 0
    assert "maximum context length" in info["llm_errors"][0]
    long_df = he.import_ratings(filled, key)  # every sheet rates the key's items: the strict import passes
    assert long_item not in set(long_df.item_id) and long_df.item_id.nunique() == 3 and (long_df.score == 4).all()
