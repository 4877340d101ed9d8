"""Perplexity chunking through a non-hf backend: the vLLM backend class over a
stand-in engine, and the openai backend against a loopback server, both computing prompt
log-probs with the tiny model, give the hf path's sentence scores and chunks."""
from __future__ import annotations

import math
import sys
import types

import pytest
import torch
from fakes import LoopbackServer

from litseg_nb.chunkers.perplexity import (KVWindowScorer, perplexity_chunks, segment_token_ids,
                                           sentence_perplexities, unit_segments, window_plan,
                                           windowed_token_logprobs)
from fakes import toy_book
from litseg_nb.llm.hf import HFBackend
from litseg_nb.llm.openai_backend import OpenAIBackend

pytestmark = pytest.mark.timeout(300)

STORY = " ".join(f"Sentence number {i} tells of event {i}, and then the weather changed." for i in range(1, 25))
BOOK = toy_book(STORY)


@pytest.fixture(scope="module")
def hf() -> HFBackend:
    return HFBackend("tiny-random", device="cpu", batch_size=4)


def prompt_logprobs(model, ids: list[int]) -> list[float]:
    """log p(ids[k] | ids[:k]) for k >= 1, one unpadded forward pass (what a server computes)."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[k - 1, ids[k]]) for k in range(1, len(ids))]


class _LP:
    def __init__(self, v: float) -> None:
        self.logprob = v


class StubEngine:
    """Stands in for ``vllm.LLM``: ``generate`` answers ``prompt_logprobs`` with the tiny model."""

    def __init__(self, hf: HFBackend) -> None:
        self.hf = hf
        self.prompts: list[list[int]] = []

    def get_tokenizer(self):
        return self.hf.tokenizer

    def generate(self, prompts, sampling, use_tqdm=False):
        assert sampling["prompt_logprobs"] == 0 and sampling["max_tokens"] == 1
        outs = []
        for p in prompts:
            ids = list(p["prompt_token_ids"])
            self.prompts.append(ids)
            lps = prompt_logprobs(self.hf.model, ids)
            outs.append(types.SimpleNamespace(
                prompt_token_ids=ids, num_cached_tokens=0,
                prompt_logprobs=[None] + [{t: _LP(v)} for t, v in zip(ids[1:], lps)]))
        return outs


@pytest.fixture
def vllm_backend(hf, monkeypatch):
    fake = types.ModuleType("vllm")
    fake.SamplingParams = lambda **kw: kw  # the engine above reads the keywords
    monkeypatch.setitem(sys.modules, "vllm", fake)
    from litseg_nb.llm.vllm_backend import VLLMBackend

    return VLLMBackend("tiny-random", engine=StubEngine(hf))


@pytest.fixture
def echo_server(hf):
    """An OpenAI-compatible /v1/completions with echo, computing log-probs with the tiny model."""
    received: list[list[int]] = []

    class Echo(LoopbackServer):
        def respond(self, handler, body):
            ids = list(body["prompt"])
            received.append(ids)
            assert body["echo"] is True and handler.path.endswith("/completions")
            lps = prompt_logprobs(hf.model, ids)
            self.send(handler, 200, {"choices": [{"text": "", "logprobs": {
                "tokens": [str(t) for t in ids] + ["x"],
                "token_logprobs": [None] + lps + [-1.0]}}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}})

    with Echo() as srv:
        yield srv.url, received


def test_window_plan_replays_the_kv_cache_schedule(hf):
    ids = list(range(5, 155))
    for max_context, block in [(512, 16), (40, 16), (32, 32), (50, 7)]:
        sc = KVWindowScorer(hf.model, max_context, block)
        sc.token_logprobs(ids)
        plan = window_plan(len(ids), max_context, block)
        assert plan[0][:2] == (0, 0) and plan[-1][2] == len(ids)
        assert all(b0 == a1 for (_, _, b0), (_, a1, _) in zip(plan, plan[1:]))  # contiguous blocks
        assert max(b - c for c, _, b in plan) == sc.max_cache_seen <= max_context
        assert all(c1 >= c0 for (c0, _, _), (c1, _, _) in zip(plan, plan[1:]))  # drops oldest
        assert (sum(1 for c, _, _ in plan if c > 0) > 0) == (sc.dropped_tokens > 0)


@pytest.mark.parametrize("kind", ["vllm", "openai"], ids=["stub-engine", "echo-server"])
def test_non_hf_backend_scores_equal_hf_on_the_tiny_model(kind, hf, vllm_backend, echo_server,
                                                          fresh_dirs):
    unit = BOOK.units[0]
    if kind == "vllm":
        other = vllm_backend
    else:
        url, received = echo_server
        other = OpenAIBackend("tiny-random", base_urls=[url], tokenizer=hf.tokenizer, max_retries=0,
                              timeout_s=30)
    ids, _ = segment_token_ids(hf.tokenizer, unit_segments(BOOK, unit))
    assert len(ids) > 64
    # the unit fits in max_context: both paths see all preceding text (blocks of 32 for hf)
    want = sentence_perplexities(BOOK, unit, hf, max_context=4096, block_tokens=32)
    got = sentence_perplexities(BOOK, unit, other, max_context=4096, block_tokens=32)
    assert len(got) == len(want) == unit.n_sentences
    assert got == pytest.approx(want, abs=1e-4)
    sent = vllm_backend.llm.prompts if kind == "vllm" else received
    assert sent == [ids]  # the blocks that all see the text's start: one request
    rows = other.ledger.rows()
    assert rows and rows[0]["prompt_tokens"] == len(ids)
    # and the chunks (minima of the scores) are the same
    ch_hf = perplexity_chunks(BOOK, unit, 0.0, backend=hf, max_context=4096, block_tokens=32)
    ch_other = perplexity_chunks(BOOK, unit, 0.0, backend=other, max_context=4096, block_tokens=32)
    assert [(c.from_idx, c.to_idx) for c in ch_other] == [(c.from_idx, c.to_idx) for c in ch_hf]


def test_windows_bound_the_context_like_the_kv_cache(hf, vllm_backend):
    """Past max_context: every window holds at most max_context (+1) tokens; values match the hf
    path up to the first dropped token, and stay close after it (fresh vs carried keys)."""
    unit = BOOK.units[0]
    ids, _ = segment_token_ids(hf.tokenizer, unit_segments(BOOK, unit))
    max_context, block = 48, 16
    got = windowed_token_logprobs(vllm_backend, ids, max_context, block)
    sc = KVWindowScorer(hf.model, max_context, block)
    want = sc.token_logprobs(ids)
    assert sc.dropped_tokens > 0
    windows = vllm_backend.llm.prompts
    assert len(windows) > 2 and max(map(len, windows)) <= max_context + 1
    assert math.isnan(got[0]) and all(not math.isnan(v) for v in got[1:])
    first_drop = next(a for c, a, _ in window_plan(len(ids), max_context, block) if c > 0)
    assert got[1:first_drop + 1] == pytest.approx(want[1:first_drop + 1], abs=1e-4)
    # the tokens scored after a drop see the same positions in both paths; only the keys of the
    # older context tokens differ (carried vs recomputed): the values differ, but not wildly
    diffs = [abs(g - w) for g, w in zip(got[first_drop + 1:], want[first_drop + 1:])]
    assert max(diffs) > 1e-6 and sum(diffs) / len(diffs) < 2.0


def test_openai_backend_without_tokenizer_is_a_clear_error():
    backend = OpenAIBackend("unknown-served-model", base_urls=["http://127.0.0.1:9/v1"],
                            tokenizer=False)
    with pytest.raises(Exception, match="tokenizer"):
        sentence_perplexities(BOOK, BOOK.units[0], backend, 4096, 32)
