"""Shared-prefix KV reuse in the hf backend: outputs with reuse equal outputs
without it (greedy tokens identical, log-probs within 1e-5), sampling unchanged, and the ledger's
cached prompt tokens equal the prompt tokens that were really not recomputed."""
from __future__ import annotations

import pytest
import torch

from litseg_nb.llm import SamplingParams, UsageTag
from litseg_nb.llm.hf import HFBackend

SYSTEM = ("You segment novels into narrative chunks. Keep every sentence, in order, and return "
          "JSON only. ") * 8
USERS = ["Chapter I. Emma Woodhouse, handsome, clever, and rich.",
         "Step 2: untangle the threads of the chapter below, one per line, citing sentence ids.",
         "x",
         "Chapter II. Mr. Weston was a native of Highbury, and born of a respectable family.",
         "A fifth request, of middling length, to make two batches."]


def convs(users=USERS, system=SYSTEM):
    return [[{"role": "system", "content": system}, {"role": "user", "content": u}] for u in users]


@pytest.fixture(scope="module")
def pair() -> tuple[HFBackend, HFBackend]:
    # the reference is transformers' own path: no prefix, a plain DynamicCache
    off = HFBackend("tiny-random", device="cpu", batch_size=3, prefix_reuse=False, growing_cache=False)
    on = HFBackend("tiny-random", device="cpu", batch_size=3, prefix_reuse=True)
    on.model = off.model  # the very same weights
    return off, on


def count_forward_tokens(model):
    """A forward hook counting the input positions the model computes (batch rows x length)."""
    seen = []

    def hook(_mod, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(int(ids.shape[0] * ids.shape[1]))

    return seen, model.register_forward_pre_hook(hook, with_kwargs=True)


def test_greedy_chat_identical_and_ledger_counts_the_reuse(pair):
    off, on = pair
    on.clear_prefixes()
    params = SamplingParams(max_new_tokens=24)
    want = off.chat(convs(), params)
    got = on.chat(convs(), params, UsageTag("m", "b", "s"))
    assert [g.text for g in got] == [g.text for g in want]
    assert [g.completion_tokens for g in got] == [g.completion_tokens for g in want]
    prompts = [on.prompt_ids(c) for c in convs()]
    shared = min(len(p) for p in prompts)
    from litseg_nb.llm.hf import common_prefix_len

    lcp = min(common_prefix_len(prompts[0], p) for p in prompts[1:])
    assert lcp > 32 and on.prefixes.builds == 1 and on.prefixes.computed_tokens == lcp < shared
    cached = sorted(g.cached_prompt_tokens for g in got)
    assert cached == [0] + [lcp] * 4  # the first user of the new prefix paid for it
    # a later call reuses the stored prefix for every request (nothing rebuilt)
    again = on.chat(convs(USERS[:2]), params)
    assert [g.cached_prompt_tokens for g in again] == [lcp, lcp] and on.prefixes.builds == 1
    assert [g.text for g in again] == [g.text for g in want[:2]]
    row = [r for r in on.ledger.rows() if r["method"] == "m"][0]
    assert row["prompt_tokens"] == sum(map(len, prompts)) and row["cached_prompt_tokens"] == 4 * lcp


def test_cached_tokens_are_exactly_the_tokens_not_computed(pair):
    """prompt_tokens - cached_prompt_tokens summed over a call = prompt positions the model ran."""
    off, on = pair
    on.clear_prefixes()
    params = SamplingParams(max_new_tokens=1)  # one forward pass per batch: the prefill
    seen, handle = count_forward_tokens(on.model)
    try:
        gens = on.chat(convs(), params)
    finally:
        handle.remove()
    prompts = [on.prompt_ids(c) for c in convs()]
    # prefill widths: batches of 3 and 2 rows, padded to the longest suffix of each batch
    from litseg_nb.llm.hf import common_prefix_len

    lcp = min(common_prefix_len(prompts[0], p) for p in prompts[1:])
    order = sorted(range(5), key=lambda i: -len(prompts[i]))
    widths = [3 * (len(prompts[order[0]]) - lcp), 2 * (len(prompts[order[3]]) - lcp)]
    assert seen == [lcp] + widths  # the prefix once, then only the suffixes (padding included)
    computed = sum(g.prompt_tokens - g.cached_prompt_tokens for g in gens)
    assert computed == lcp + sum(len(p) - lcp for p in prompts)


def test_next_token_logprobs_equal_with_and_without_reuse(pair):
    off, on = pair
    on.clear_prefixes()
    want = off.next_token_logprobs(convs(), ["1", "2", "yes"])
    got = on.next_token_logprobs(convs(), ["1", "2", "yes"])
    assert on.prefixes.builds >= 1
    for w, g in zip(want, got):  # the tiny model's log-probs are large (-15): relative 2e-6
        assert g == pytest.approx(w, rel=2e-6, abs=1e-5)


def test_generation_scores_equal_within_1e5(pair):
    """Per-step log-probs of the greedy continuation agree with and without the prefix."""
    off, on = pair
    on.clear_prefixes()
    prompts = [on.prompt_ids(c) for c in convs()]
    plan, *_ = on._plan_prefixes(prompts)
    pre = plan[0]
    assert pre is not None
    rows = [0, 1, 2]
    ids_a, mask_a = off._left_pad([prompts[i] for i in rows])
    ids_b, mask_b = on._left_pad([prompts[i] for i in rows], pre)
    kw = dict(max_new_tokens=12, do_sample=False, output_scores=True, return_dict_in_generate=True,
              pad_token_id=on.tokenizer.pad_token_id, eos_token_id=None)
    with torch.inference_mode():
        a = off.model.generate(input_ids=ids_a, attention_mask=mask_a, **kw)
        b = on.model.generate(input_ids=ids_b, attention_mask=mask_b,
                              past_key_values=on.prefixes.cache_for(pre, len(rows)), **kw)
    assert a.sequences[:, ids_a.shape[1]:].tolist() == b.sequences[:, ids_b.shape[1]:].tolist()
    for sa, sb in zip(a.scores, b.scores):
        diff = (torch.log_softmax(sa.float(), -1) - torch.log_softmax(sb.float(), -1)).abs().max()
        assert float(diff) < 1e-4  # the tiny model's logits are large (init 0.5); SmolLM2: 1e-5


def test_sampling_unchanged_by_reuse(pair):
    off, on = pair
    on.clear_prefixes()
    params = SamplingParams(max_new_tokens=16, temperature=0.9, top_p=0.95, seed=7)
    assert [g.text for g in on.chat(convs(), params)] == [g.text for g in off.chat(convs(), params)]


def test_single_prompt_calls_share_a_prefix_with_recent_prompts(pair):
    off, on = pair
    on.clear_prefixes()
    params = SamplingParams(max_new_tokens=8)
    first = on.chat(convs(USERS[:1]), params)[0]
    assert first.cached_prompt_tokens == 0 and on.prefixes.builds == 0  # nothing to share yet
    second = on.chat(convs(USERS[3:4]), params)[0]
    assert on.prefixes.builds == 1 and second.cached_prompt_tokens == 0  # built now, paid by it
    # the third shares less with the recent ones (the system prompt only): that shorter prefix is
    # cut from the stored one, nothing is computed, so the third request is served from it
    computed = on.prefixes.computed_tokens
    third = on.chat(convs(USERS[1:2]), params)[0]
    assert on.prefixes.builds == 2 and third.cached_prompt_tokens > 32
    assert on.prefixes.computed_tokens == computed
    assert [first.text, second.text, third.text] == [
        g.text for g in off.chat(convs([USERS[0], USERS[3], USERS[1]]), params)]


def test_longer_prefix_extends_a_stored_one_and_store_is_bounded(pair):
    off, on = pair
    on.clear_prefixes()
    params = SamplingParams(max_new_tokens=4)
    on.chat(convs(USERS[:2]), params)  # prefix = system prompt (+ template up to the user turn)
    base = on.prefixes.computed_tokens
    long_users = ["Step 3: segment the chapter. " * 6 + tail for tail in ("Alpha.", "Beta gamma.")]
    gens = on.chat(convs(long_users), params)
    assert on.prefixes.builds == 2
    # the second prefix was built on top of the first: only the extension was computed
    ext = on.prefixes.computed_tokens - base
    assert 32 <= ext < base
    assert sorted(g.cached_prompt_tokens for g in gens)[0] == base  # first user paid the extension
    assert [g.text for g in gens] == [g.text for g in off.chat(convs(long_users), params)]
    from litseg_nb.llm.hf import PrefixStore

    small = PrefixStore.__new__(PrefixStore)  # the LRU bound on its own
    small.__dict__.update(on.prefixes.__dict__)
    small.max_prefixes = 1
    small.entries = type(on.prefixes.entries)(on.prefixes.entries)
    small.entries.popitem(last=False)
    assert len(small.entries) == 1
    on.prefixes.max_prefixes, kept = 1, on.prefixes.max_prefixes
    try:
        on.chat(convs(["Completely different. " * 10 + "a", "Completely different. " * 10 + "b"],
                      system="Another system prompt entirely, for the judge. " * 6), params)
        assert len(on.prefixes.entries) == 1
    finally:
        on.prefixes.max_prefixes = kept


def test_structured_output_identical_with_reuse(pair):
    pytest.importorskip("xgrammar")
    off, on = pair
    on.clear_prefixes()
    off.structured_output = on.structured_output = True
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "additionalProperties": False}
    params = SamplingParams(max_new_tokens=12, json_schema=schema)
    try:
        assert [g.text for g in on.chat(convs(), params)] == [g.text for g in off.chat(convs(), params)]
    finally:
        off.structured_output = on.structured_output = False
    assert on.prefixes.builds == 1


@pytest.mark.smollm2
def test_smollm2_greedy_and_logprobs_identical_with_reuse():
    """SmolLM2-135M-Instruct (packaged GGUF, de-quantised) with LitSeg's real system prompt: shared
    prefix + growing decoding cache against transformers' plain path."""
    from litseg_nb.litseg.prompting import system_prompt

    system = system_prompt(100)
    users = ["You are executing ONLY Step 1. [Chapter Text Content]\n[1] Emma was happy.",
             "You are executing ONLY Step 2."]
    off = HFBackend("smollm2-135m-instruct", device="cpu", batch_size=2, prefix_reuse=False,
                    growing_cache=False)
    on = HFBackend("smollm2-135m-instruct", device="cpu", batch_size=2, prefix_reuse=True)
    on.model = off.model
    params = SamplingParams(max_new_tokens=10)
    want = off.chat(convs(users, system), params)
    got = on.chat(convs(users, system), params)
    assert on.prefixes.builds == 1 and max(g.cached_prompt_tokens for g in got) > 1000
    assert [g.text for g in got] == [g.text for g in want]
    lw = off.next_token_logprobs(convs(users, system), ["{", "1", "The"])
    lg = on.next_token_logprobs(convs(users, system), ["{", "1", "The"])
    diff = max(abs(w[k] - g[k]) for w, g in zip(lw, lg) for k in w)
    print(f"SmolLM2 max |log-prob difference| with vs without reuse: {diff:.2e}")
    assert diff < 3e-5  # float32 round-off of a different summation order; observed ~1e-5


def test_config_switches_reuse():
    from litseg_nb.config import LLMConfig
    from litseg_nb.llm import make_backend

    assert LLMConfig().prefix_reuse is True
    b = make_backend(LLMConfig(backend="hf", model="tiny-random", device="cpu", use_cache=False,
                               prefix_reuse=False))
    assert b.prefix_reuse is False
    gens = b.chat(convs(), SamplingParams(max_new_tokens=2))
    assert b.prefixes.builds == 0 and all(g.cached_prompt_tokens == 0 for g in gens)


# --- the growing decoding cache (buffer instead of torch.cat per token) ----------------------------
def test_growing_cache_greedy_sampled_and_scores_identical_to_plain_dynamic_cache(pair):
    off, _ = pair
    grow = HFBackend("tiny-random", device="cpu", batch_size=3, prefix_reuse=False)
    grow.model = off.model
    assert grow.growing_cache and not off.growing_cache
    for params in (SamplingParams(max_new_tokens=20), SamplingParams(max_new_tokens=20, temperature=0.9, seed=3)):
        assert [g.text for g in grow.chat(convs(), params)] == [g.text for g in off.chat(convs(), params)]
    prompts = [grow.prompt_ids(c) for c in convs()[:3]]
    ids, mask = grow._left_pad(prompts)
    kw = dict(max_new_tokens=10, do_sample=False, output_scores=True, return_dict_in_generate=True,
              pad_token_id=grow.tokenizer.pad_token_id, eos_token_id=None)
    with torch.inference_mode():
        a = off.model.generate(input_ids=ids, attention_mask=mask, **kw)
        b = grow.model.generate(input_ids=ids, attention_mask=mask,
                                past_key_values=grow._new_cache(ids.shape[1] + 10), **kw)
    assert a.sequences.tolist() == b.sequences.tolist()
    assert max(float((sa - sb).abs().max()) for sa, sb in zip(a.scores, b.scores)) == 0.0


def test_growing_layer_writes_in_place_grows_past_its_reserve_and_survives_crop():
    from litseg_nb.llm.hf import _growing_layer_class

    layer = _growing_layer_class()(reserve=4)
    k = torch.arange(2 * 3 * 3 * 2, dtype=torch.float32).reshape(2, 3, 3, 2)
    keys, _ = layer.update(k, k + 1)
    buf = layer._kbuf
    assert buf.shape[-2] == 4 and torch.equal(keys, k)
    step = torch.full((2, 3, 1, 2), -1.0)
    keys, values = layer.update(step, step)  # fits the reserve: written in place, no new buffer
    assert layer._kbuf is buf and keys.data_ptr() == buf.data_ptr() and keys.shape[-2] == 4
    keys, _ = layer.update(step * 2, step * 2)  # past the reserve: a bigger buffer, contents kept
    assert layer._kbuf is not buf and layer._kbuf.shape[-2] >= 8
    assert torch.equal(keys, torch.cat([k, step, step * 2], dim=-2))
    layer.crop(-2)  # transformers replaces the view: the next update rebuilds from it
    keys, _ = layer.update(step * 3, step * 3)
    assert torch.equal(keys, torch.cat([k, step * 3], dim=-2)) and layer.get_seq_length() == 4
