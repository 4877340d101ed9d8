"""The openai backend against fake OpenAI-compatible servers on 127.0.0.1: success path, usage,
routing over several URLs, bounded concurrency, and faults (timeouts, 5xx, malformed JSON, 4xx, refused
connections) → bounded retries, then LLMError; nothing hangs."""
from __future__ import annotations

import math
import socket
import threading
import time

import pytest

from litseg_nb.config import LLMConfig
from litseg_nb.llm import BackendUnavailableError, LLMError, SamplingParams, UsageTag, make_backend
from litseg_nb.llm.openai_backend import OpenAIBackend
from litseg_nb.llm.request_cache import CachedBackend

from fakes import LoopbackServer

pytestmark = pytest.mark.timeout(60)  # pytest-timeout (dev extra): a hang fails, never blocks


class FakeServer(LoopbackServer):
    """An OpenAI-compatible server in a thread. ``mode`` picks its behaviour per request."""

    def __init__(self, mode: str = "ok", delay_s: float = 0.0) -> None:
        self.mode = mode
        self.delay_s = delay_s
        super().__init__()

    def respond(self, h, body: dict) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        mode = self.mode
        if mode == "hang":
            time.sleep(3.0)  # longer than the client's timeout
            return self.send(h, 200, b"{}")
        if mode == "500":
            return self.send(h, 503, b'{"error": "overloaded"}')
        if mode == "malformed":
            return self.send(h, 200, b'{"choices": [ {"message": ')
        if mode == "400":
            return self.send(h, 400, b'{"error": "bad request: max_tokens too large"}')
        if mode == "flaky" and len(self.requests) <= 2:
            return self.send(h, 502, b"bad gateway")
        if h.path.endswith("/chat/completions") and body.get("logprobs"):
            top = [{"token": "Yes", "logprob": -0.25}, {"token": "No", "logprob": -1.5},
                   {"token": "yes", "logprob": -3.0}]
            payload = {"choices": [{"message": {"content": "Yes"}, "finish_reason": "length",
                                    "logprobs": {"content": [{"token": "Yes", "logprob": -0.25,
                                                              "top_logprobs": top}]}}],
                       "usage": {"prompt_tokens": 11, "completion_tokens": 1}}
        elif h.path.endswith("/chat/completions"):
            user = body["messages"][-1]["content"]
            payload = {"choices": [{"message": {"role": "assistant", "content": f"echo: {user}"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                 "prompt_tokens_details": {"cached_tokens": 4}}}
        elif h.path.endswith("/completions"):
            payload = {"choices": [{"text": "abc!", "logprobs": {
                "tokens": ["a", "b", "c", "!"], "token_logprobs": [None, -1.0, -2.0, -0.5]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
        else:
            return self.send(h, 404, b'{"error": "not found"}')
        self.send(h, 200, payload)


@pytest.fixture
def server():
    servers: list[FakeServer] = []

    def make(mode="ok", delay_s=0.0):
        s = FakeServer(mode, delay_s)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def client(*urls, **kw) -> OpenAIBackend:
    opts = dict(timeout_s=1.0, max_retries=2, max_concurrency=4)
    opts.update(kw)
    return OpenAIBackend("fake-model", base_urls=urls, tokenizer=False, **opts)


CONV = [{"role": "user", "content": "hello"}]


def test_chat_usage_and_request_body(server):
    s = server()
    b = client(s.url, structured_output=True)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    gens = b.chat([CONV, [{"role": "user", "content": "two"}]],
                  SamplingParams(max_new_tokens=9, temperature=0.0, json_schema=schema, stop=("\n",)),
                  UsageTag(method="m", book="b", stage="s"))
    assert [g.text for g in gens] == ["echo: hello", "echo: two"]
    g = gens[0]
    assert (g.prompt_tokens, g.completion_tokens, g.cached_prompt_tokens) == (7, 3, 4)
    assert g.finish_reason == "stop" and g.latency_s > 0
    req = s.requests[0]
    assert req["model"] == "fake-model" and req["max_tokens"] == 9 and req["stop"] == ["\n"]
    assert req["response_format"]["json_schema"]["schema"] == schema
    row = b.ledger.rows()[0]
    assert (row["calls"], row["prompt_tokens"], row["cached_prompt_tokens"]) == (2, 14, 8)
    # without structured output the schema is not sent
    client(s.url).chat([CONV], SamplingParams(json_schema=schema))
    assert "response_format" not in s.requests[-1]


def test_logprobs_and_token_logprobs(server):
    s = server()
    b = client(s.url)
    lp = b.next_token_logprobs([CONV], ["Yes", "No", "Maybe"])[0]
    assert lp["Yes"] == -0.25 and lp["No"] == -1.5 and lp["Maybe"] == -math.inf
    req = s.requests[-1]
    assert req["logprobs"] is True and req["top_logprobs"] == 20 and req["max_tokens"] == 1
    assert b.token_logprobs([[1, 2, 3]])[0] == [-1.0, -2.0]
    assert s.requests[-1]["echo"] is True and s.requests[-1]["prompt"] == [1, 2, 3]


def test_distinct_prefixes_spread_over_base_urls(server):
    # prefix-affine routing (tests/test_llm_routing.py): unrelated requests hash over the replicas
    a, c = server(), server()
    b = client(a.url, c.url, max_concurrency=3)
    convs = [[{"role": "user", "content": str(i)}] for i in range(12)]
    gens = b.chat(convs)
    assert [g.text for g in gens] == [f"echo: {i}" for i in range(12)]  # order kept
    assert len(a.requests) + len(c.requests) == 12 and a.requests and c.requests
    assert b.routed == [len(a.requests), len(c.requests)]


def test_concurrency_is_bounded(server):
    s = server(delay_s=0.3)
    b = client(s.url, max_concurrency=3)
    t0 = time.perf_counter()
    b.chat([[{"role": "user", "content": str(i)}] for i in range(9)])
    elapsed = time.perf_counter() - t0
    assert s.max_active == 3  # requests overlap, but never more than max_concurrency
    assert elapsed >= 0.85  # 9 requests of 0.3 s, 3 at a time


@pytest.mark.parametrize("mode", ["hang", "500", "malformed"])
def test_faults_retry_then_raise(server, mode):
    s = server(mode)
    b = client(s.url, timeout_s=0.5, max_retries=2)
    t0 = time.perf_counter()
    with pytest.raises(BackendUnavailableError) as err:
        b.chat([CONV])
    elapsed = time.perf_counter() - t0
    assert len(s.requests) == 3 and b.attempts == 3  # 1 try + 2 retries, then give up
    assert s.url in str(err.value) and "3 attempt(s)" in str(err.value)
    cause = {"hang": "no answer within 0.5s", "500": "HTTP 503", "malformed": "malformed JSON"}[mode]
    assert cause in str(err.value) and "\n" not in str(err.value)
    assert elapsed < 10


def test_4xx_is_not_retried(server):
    s = server("400")
    b = client(s.url, max_retries=3)
    with pytest.raises(LLMError, match="HTTP 400"):
        b.chat([CONV])
    assert len(s.requests) == 1


def test_refused_connection_retries_then_raises():
    with socket.socket() as sock:  # a loopback port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    b = client(f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(LLMError, match=rf"127\.0\.0\.1:{port}.*connection error"):
        b.chat([CONV])
    assert b.attempts == 2


def test_transient_5xx_recovers_and_failover_to_other_url(server):
    flaky = server("flaky")
    b = client(flaky.url, max_retries=3)
    assert b.chat([CONV])[0].text == "echo: hello"
    assert len(flaky.requests) == 3  # two 502s, then success
    down, up = server("500"), server()
    b2 = client(down.url, up.url, max_retries=1)
    gens = b2.chat([CONV, CONV, CONV, CONV])
    assert all(g.text == "echo: hello" for g in gens)  # every request failed over to `up`


def test_retry_backoff_is_exponential(server, monkeypatch):
    s = server("500")
    sleeps: list[float] = []
    caller, real_sleep = threading.current_thread(), time.sleep

    def record(d: float) -> None:  # time.sleep is global: other threads (servers, earlier tests) pass through
        if threading.current_thread() is caller:
            sleeps.append(d)
        else:
            real_sleep(d)

    monkeypatch.setattr("openai._base_client.time.sleep", record)  # the openai client's backoff
    b = client(s.url, max_retries=4)
    with pytest.raises(LLMError):
        b.chat([CONV])
    assert len(sleeps) == 4
    for d, base in zip(sleeps, [0.5, 1.0, 2.0, 4.0]):
        assert base * 0.75 <= d <= base


def test_make_backend_openai_with_cache(server, tmp_path):
    s = server()
    cfg = LLMConfig(backend="openai", model="fake-model", base_urls=(s.url,), request_timeout_s=1.0,
                    max_retries=1, use_cache=True)
    b1 = make_backend(cfg, cache_path=tmp_path / "r.sqlite")
    assert isinstance(b1, CachedBackend) and b1.name == "openai"
    b1.chat([CONV])
    b2 = make_backend(cfg, cache_path=tmp_path / "r.sqlite")
    g = b2.chat([CONV])[0]
    assert g.cache_hit and g.cached_prompt_tokens == 4 and len(s.requests) == 1
    with pytest.raises(LLMError, match="no base_urls"):
        make_backend(LLMConfig(backend="openai", base_urls=(), use_cache=False))
