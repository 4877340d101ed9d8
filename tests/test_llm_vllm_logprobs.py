"""vLLM next-token log-probs: one prefix-cacheable request per conversation, an
extra request only for a candidate outside the top-k, every computed token in the ledger, and the
same values as the hf backend (stand-in engine computing with the tiny model)."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from litseg_nb.llm.hf import HFBackend

CONVS = [[{"role": "user", "content": "Is the sky blue? Answer 1 or 2."}],
         [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Pick a or b."}]]


class _LP:
    def __init__(self, v: float) -> None:
        self.logprob = v


class TopKEngine:
    """``vllm.LLM`` stand-in: ``logprobs=k`` gives the top-k (+ sampled) raw log-probs of the next
    token; ``prompt_logprobs=0`` the log-prob of each prompt token (vLLM's two modes)."""

    def __init__(self, hf: HFBackend) -> None:
        self.hf, self.requests = hf, []

    def get_tokenizer(self):
        return self.hf.tokenizer

    def _logp(self, ids):
        with torch.inference_mode():
            return torch.log_softmax(self.hf.model(input_ids=torch.tensor([ids])).logits[0].float(), -1)

    def generate(self, prompts, sampling, use_tqdm=False):
        outs = []
        for p in prompts:
            ids = list(p["prompt_token_ids"])
            self.requests.append((ids, dict(sampling)))
            logp = self._logp(ids)
            if sampling.get("logprobs"):
                top = torch.topk(logp[-1], sampling["logprobs"]).indices.tolist()
                entry = {t: _LP(float(logp[-1, t])) for t in top}
                outs.append(types.SimpleNamespace(prompt_token_ids=ids, num_cached_tokens=len(ids) // 2, outputs=[
                    types.SimpleNamespace(text="", token_ids=[top[0]], logprobs=[entry], finish_reason="length")]))
            else:
                assert sampling["prompt_logprobs"] == 0
                pl = [None] + [{t: _LP(float(logp[k - 1, t]))} for k, t in enumerate(ids) if k > 0]
                outs.append(types.SimpleNamespace(prompt_token_ids=ids, num_cached_tokens=0, prompt_logprobs=pl,
                                                  outputs=[]))
        return outs


@pytest.fixture(scope="module")
def hf():
    return HFBackend("tiny-random", device="cpu", batch_size=4, prefix_reuse=False)


@pytest.fixture
def vllm_pair(hf, monkeypatch):
    fake = types.ModuleType("vllm")
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    from litseg_nb.llm.vllm_backend import VLLMBackend

    eng = TopKEngine(hf)
    return VLLMBackend("tiny-random", engine=eng), eng


def test_shared_prompt_is_computed_once_and_values_equal_hf(hf, vllm_pair):
    backend, eng = vllm_pair
    logp = eng._logp(backend.prompt_ids(CONVS[0]))[-1]
    ranked = torch.argsort(logp, descending=True).tolist()
    tok = hf.tokenizer
    inside = [tok.decode([ranked[0]]), tok.decode([ranked[3]])]  # in the top-20
    outside = tok.decode([ranked[500]])  # far below it: needs its own request
    assert all(tok(c, add_special_tokens=False).input_ids[0] == t for c, t in
               zip(inside + [outside], [ranked[0], ranked[3], ranked[500]]))
    want = hf.next_token_logprobs(CONVS[:1], inside)
    got = backend.next_token_logprobs(CONVS[:1], inside)
    assert got[0] == pytest.approx(want[0], abs=1e-4)
    prompt = backend.prompt_ids(CONVS[0])
    assert [ids for ids, _ in eng.requests] == [prompt]  # before: one prompt+candidate sequence per candidate
    assert "prompt_logprobs" not in eng.requests[0][1]  # a prompt_logprobs request skips vLLM's prefix cache
    row = backend.ledger.rows()[-1]
    assert row["prompt_tokens"] == len(prompt)  # what was computed, once

    eng.requests.clear()
    cands = inside + [outside]
    want = hf.next_token_logprobs(CONVS, cands)
    ex = backend.next_token_logprobs_ex(CONVS, cands)
    got, gens = [r for r, _ in ex], [g for _, g in ex]
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-4)
    p0, p1 = (backend.prompt_ids(c) for c in CONVS)
    sent = [ids for ids, _ in eng.requests]
    assert sent[:2] == [p0, p1] and len(sent) >= 3  # one per conversation, then the out-of-top-k ones
    assert [ranked[500]] == [s[-1] for s in sent[2:] if s[:-1] == p0]
    extra: dict[tuple, int] = {}
    for s in sent[2:]:
        extra[tuple(s[:-1])] = extra.get(tuple(s[:-1]), 0) + len(s)
    assert gens[0].prompt_tokens == len(p0) + extra.get(tuple(p0), 0)  # the extra requests are counted
    assert gens[1].prompt_tokens == len(p1) + extra.get(tuple(p1), 0)
    assert backend.extra_logprob_requests == len(sent) - 2
