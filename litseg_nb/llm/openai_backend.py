"""The OpenAI-compatible backend (``backend="openai"``): ``vllm serve``, SGLang, llama.cpp's server, ...

The ``openai`` client sends every request (its retries, backoff and timeouts). On top, only what it lacks:
routing over several ``base_urls``, a ``max_wait_s`` bound, a line while requests wait, secrets redacted from
every message, and a one-line :class:`BackendUnavailableError` naming the server."""
from __future__ import annotations

import hashlib
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Sequence

import httpx

from .base import (BackendBase, BackendUnavailableError, Conversation, Generation, LLMError, SamplingParams,
                   UsageLedger, UsageTag, one_line, reasoning_text_split)
from ..redact import redact_url, url_identity
from .models import ModelNotAvailableError, load_tokenizer, local_tokenizer_source

_PLACEHOLDER = "http://replica.invalid"  # the client's base URL; each attempt is sent to a real replica
_ROUTE_PREFIX_CHARS = 1024  # characters of a request's content that pick its replica
_LOAD_SLACK = 0.25  # bounded loads: a replica takes at most (1 + slack) x its fair share in flight
_TOP_K_LOGPROBS = 20


class ServerRejected(BackendUnavailableError):
    """The server answered an HTTP 4xx status that is not retried."""


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass
class _Call:
    """One request's state across the client's attempts (kept per thread)."""

    order: list[int]  # replicas in the order its attempts try them (the ranking, rotated at the first)
    urls: tuple[str, ...]
    routed: bool
    deadline: float
    attempts: int = 0
    causes: list[str] = field(default_factory=list)
    url: str = ""
    data: Any = None


class _Router(httpx.BaseTransport):
    """The client's transport: each attempt goes to the next replica of its request's order, within what
    ``max_wait_s`` leaves; a 2xx body that is not a JSON object becomes a 502, so the client retries it."""

    def __init__(self, backend: "OpenAIBackend", limits: httpx.Limits) -> None:
        self.backend = backend
        self.inner = httpx.HTTPTransport(limits=limits)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        b, call = self.backend, self.backend._local.call
        left = call.deadline - time.monotonic()
        if left <= 0:
            call.causes.append(f"gave up after llm.max_wait_s={b.max_wait_s:g}s in all")
            return httpx.Response(504, headers={"x-should-retry": "false"}, request=request)
        with b._lock:
            if call.routed and not call.attempts:  # the first replica of the ranking under the load cap
                cap = math.ceil((sum(b._in_flight) + 1) * (1.0 + _LOAD_SLACK) / len(call.order))
                start = next((p for p, i in enumerate(call.order) if b._in_flight[i] < cap), 0)
                call.order = call.order[start:] + call.order[:start]
            idx = call.order[call.attempts % len(call.order)]
            call.attempts += 1
            b.attempts += 1
            if call.routed:
                b._in_flight[idx] += 1
                b.routed[idx] += 1
        head, sep, query = call.urls[idx].partition("?")  # the route goes before the query (a signed address)
        call.url = url = f"{head.rstrip('/')}{request.url.raw_path.decode('ascii')}{sep}{query}"
        timeout = min(b.timeout_s, left)
        ext = {**request.extensions, "timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)}
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"host"]
        sent = httpx.Request(request.method, url, headers=headers, content=request.content, extensions=ext)
        try:
            resp = self.inner.handle_request(sent)
            resp.read()
        except httpx.TimeoutException as exc:
            call.causes.append(f"{url}: no answer within {timeout:g}s ({type(exc).__name__})")
            raise
        except httpx.TransportError as exc:
            call.causes.append(f"{url}: connection error: {type(exc).__name__}: {exc}")
            raise
        finally:
            if call.routed:
                with b._lock:
                    b._in_flight[idx] -= 1
        if resp.status_code >= 400:
            call.causes.append(f"{url}: HTTP {resp.status_code}: {one_line(resp.text, 200)}")
        elif resp.status_code < 300:
            try:
                call.data = json.loads(resp.content)
            except ValueError as exc:
                cause = f"malformed JSON body ({one_line(exc, 80)}): {one_line(repr(resp.text), 120)}"
            else:
                if isinstance(call.data, dict):
                    return resp
                cause = f"unexpected JSON body (not an object): {one_line(repr(resp.text), 120)}"
            call.causes.append(f"{url}: {cause}")
            return httpx.Response(502, content=cause.encode(), request=request)
        return resp

    def close(self) -> None:
        self.inner.close()


class OpenAIBackend(BackendBase):
    """Client of one or more OpenAI-compatible servers. A request's content prefix ranks the replicas by
    rendezvous hashing (requests sharing a prefix meet the same prefix cache); it goes to the first one
    under the bounded-load cap, and each retry moves one on. ``routed`` counts each replica's attempts."""

    name = "openai"

    def __init__(self, model: str, *, base_urls: Sequence[str], api_key: str = "EMPTY",
                 timeout_s: float = 120.0, max_concurrency: int = 8, max_retries: int = 3,
                 structured_output: bool = False, ledger: UsageLedger | None = None, tokenizer: Any = None,
                 enable_thinking: bool = False, max_wait_s: float | None = None, wait_report_s: float = 30.0) -> None:
        import openai

        if not base_urls:
            raise LLMError("openai backend: no base_urls given (e.g. 'http://127.0.0.1:8000/v1')")
        for u in base_urls:
            if httpx.URL(str(u)).userinfo:
                raise LLMError(
                    f"openai backend: base URL {redact_url(u)} carries credentials; they are not used "
                    "(they would replace the API key silently): remove them and put the key in the "
                    "environment variable llm.api_key_env names (sent as 'Authorization: Bearer')")
        self._secret = api_key if api_key and api_key != "EMPTY" else ""
        self.model_id = model
        self.base_urls = tuple(u.rstrip("/") for u in base_urls)
        # the model in cache keys: served id and endpoints (redacted, with a hash of any secret)
        self.revision = f"{model}@{','.join(sorted(url_identity(u) for u in self.base_urls))}"
        self.server = ", ".join(redact_url(u) for u in self.base_urls)
        self.timeout_s = timeout_s
        self.max_wait_s = float(max_wait_s) if max_wait_s is not None else \
            (max_retries + 1) * timeout_s + max_retries * 8.0  # 8 s: the client's longest backoff
        self.wait_report_s = max(0.01, float(wait_report_s))
        self.max_concurrency = max_concurrency
        self.structured_output = structured_output
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.enable_thinking = bool(enable_thinking)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._in_flight = [0] * len(self.base_urls)
        self.routed = [0] * len(self.base_urls)
        self.attempts = 0  # HTTP attempts made
        limits = httpx.Limits(max_connections=max_concurrency * len(self.base_urls))
        self._client = openai.OpenAI(
            api_key=api_key or "EMPTY", base_url=_PLACEHOLDER, max_retries=max_retries, timeout=timeout_s,
            http_client=httpx.Client(transport=_Router(self, limits), timeout=timeout_s))
        self._tokenizer = tokenizer
        self._waiting: dict[int, float] = {}  # id of a request's _Call -> start time (not yet answered)
        self._monitor: threading.Thread | None = None
        self._counts: dict[str, int] = {}  # /tokenize answers

    def redact(self, text: str) -> str:
        out = redact_url(str(text))
        return out.replace(self._secret, "***") if len(self._secret) >= 4 else out

    def _watch(self) -> None:
        """Print one line every ``wait_report_s`` while a request has waited that long."""
        from tqdm.auto import tqdm

        last = time.monotonic()
        while True:
            time.sleep(min(1.0, self.wait_report_s / 4))
            now = time.monotonic()
            with self._lock:
                if not self._waiting:
                    self._monitor = None
                    return
                n, oldest = len(self._waiting), now - min(self._waiting.values())
            if oldest >= self.wait_report_s and now - last >= self.wait_report_s:
                last = now
                tqdm.write(f"[litseg_nb] waiting for {self.server} ({self.model_id}): {n} request(s) unanswered, "
                           f"oldest {oldest:.0f}s (gives up after llm.max_wait_s={self.max_wait_s:.0f}s)",
                           file=sys.stderr)

    def route_key(self, body: dict[str, Any]) -> str:
        if "messages" in body:
            text = "".join(f"\x1e{m.get('role', '')}\x1f{m.get('content', '')}" for m in body["messages"])
        else:
            text = json.dumps(body.get("prompt"))
        return text[:_ROUTE_PREFIX_CHARS]

    def replica_ranking(self, key: str) -> list[int]:
        """Replica indices in ``key``'s order of preference (rendezvous hashing)."""
        return sorted(range(len(self.base_urls)), key=lambda i: (-_hash64(f"{self.base_urls[i]}\x00{key}"), i))

    def _post(self, route: str, body: dict[str, Any], urls: Sequence[str] | None = None) -> tuple[dict, float]:
        """POST ``body`` to ``route`` (routed over the replicas unless ``urls``); the JSON object answered
        and the seconds it took."""
        import openai

        t0 = time.perf_counter()
        order = self.replica_ranking(self.route_key(body)) if not urls else [0]
        call = self._local.call = _Call(order, tuple(urls or self.base_urls), not urls,
                                        time.monotonic() + self.max_wait_s)
        with self._lock:
            self._waiting[id(call)] = time.monotonic()
            if self._monitor is None:
                self._monitor = threading.Thread(target=self._watch, name="litseg-openai-wait", daemon=True)
                self._monitor.start()
        try:
            self._client.post(route, body=body, cast_to=httpx.Response)
            return call.data, time.perf_counter() - t0
        except openai.APIStatusError as exc:
            if 400 <= exc.status_code < 500 and exc.status_code not in (408, 409, 429):
                raise ServerRejected(self.redact(
                    f"openai server {call.url} answered HTTP {exc.status_code} (not retried): "
                    f"{one_line(exc.response.text, 300)}")) from None
        except openai.APIError:  # connection errors and timeouts, after the client's retries
            pass
        finally:
            with self._lock:
                self._waiting.pop(id(call), None)
        causes = call.causes or ["no answer"]
        earlier = [c for c in dict.fromkeys(causes[:-1]) if c != causes[-1]]
        raise BackendUnavailableError(self.redact(
            f"openai server {self.server} ({self.model_id}) unavailable after {call.attempts} attempt(s): "
            f"{causes[-1]}" + (f"; earlier: {'; '.join(earlier)}" if earlier else "")))

    def _map(self, fn, items: Sequence[Any], tag: UsageTag) -> list[Any]:
        """``fn`` over ``items`` (``max_concurrency`` at a time), results in order and in the ledger."""
        if len(items) <= 1 or self.max_concurrency == 1:
            out = [fn(x) for x in items]
        else:
            pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items)))
            try:
                futures = [pool.submit(fn, x) for x in items]
                for f in as_completed(futures):
                    f.result()  # the first failure to happen is raised
                out = [f.result() for f in futures]
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        for r in out:
            self.ledger.record(tag, r if isinstance(r, Generation) else r[1])
        return out

    def _field(self, data: dict[str, Any], *path: Any) -> Any:
        """``data[path...]``; a body without it is not an OpenAI response."""
        cur: Any = data
        for p in path:
            try:
                cur = cur[p]
            except (KeyError, IndexError, TypeError):
                raise BackendUnavailableError(self.redact(
                    f"openai server {self.server} ({self.model_id}) answered a body without "
                    f"{'.'.join(map(str, path))}: {one_line(json.dumps(data), 200)}")) from None
        return cur

    @staticmethod
    def _usage(data: dict[str, Any]) -> tuple[int, int, int | None]:
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), (
            int(cached) if cached is not None else None)

    def _chat_body(self, conv: Conversation, params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model_id, "messages": list(conv),
                                "max_tokens": params.max_new_tokens,
                                "temperature": params.temperature, "top_p": params.top_p,
                                "seed": params.seed,
                                "chat_template_kwargs": {"enable_thinking": self.enable_thinking}}
        if params.stop:
            body["stop"] = list(params.stop)
        if params.json_schema is not None and self.structured_output:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "output", "schema": params.json_schema, "strict": True}}
        return body

    def _chat_one(self, item: tuple[Conversation, SamplingParams]) -> Generation:
        conv, params = item
        data, latency = self._post("/chat/completions", self._chat_body(conv, params))
        choice = self._field(data, "choices", 0)
        msg = self._field(choice, "message")
        msg = msg if isinstance(msg, dict) else {}
        text, reasoning = msg.get("content"), msg.get("reasoning_content") or msg.get("reasoning")
        answered = text is not None  # a reasoning parser leaves content null when </think> never came
        text = "" if text is None else text  # an empty reply: the caller's reply checks count it as invalid
        if not isinstance(text, str):
            raise BackendUnavailableError(self.redact(
                f"openai server {self.server} ({self.model_id}) answered a message whose content "
                f"is not text: {one_line(repr(text), 120)}"))
        p, c, cached = self._usage(data)
        n_reasoning = self._reasoning_tokens(data, reasoning, text, c)
        if isinstance(reasoning, str) and reasoning:
            # put a server-split reasoning block back, so a reply reads the same from every backend
            text = f"<think>{reasoning}" + (f"</think>{text}" if answered else "")
        return Generation(text=text, prompt_tokens=p, completion_tokens=c, latency_s=latency,
                          cached_prompt_tokens=cached, finish_reason=str(choice.get("finish_reason") or ""),
                          reasoning_tokens=n_reasoning)

    def _reasoning_tokens(self, data: dict[str, Any], reasoning: Any, text: str, completion_tokens: int) -> int:
        """The usage's reasoning tokens, else the tokens of the reasoning field or ``<think>`` block."""
        details = (data.get("usage") or {}).get("completion_tokens_details") or {}
        n = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(n, int) and n > 0:
            return n
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = reasoning_text_split(text)[0]
        if not reasoning:
            return 0
        return min(self.count_tokens(reasoning), completion_tokens) if completion_tokens else \
            self.count_tokens(reasoning)

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        params.schemas(len(conversations))
        return self._map(self._chat_one, [(c, params.for_item(i)) for i, c in enumerate(conversations)], tag)

    def _logprobs_one(self, item: tuple[Conversation, tuple[str, ...]]) -> tuple[dict[str, float], Generation]:
        """Candidates matched by exact token text among the top-k first tokens; absent ones get -inf."""
        conv, candidates = item
        body = {"model": self.model_id, "messages": list(conv), "max_tokens": 1, "temperature": 0.0,
                "logprobs": True, "top_logprobs": _TOP_K_LOGPROBS,
                "chat_template_kwargs": {"enable_thinking": self.enable_thinking}}
        data, latency = self._post("/chat/completions", body)
        top = self._field(data, "choices", 0, "logprobs", "content", 0, "top_logprobs")
        table: dict[str, float] = {}
        for entry in top:
            tok, lp = entry.get("token"), entry.get("logprob")
            if isinstance(tok, str) and isinstance(lp, (int, float)):
                table.setdefault(tok, float(lp))
        p, c, cached = self._usage(data)
        gen = Generation("", prompt_tokens=p, completion_tokens=c, latency_s=latency,
                         cached_prompt_tokens=cached)
        return {cand: table.get(cand, -math.inf) for cand in candidates}, gen

    def next_token_logprobs_ex(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                               tag: UsageTag = UsageTag()) -> list[tuple[dict[str, float], Generation]]:
        return self._map(self._logprobs_one, [(c, tuple(candidates)) for c in conversations], tag)

    def _echo_one(self, prompt: list[int]) -> tuple[list[float], Generation]:
        """Log-probs of the prompt's tokens after its first (completions endpoint, ``echo``)."""
        body = {"model": self.model_id, "prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                "echo": True, "logprobs": 0}
        data, latency = self._post("/completions", body)
        lps = self._field(data, "choices", 0, "logprobs", "token_logprobs")
        p, c, cached = self._usage(data)
        # echo returns the prompt tokens then the generated one; the prompt's first token has no log-prob
        prompt_lps = list(lps[:p]) if p else list(lps[:-1])
        if any(not isinstance(v, (int, float)) for v in prompt_lps[1:]):
            raise BackendUnavailableError(
                f"openai server {self.server} ({self.model_id}): completions echo returned "
                f"non-numeric prompt log-probs: {one_line(repr(prompt_lps[:10]), 120)}")
        vals = [float(v) for v in prompt_lps[1:]]
        return vals, Generation("", prompt_tokens=p, completion_tokens=0, latency_s=latency,
                                cached_prompt_tokens=cached)

    def token_logprobs_ex(self, seqs: Sequence[Sequence[int]],
                          tag: UsageTag = UsageTag()) -> list[tuple[list[float], Generation]]:
        seqs = [[int(t) for t in s] for s in seqs]
        if any(len(s) < 1 for s in seqs):
            raise LLMError("openai backend: token_logprobs needs non-empty sequences")
        out = self._map(self._echo_one, seqs, tag)
        for s, (vals, _) in zip(seqs, out):
            if len(vals) != len(s) - 1:
                raise LLMError(f"openai backend: echo returned {len(vals)} prompt log-probs for a "
                               f"{len(s)}-token sequence")
        return out

    @property
    def tokenizer(self):
        """A local tokenizer of the served model, else ``None`` (the hub is never contacted)."""
        if self._tokenizer is None:
            source = local_tokenizer_source(self.model_id)
            try:
                self._tokenizer = load_tokenizer(source, local_only=True) if source else False
            except (ModelNotAvailableError, OSError, ValueError):
                self._tokenizer = False
        return self._tokenizer or None

    def count_tokens(self, text: str) -> int:
        tok = self.tokenizer
        if tok is not None:
            return len(tok(text, add_special_tokens=False).input_ids)
        if text in self._counts:
            return self._counts[text]
        root = self.base_urls[0]
        root = root[:-3] if root.endswith("/v1") else root
        try:
            data, _ = self._post("/tokenize", {"model": self.model_id, "prompt": text,
                                            "add_special_tokens": False}, urls=(root,))
        except ServerRejected as exc:  # no /tokenize on this server (another failure propagates)
            raise LLMError(self.redact(
                f"openai backend: cannot count tokens for served model {self.model_id!r}: no local "
                f"tokenizer (not a packaged name, a local path or in the local hub cache; the hub is "
                f"never contacted) and {redact_url(root)}/tokenize is not available ({exc}). Serve "
                "it with vLLM/SGLang (they have /tokenize) or name the model by a local path")) from None
        count = self._field(data, "count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise BackendUnavailableError(self.redact(
                f"openai server {redact_url(root)}/tokenize answered count={count!r}"))
        if len(self._counts) < 100_000:
            self._counts[text] = count
        return count

    def close(self) -> None:
        self._client.close()
