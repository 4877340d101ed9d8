"""LLM-based baselines: perplexity minima rule and KV-cache windowing, margin-sampling threshold,
LumberChunker against scripted replies, propositions; all bounded and lossless."""
import math
import re

import pytest

from litseg_nb.chunkers import BaselinesConfig
from litseg_nb.segmenters import run_chunker
from litseg_nb.chunkers.llm_chunkers import (MarginThreshold, classify_reply, grow_window, lumber_chunks_batch,
                                             margin_chunks_batch, margin_from_logprobs, parse_answer,
                                             proposition_chunks_batch)
from litseg_nb.chunkers.perplexity import (KVWindowScorer, chunk_starts_from_minima, find_minima,
                                           perplexity_chunks)
from litseg_nb.llm.replies import list_items as parse_propositions
from fakes import toy_book
from fakes import ScriptedBackend
from litseg_nb.core.schema import check_coverage

STORY = " ".join(f"Sentence number {i} tells of event {i}." for i in range(1, 13))
BOOK = toy_book(STORY + "\n\nA second paragraph starts here. It ends here.")


def covered(unit, chunks):
    rep = check_coverage(unit, chunks)
    return rep.ok


# ------------------------------------------------------------------ perplexity
@pytest.mark.parametrize("values,theta,expected", [
    ([3, 1, 3], 0.0, [1]),
    ([3, 1, 3], 2.0, [1]),        # drop == θ counts (>=)
    ([3, 1, 3], 2.1, []),
    ([3, 1, 2], 1.5, [1]),        # one side's drop is enough
    ([3, 1, 2], 2.5, []),
    ([3, 1, 1, 3], 1.0, [1]),     # left drop >= θ with an equal right neighbour
    ([3, 1, 1, 3], 3.0, []),
    ([1, 1, 3], 0.0, []),         # equal left neighbour: not a minimum
    ([3, 1, 1, 1, 3], 0.0, [1]),  # plateau: only its first point
    ([0, 5, 0], 0.0, []),         # end points never qualify
    ([2, 1, 3, 2.5, 1, 4], 0.0, [1, 4]),
    ([5, 4.8, 5, 3, 3.1], 0.5, [3]),  # small drops below θ are ignored
])
def test_minima_rule(values, theta, expected):
    assert find_minima(values, theta) == expected


def test_minimum_sentence_ends_its_chunk_and_dynamic_overlap(monkeypatch):
    from litseg_nb.chunkers import perplexity

    u = BOOK.units[0]
    n = u.n_sentences
    scores = [2, 1, 3, 2.5, 1, 4] + [5.0 + i for i in range(n - 6)]
    monkeypatch.setattr(perplexity, "sentence_perplexities", lambda *a: scores)
    assert chunk_starts_from_minima(6, [1, 4]) == [1, 3, 6]
    ch = perplexity_chunks(BOOK, u, 0.0)
    assert [(c.from_idx, c.to_idx) for c in ch][:2] == [(1, 2), (3, 5)]
    assert covered(u, ch)
    ov = perplexity_chunks(BOOK, u, 0.0, dynamic_overlap=True)
    assert [(c.from_idx, c.to_idx) for c in ov][:3] == [(1, 2), (2, 5), (5, n)]


@pytest.fixture(scope="module")
def tiny_lm():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(cfg).eval()


def test_kv_windowing_equals_single_pass_when_text_fits(tiny_lm):
    import torch

    ids = [(7 * i + 3) % 97 for i in range(120)]
    with torch.no_grad():
        logits = tiny_lm(torch.tensor([ids])).logits[0]
    ref = torch.log_softmax(logits.float(), -1)[:-1].gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1)
    single = KVWindowScorer(tiny_lm, max_context=512, block_tokens=512).token_logprobs(ids)
    blocked = KVWindowScorer(tiny_lm, max_context=512, block_tokens=17).token_logprobs(ids)
    assert math.isnan(single[0]) and math.isnan(blocked[0])
    assert single[1:] == pytest.approx(ref.tolist(), abs=1e-4)
    assert blocked[1:] == pytest.approx(ref.tolist(), abs=1e-4)


def test_kv_windowing_drops_oldest_beyond_context(tiny_lm):
    ids = [(5 * i + 1) % 97 for i in range(150)]
    sc = KVWindowScorer(tiny_lm, max_context=40, block_tokens=16)
    lp = sc.token_logprobs(ids)
    full = KVWindowScorer(tiny_lm, max_context=512, block_tokens=16).token_logprobs(ids)
    assert len(lp) == len(ids) and all(not math.isnan(v) for v in lp[1:])
    assert sc.max_cache_seen <= 40 and sc.dropped_tokens > 0
    # before anything is dropped the values are those of the full pass
    # (blocks of 16: the third block, tokens 32.., is the first fed after a drop)
    assert lp[1:33] == pytest.approx(full[1:33], abs=1e-4)
    assert lp[60:] != pytest.approx(full[60:], abs=1e-6)


# ------------------------------------------------------------------ margin sampling
def test_margin_threshold_update_on_scripted_margins():
    thr = MarginThreshold(window=5)
    margins = [0.5, -0.2, 0.1, 0.3, -0.4, 0.25, -0.05]
    splits = [thr.decide(m) for m in margins]
    assert splits == [False, True, False, False, True, False, True]
    assert thr.theta == pytest.approx((0.1 + 0.3 - 0.4 + 0.25 - 0.05) / 5)


def test_margin_sign_convention():
    assert margin_from_logprobs({"1": math.log(0.2), "2": math.log(0.7)}) == pytest.approx(0.5)  # keep
    assert margin_from_logprobs({"1": math.log(0.9)}) == pytest.approx(-0.9)


def test_margin_chunks_follow_the_script_and_prompt():
    u = BOOK.units[0]
    n = u.n_sentences
    # margins for sentences 2..n; split where margin <= θ
    margins = iter([0.5, -0.2, 0.1, 0.3, -0.4, 0.25, -0.05] + [0.9] * 20)
    prompts = []

    def lp(conv, cands):
        prompts.append(conv[-1]["content"])
        m = next(margins)
        p_keep, p_split = (0.5 + m / 2), (0.5 - m / 2)
        return {"1": math.log(p_split) if p_split > 0 else -math.inf, "2": math.log(p_keep)}

    be = ScriptedBackend(logprob_fn=lp)
    (chunks,) = margin_chunks_batch([(BOOK, u)], be, window=5)
    assert [c.from_idx for c in chunks][:3] == [1, 3, 6]
    assert covered(u, chunks) and len(prompts) == n - 1
    assert '"Sentence number 1 tells of event 1." and "Sentence number 2 tells of event 2."' in prompts[0]
    assert prompts[0].endswith("Please answer 1 or 2.")


# ------------------------------------------------------------------ LumberChunker
def first_id(conv):
    return int(re.search(r"ID (\d+):", conv[-1]["content"]).group(1))


def last_id(conv):
    return int(re.findall(r"ID (\d+):", conv[-1]["content"])[-1])


def test_parse_and_classify():
    assert parse_answer("Answer: ID 0007") == 7
    assert parse_answer("answer: id: 12.") == 12
    assert parse_answer("The shift is at ID 5") is None
    assert classify_reply("Answer: ID 3", 3, 6) == ("first_id", 3)
    assert classify_reply("Answer: ID 7", 3, 6) == ("outside_window", 7)
    assert classify_reply("Answer: ID 5", 3, 6) == ("valid", 5)
    assert grow_window([10, 10, 10, 10], 1, 25, False) == 3
    assert grow_window([10, 10, 10, 10], 1, 25, True) == 2
    assert grow_window([100, 10], 1, 25, False) == 2  # at least two lines


@pytest.mark.parametrize("kind", ["valid", "outside", "first", "no_answer", "garbage", "retry_then_valid"])
def test_lumber_scripted_replies_bounded_and_lossless(kind):
    u = BOOK.units[0]
    calls = []

    def reply(conv):
        calls.append(conv)
        f, la = first_id(conv), last_id(conv)
        if kind == "valid":
            return f"Answer: ID {min(f + 2, la)}"
        if kind == "outside":
            return f"Answer: ID {la + 5}"
        if kind == "first":
            return f"Answer: ID {f}"
        if kind == "no_answer":
            return f"The content changes at paragraph {f + 1}."
        if kind == "garbage":
            return "\x00\ufffd}{ ]]"
        # retry_then_valid: every first attempt is invalid, the retry is valid
        return "nonsense" if len(calls) % 2 == 1 else f"Answer: ID {f + 1}"

    be = ScriptedBackend(reply_fn=reply)
    (chunks,), (stats,) = lumber_chunks_batch([(BOOK, u)], be, budget=20, max_retries=2)
    assert covered(u, chunks)
    assert chunks[-1].to_idx == u.n_sentences  # the tail is never dropped
    assert [c.from_idx for c in chunks] == sorted({c.from_idx for c in chunks})
    assert chunks[0].from_idx == 1 and all(a.to_idx + 1 == b.from_idx for a, b in zip(chunks, chunks[1:]))
    if kind == "valid":
        assert stats.fallbacks == 0 and not stats.invalid
        assert all(c.to_idx - c.from_idx + 1 <= 2 for c in chunks)
    elif kind == "retry_then_valid":
        assert stats.fallbacks == 0 and stats.calls == 2 * (len(chunks) - 1) or stats.calls >= len(chunks)
    else:
        windows = len(chunks) - (1 if chunks[-1].from_idx == u.n_sentences else 0)
        assert stats.fallbacks == windows  # every window fell back
        assert stats.calls == 3 * windows  # 1 + max_retries per window: bounded
        assert all(c.metadata["fallback"] for c in chunks[:windows])
    # windows never exceed the budget by more than the crossing sentence
    for conv in calls:
        assert first_id(conv) < last_id(conv)


def test_lumber_batches_across_units():
    book2 = toy_book(STORY + "\n###\n" + STORY.replace("event", "storm"), book_id="two")
    units = [(book2, u) for u in book2.units]
    assert len(units) == 2
    sizes = []

    class Counting(ScriptedBackend):
        def chat(self, conversations, params=None, tag=None):
            sizes.append(len(conversations))
            return super().chat(conversations, params, tag)

    be = Counting(reply_fn=lambda c: f"Answer: ID {first_id(c) + 1}")
    per_unit, _ = lumber_chunks_batch(units, be, budget=20)
    assert max(sizes) == 2
    for (b, u), ch in zip(units, per_unit):
        assert covered(u, ch)


# ------------------------------------------------------------------ propositions
def test_propositions_record_source_paragraph_spans():
    u = BOOK.units[0]
    replies = iter(["- Event one happens.\n- Event two happens.", "garbage without items", "still garbage"])
    be = ScriptedBackend(reply_fn=lambda c: next(replies))
    (chunks,), fallbacks = proposition_chunks_batch([(BOOK, u)], be, max_retries=1)
    assert parse_propositions("1. A\n- B\n* C\nno") == ["A", "B", "C"]
    assert fallbacks == 1 and covered(u, chunks)
    props = [c for c in chunks if not c.is_source_span]
    assert [c.text for c in props] == ["Event one happens.", "Event two happens."]
    p_span = props[0].spans[0]
    assert BOOK.text[p_span[0]:p_span[1]].startswith("Sentence number 1")
    fb = [c for c in chunks if c.metadata["fallback"]]
    assert len(fb) == 1 and fb[0].is_source_span and BOOK.text[fb[0].spans[0][0]:fb[0].spans[0][1]] == fb[0].text


# ------------------------------------------------------------------ registry with scripted LLMs
def test_registry_llm_methods_with_scripted_backend(fresh_dirs):
    cfg = BaselinesConfig.for_profile("test", selection={"books": (), "max_units": 0}, lumber_budget_tokens=20, merge_target_tokens=30)

    def lp(conv, cands):
        return {"1": math.log(0.3), "2": math.log(0.6)}

    be = ScriptedBackend(reply_fn=lambda c: (f"Answer: ID {first_id(c) + 1}" if "ID " in c[-1]["content"]
                                             else "- A fact."), logprob_fn=lp)
    for m in ("margin", "lumber", "lumber+merge", "margin+merge", "proposition"):
        ch = run_chunker(m, [BOOK], cfg, backend=be)
        for u in BOOK.units:
            assert covered(u, [c for c in ch if c.unit_id == u.unit_id]), m
    rows = be.ledger.rows()
    assert {r["method"] for r in rows} >= {"margin", "lumber", "proposition"}
