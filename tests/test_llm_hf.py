"""The transformers backend on the tiny random model: log-probs against a hand-made
teacher-forced computation, batched vs unbatched greedy generation, structured output."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg_nb.config import LLMConfig
from litseg_nb.llm import LLMError, SamplingParams, UsageTag, make_backend
from litseg_nb.llm.hf import HFBackend, padded_batches

CONVS = [
    [{"role": "user", "content": "Summarise the chapter in one line."}],
    [{"role": "system", "content": "You segment novels."},
     {"role": "user", "content": "Chapter I. Emma Woodhouse, handsome, clever, and rich, with a "
                                 "comfortable home and happy disposition, seemed to unite some of the "
                                 "best blessings of existence."}],
    [{"role": "user", "content": "Hi"}],
]


@pytest.fixture(scope="module")
def backend() -> HFBackend:
    b = make_backend(LLMConfig(backend="hf", model="tiny-random", batch_size=3, use_cache=False,
                               device="cpu"))
    assert isinstance(b, HFBackend)
    return b


def _manual_logprobs(b: HFBackend, ids: list[int]) -> list[float]:
    """log p(ids[t] | ids[:t]) for t >= 1, from one unpadded forward pass."""
    with torch.no_grad():
        logits = b.model(input_ids=torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    return [float(logp[t - 1, ids[t]]) for t in range(1, len(ids))]


def _ids(b: HFBackend, text: str) -> list[int]:
    return [b.tokenizer.bos_token_id] + b.tokenizer(text, add_special_tokens=False).input_ids


def test_token_logprobs_equal_teacher_forced(backend):
    texts = ["It is a truth universally acknowledged.", "Call me Ishmael. Some years ago",
             "x"]
    got = backend.token_logprobs([_ids(backend, t) for t in texts])  # batched: different lengths, left padding
    for text, lps in zip(texts, got):
        want = _manual_logprobs(backend, _ids(backend, text))
        assert len(lps) == backend.count_tokens(text) == len(want)
        assert lps == pytest.approx(want, abs=2e-4)


def test_next_token_logprobs_equal_teacher_forced(backend):
    cands = ["yes", "no", "1"]
    got = backend.next_token_logprobs(CONVS, cands)
    for conv, scores in zip(CONVS, got):
        prompt = backend.tokenizer(backend.render_prompt(conv), add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = backend.model(input_ids=torch.tensor([prompt])).logits[0, -1].double()
        logp = torch.log_softmax(logits, dim=-1)
        for c in cands:
            first = backend.tokenizer(c, add_special_tokens=False).input_ids[0]
            assert scores[c] == pytest.approx(float(logp[first]), abs=2e-4)


def test_batched_and_unbatched_greedy_generation_agree(backend):
    params = SamplingParams(max_new_tokens=12, temperature=0.0)
    batched = backend.chat(CONVS, params)
    single = [backend.chat([c], params)[0] for c in CONVS]
    for b, s in zip(batched, single):
        assert b.text == s.text
        assert b.completion_tokens == s.completion_tokens and b.prompt_tokens == s.prompt_tokens
        assert 0 < b.completion_tokens <= 12


def test_greedy_generation_equals_manual_argmax_decoding(backend):
    """Greedy generation reproduces a hand-rolled argmax loop (so left padding is not just
    self-consistent but right)."""
    conv = CONVS[1]
    gen = backend.chat([conv, CONVS[2]], SamplingParams(max_new_tokens=6))[0]
    ids = backend.tokenizer(backend.render_prompt(conv), add_special_tokens=False).input_ids
    out = []
    for _ in range(6):
        with torch.no_grad():
            nxt = int(backend.model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
        out.append(nxt)
        if nxt in backend.eos_token_ids:
            break
    body = out[:-1] if out[-1] in backend.eos_token_ids else out
    assert gen.text == backend.tokenizer.decode(body, skip_special_tokens=True)
    assert gen.completion_tokens == len(out)


def test_sampling_is_seeded(backend):
    p = SamplingParams(max_new_tokens=8, temperature=1.0, seed=7)
    a = backend.chat(CONVS[:1], p)[0].text
    assert backend.chat(CONVS[:1], p)[0].text == a


def test_usage_recorded_per_tag(backend):
    backend.ledger.reset()
    tag = UsageTag(method="litseg", book="emma", stage="stage1")
    gens = backend.chat(CONVS[:2], SamplingParams(max_new_tokens=4), tag)
    backend.next_token_logprobs(CONVS[:1], ["a"], UsageTag(method="margin"))
    rows = {r["method"]: r for r in backend.ledger.rows()}
    assert rows["litseg"]["calls"] == 2 and rows["litseg"]["book"] == "emma"
    assert rows["litseg"]["prompt_tokens"] == sum(g.prompt_tokens for g in gens)
    assert rows["litseg"]["completion_tokens"] == sum(g.completion_tokens for g in gens)
    assert rows["litseg"]["latency_s"] > 0
    assert rows["margin"]["calls"] == 1


def test_too_long_prompt_is_a_clear_error():
    b = HFBackend("tiny-random", batch_size=2, max_model_len=32, device="cpu")
    with pytest.raises(LLMError, match="max_model_len=32"):
        b.chat(CONVS[1:2], SamplingParams(max_new_tokens=4))


SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["event", "thread", "turning point"]},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["label", "ok", "tags"],
    "additionalProperties": False,
}


def test_structured_output_parses_as_schema_json():
    b = make_backend(LLMConfig(backend="hf", model="tiny-random", batch_size=3, use_cache=False,
                               structured_output=True, device="cpu"))
    gens = b.chat(CONVS, SamplingParams(max_new_tokens=40, json_schema=SCHEMA))
    for g in gens:
        obj = json.loads(g.text)
        assert set(obj) == {"label", "ok", "tags"}
        assert obj["label"] in SCHEMA["properties"]["label"]["enum"]
        assert isinstance(obj["ok"], bool)
        assert isinstance(obj["tags"], list) and len(obj["tags"]) <= 2
        assert all(t in ("a", "b") for t in obj["tags"])
        assert g.finish_reason == "stop"
    # the same random model without the constraint does not produce JSON (the constraint matters)
    free = b.chat(CONVS[:1], SamplingParams(max_new_tokens=40))[0]
    with pytest.raises(ValueError):
        json.loads(free.text)


def test_schema_ignored_when_structured_output_off(backend):
    params = SamplingParams(max_new_tokens=8, json_schema=SCHEMA)
    assert backend.chat(CONVS[:1], params)[0].text == backend.chat(
        CONVS[:1], SamplingParams(max_new_tokens=8))[0].text


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(LLMError, match="no-such-model"):
        make_backend(LLMConfig(backend="hf", model=str(tmp_path / "no-such-model"), use_cache=False))
    from litseg_nb.config import ConfigError

    with pytest.raises(ConfigError, match="LLMConfig.backend: 'nope'"):  # rejected when the config is built
        LLMConfig(backend="nope", use_cache=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=0, max_size=30), st.integers(1, 8),
       st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]))
def test_padded_batches_cut_only_where_padding_would_exceed_the_cap(lengths, batch_size, cap):
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = padded_batches(order, lengths, batch_size, cap)
    assert [i for b in batches for i in b] == order  # every item once, in order
    for k, b in enumerate(batches):
        assert 1 <= len(b) <= batch_size
        waste = 1 - sum(lengths[i] for i in b) / (lengths[b[0]] * len(b))
        assert waste <= cap + 1e-12
        if k + 1 < len(batches) and len(b) < batch_size:  # cut early: the next item would break the cap
            nxt = b + [batches[k + 1][0]]
            assert 1 - sum(lengths[i] for i in nxt) / (lengths[b[0]] * len(nxt)) > cap
    if cap == 1.0:
        assert [len(b) for b in batches] == [len(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]


def test_padding_cap_splits_forward_batches_and_keeps_the_scores(backend, monkeypatch):
    convs = [[{"role": "user", "content": "word " * n}] for n in (1, 40, 3, 25, 2)]
    cands = ["yes", "no"]
    calls = []
    forward = HFBackend._forward_logits

    def spy(self, seqs, prefix=None):
        calls.append(len(seqs))
        return forward(self, seqs, prefix)

    monkeypatch.setattr(HFBackend, "_forward_logits", spy)
    got = {}
    for cap in (1.0, 0.0):
        monkeypatch.setattr(backend, "max_padding", cap)
        calls.clear()
        got[cap] = backend.next_token_logprobs(convs, cands)
        got[cap, "texts"] = backend.token_logprobs([_ids(backend, c[0]["content"]) for c in convs])
        got[cap, "passes"] = list(calls)
    assert len(got[0.0, "passes"]) > len(got[1.0, "passes"])  # the cap really split batches
    for a, b in zip(got[1.0], got[0.0]):
        assert [a[c] for c in cands] == pytest.approx([b[c] for c in cands], abs=1e-5)
    for a, b in zip(got[1.0, "texts"], got[0.0, "texts"]):
        assert a == pytest.approx(b, abs=1e-5)


def test_max_padding_is_checked():
    from litseg_nb.config import ConfigError

    with pytest.raises(ConfigError, match="max_padding: 1.5 is above the maximum 1.0"):
        LLMConfig(max_padding=1.5)
    with pytest.raises(LLMError, match="max_padding"):
        HFBackend("tiny-random", max_padding=-0.1)
