"""The persistent SQLite request cache: persistence across backend instances, interrupted runs,
hit/miss counts, key sensitivity."""
from __future__ import annotations

import sqlite3

import pytest

from litseg_nb.config import LLMConfig
from litseg_nb.llm import Generation, LLMError, SamplingParams, UsageTag, make_backend
from fakes import ScriptedBackend
from litseg_nb.llm.request_cache import CachedBackend, RequestCache


def conv(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i}"}]


def echo(c) -> str:
    return "answer to " + c[-1]["content"]


class CountingBackend(ScriptedBackend):
    """A scripted backend that counts requests and can fail after a given number of them."""

    fail_after: int | None = None

    def chat(self, conversations, params=SamplingParams(), tag=UsageTag()):
        out = []
        for c in conversations:
            if self.fail_after is not None and len(self.calls) >= self.fail_after:
                raise KeyboardInterrupt("simulated interruption")
            out.extend(super().chat([c], params, tag))
        return out


def test_hits_persist_across_backend_instances(tmp_path):
    db = tmp_path / "req.sqlite"
    first = CachedBackend(ScriptedBackend(reply_fn=echo), RequestCache(db), chunk_size=2)
    gens = first.chat([conv(1), conv(2), conv(3)], SamplingParams(max_new_tokens=5))
    assert [g.cache_hit for g in gens] == [False] * 3
    assert (first.hits, first.misses) == (0, 3)

    inner = ScriptedBackend(reply_fn=echo)
    second = CachedBackend(inner, RequestCache(db), chunk_size=2)
    again = second.chat([conv(2), conv(1), conv(4)], SamplingParams(max_new_tokens=5))
    assert [g.text for g in again] == [echo(conv(2)), echo(conv(1)), echo(conv(4))]
    assert [g.cache_hit for g in again] == [True, True, False]
    assert (second.hits, second.misses) == (2, 1)
    assert inner.calls == [conv(4)]  # only the new request reached the backend
    # a hit keeps the original usage numbers
    assert again[0].prompt_tokens == gens[1].prompt_tokens
    assert again[0].completion_tokens == gens[1].completion_tokens
    rows = second.ledger.rows()
    assert rows[0]["calls"] == 3 and rows[0]["cache_hits"] == 2


def test_key_covers_model_params_and_messages(tmp_path):
    db = tmp_path / "req.sqlite"
    inner = ScriptedBackend(reply_fn=echo)
    b = CachedBackend(inner, RequestCache(db))
    b.chat([conv(1)], SamplingParams(max_new_tokens=5))
    b.chat([conv(1)], SamplingParams(max_new_tokens=6))  # other params
    b.chat([conv(1)], SamplingParams(max_new_tokens=5, json_schema={"type": "object"}))
    b.chat([[{"role": "system", "content": "s"}, *conv(1)]], SamplingParams(max_new_tokens=5))
    other = ScriptedBackend(reply_fn=echo, model_id="other-model")
    CachedBackend(other, RequestCache(db)).chat([conv(1)], SamplingParams(max_new_tokens=5))
    assert len(inner.calls) == 4 and len(other.calls) == 1
    b.chat([conv(1)], SamplingParams(max_new_tokens=5))
    assert len(inner.calls) == 4 and b.hits == 1


def test_interrupted_run_resumes_without_repeating_finished_requests(tmp_path):
    db = tmp_path / "req.sqlite"
    convs = [conv(i) for i in range(10)]
    crashing = CountingBackend(reply_fn=echo)
    crashing.fail_after = 5  # dies inside the third slice of 2
    b1 = CachedBackend(crashing, RequestCache(db), chunk_size=2)
    with pytest.raises(KeyboardInterrupt):
        b1.chat(convs)
    assert len(RequestCache(db)) == 4  # two slices committed before the interruption

    fresh = CountingBackend(reply_fn=echo)
    b2 = CachedBackend(fresh, RequestCache(db), chunk_size=2)
    gens = b2.chat(convs)
    assert [g.text for g in gens] == [echo(c) for c in convs]
    assert fresh.calls == convs[4:]  # nothing finished before the crash was asked again
    assert (b2.hits, b2.misses) == (4, 6)
    # and a third run makes no call at all
    third = CountingBackend(reply_fn=echo)
    b3 = CachedBackend(third, RequestCache(db), chunk_size=2)
    assert [g.text for g in b3.chat(convs)] == [g.text for g in gens]
    assert third.calls == [] and (b3.hits, b3.misses) == (10, 0)


def test_duplicate_requests_in_one_call_are_computed_once(tmp_path):
    inner = ScriptedBackend(reply_fn=echo)
    b = CachedBackend(inner, RequestCache(tmp_path / "r.sqlite"))
    gens = b.chat([conv(1), conv(1), conv(2)])
    assert len(inner.calls) == 2 and [g.cache_hit for g in gens] == [False, True, False]
    assert (b.hits, b.misses) == (1, 2)


def test_errors_are_not_cached(tmp_path):
    calls = {"n": 0}

    def flaky(c):
        calls["n"] += 1
        if calls["n"] == 1:
            return LLMError("boom")
        return echo(c)

    b = CachedBackend(ScriptedBackend(reply_fn=flaky), RequestCache(tmp_path / "r.sqlite"))
    with pytest.raises(LLMError):
        b.chat([conv(1)])
    assert b.chat([conv(1)])[0].text == echo(conv(1))


def test_logprob_calls_cached_with_candidates_in_key(tmp_path):
    seen = []

    def lp(c, cands):
        seen.append((c[-1]["content"], tuple(cands)))
        return {x: -float(len(x)) for x in cands}

    db = tmp_path / "r.sqlite"
    b = CachedBackend(ScriptedBackend(logprob_fn=lp), RequestCache(db))
    assert b.next_token_logprobs([conv(1)], ["a", "bb"]) == [{"a": -1.0, "bb": -2.0}]
    assert b.next_token_logprobs([conv(1)], ["a", "bb"]) == [{"a": -1.0, "bb": -2.0}]
    b.next_token_logprobs([conv(1)], ["a", "ccc"])
    assert len(seen) == 2 and b.hits == 1


def test_default_location_and_wal(tmp_path, monkeypatch):
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "c"))
    cache = RequestCache()
    assert cache.path == tmp_path / "c" / "llm_requests.sqlite"
    mode = sqlite3.connect(str(cache.path)).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode.lower() == "wal"


def test_make_backend_wraps_hf_in_cache(tmp_path):
    cfg = LLMConfig(backend="hf", model="tiny-random", batch_size=2, use_cache=True, device="cpu")
    db = tmp_path / "r.sqlite"
    b1 = make_backend(cfg, cache_path=db)
    assert isinstance(b1, CachedBackend) and b1.name == "hf" and b1.model_id == "tiny-random"
    p = SamplingParams(max_new_tokens=4)
    g1 = b1.chat([conv(1), conv(2), conv(3)], p)
    b2 = make_backend(cfg, cache_path=db)
    g2 = b2.chat([conv(3), conv(1)], p)
    assert [g.text for g in g2] == [g1[2].text, g1[0].text] and all(g.cache_hit for g in g2)
    assert (b2.hits, b2.misses) == (2, 0)
    lp1 = b1.next_token_logprobs([conv(1)], ["yes", "no"])
    assert b2.next_token_logprobs([conv(1)], ["yes", "no"]) == lp1 and b2.hits == 3
    # the ledger of the second instance shows the hits with the stored usage
    row = b2.ledger.rows()[0]
    assert row["cache_hits"] == 3 and row["prompt_tokens"] > 0
    assert b2.count_tokens("hello world") == 2 and b2.tokenizer is not None
    assert isinstance(g1[0], Generation)


def test_reply_and_prompt_with_lone_surrogate_are_cached_and_read_back(tmp_path):
    """At the cache: a reply holding an unpaired surrogate (an OpenAI body's "\\ud83d"
    escape decodes to one) must not crash the SQLite request cache, and must read back identical."""
    db = tmp_path / "req.sqlite"
    odd = "e \ud83d and \udc00"
    first = CachedBackend(ScriptedBackend(reply_fn=lambda c: odd), RequestCache(db))
    prompt = [{"role": "user", "content": "again: " + odd}]  # a reply fed back into a prompt
    assert first.chat([prompt], SamplingParams(max_new_tokens=5))[0].text == odd
    inner = ScriptedBackend(reply_fn=lambda c: "recomputed")
    second = CachedBackend(inner, RequestCache(db))
    hit = second.chat([prompt], SamplingParams(max_new_tokens=5))[0]
    assert hit.cache_hit and hit.text == odd and inner.calls == []
    # a valid non-ASCII prompt keeps the key it had before (plain UTF-8 bytes)
    import hashlib
    import json

    from litseg_nb.llm.request_cache import CACHE_FORMAT

    payload = {"messages": "“Emma” — Hartfield"}
    blob = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, ensure_ascii=False, default=str)
    assert RequestCache.make_key(payload) == hashlib.sha256(blob.encode("utf-8")).hexdigest()
