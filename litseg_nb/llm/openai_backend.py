"""The OpenAI-compatible HTTP backend (``backend="openai"``): vLLM's ``vllm serve``, SGLang,
llama.cpp's server, ...

* Requests go out concurrently, at most ``max_concurrency`` at a time (a thread pool), each with a
  per-request timeout (``timeout_s``, applied to connect, read and write).
* Several ``base_urls`` (e.g. one per vLLM replica): **prefix-affine routing**. Each request has a
  stable key, the hash of the first ``route_prefix_chars`` characters of its conversation (roles
  and contents), so requests that share a long prefix (a system prompt, a unit's text) prefer the
  same replica and find it in that replica's prefix cache. Each key ranks the replicas by
  rendezvous hashing (adding or removing a replica moves only its own keys). A request goes to the
  first replica in its ranking whose requests in flight stay within
  ``ceil((in flight + 1) * (1 + load_slack) / replicas)`` (consistent hashing with bounded loads),
  so one hot prefix cannot pile every request onto one replica. A retried request moves on to the
  next replica of its ranking: requests change replica only when one fails. ``routed`` counts the
  attempts each replica received.
* Connection errors, timeouts, 5xx answers and malformed response bodies are retried at most
  ``max_retries`` times with exponential backoff (``backoff_s * 2**attempt``, capped at
  ``max_backoff_s``), within ``max_wait_s`` seconds in all per request (the per-attempt timeout is
  cut to what is left). 4xx answers are not retried. Then
  :class:`~litseg_nb.llm.base.BackendUnavailableError` (one line: the server, credentials
  redacted, and the cause) stops the caller: a dead server is never answered by a fallback. A
  reply whose message content is ``null`` is an empty reply (the caller's reply checks count it).
* A hung server is visible: while requests wait, one console line every ``wait_report_s`` seconds
  gives the server, how many requests wait and how long the oldest has waited.
* Secrets: the API key goes only into the ``Authorization: Bearer`` header; any message that
  could carry it (an error body echoing it) has it replaced by ``***``. A base URL with
  credentials (``http://user:token@host``) is refused: they would replace the Bearer key
  silently (httpx sends them as Basic auth); put the key in the environment variable
  ``LLMConfig.api_key_env`` names.
* Structured output: with ``structured_output`` on and ``SamplingParams.json_schema`` set, the
  request carries ``response_format = {"type": "json_schema", ...}`` (vLLM turns it into guided
  decoding).
* ``next_token_logprobs`` asks for one token with ``logprobs``/``top_logprobs`` (``top_k``) and
  matches candidates against the returned top tokens by exact token text (after stripping nothing):
  a candidate absent from the top-k gets ``-inf`` (its log-prob is below the k-th one).
* ``text_logprobs`` uses the completions endpoint with ``echo=True`` and ``logprobs`` (vLLM returns
  the prompt tokens' log-probs; the first prompt token has none and is left out). When a local
  tokenizer for the model is known (``tiny-random``, ``smollm2-135m-instruct``, a local path), the
  prompt is sent as BOS + text token ids, so -- as in the hf backend -- every text token gets a
  value; otherwise the text is sent as is and its first token gets none.
* Tokens: a local tokenizer of the served model is used when one exists locally (a packaged name,
  a local path, a model already in the local hub cache) -- the hub is never contacted; otherwise
  tokens are counted by the server's ``/tokenize`` (vLLM, SGLang), and a server without it is a
  clear error at the first count.
* ``token_logprobs`` sends token ids to the same echo path (perplexity chunking on a server).
* Usage: ``usage.prompt_tokens``, ``usage.completion_tokens`` and
  ``usage.prompt_tokens_details.cached_tokens`` (``vllm serve --enable-prefix-caching
  --enable-prompt-tokens-details`` reports it; a server that does not is recorded as ``None`` =
  unknown, counted as 0 cached).
* Reasoning models: ``chat_template_kwargs = {"enable_thinking": ...}`` goes with every chat
  request (vLLM and SGLang pass it to the chat template). Reasoning tokens are taken from
  ``usage.completion_tokens_details.reasoning_tokens`` when the server reports them, else counted
  from the message's ``reasoning_content``/``reasoning`` field or a ``<think>...</think>`` block.
  A reasoning field is put back in front of the answer as ``<think>...</think>`` (unclosed when the
  reply was cut inside it), so a reply's text has the same shape from every backend.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Sequence

from .base import (BackendBase, BackendUnavailableError, Conversation, Generation, LLMError,
                   SamplingParams, UsageLedger, UsageTag, one_line, reasoning_text_split, redact_url,
                   url_identity)
from ..errors import LitsegError
from .models import ModelNotAvailableError, load_tokenizer, local_tokenizer_source

RETRYABLE_STATUS_MIN = 500


def endpoint(base_url: str, route: str) -> str:
    """``route`` (``/chat/completions``) under ``base_url``, before its query string: a signed or
    versioned address (``https://host/v1?api-version=…&sig=…``) keeps its query on every request."""
    head, sep, query = str(base_url).partition("?")
    return f"{head.rstrip('/')}{route}{sep}{query}"


class _Retryable(LitsegError):
    """An attempt failed in a way worth retrying (connection, timeout, 5xx, malformed body)."""


class ServerRejected(BackendUnavailableError):
    """The server answered an HTTP 4xx status (not retried); ``status`` is the code."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class OpenAIBackend(BackendBase):
    """Client of one or more OpenAI-compatible servers."""

    name = "openai"

    def __init__(self, model: str, *, base_urls: Sequence[str], api_key: str = "EMPTY",
                 timeout_s: float = 120.0, max_concurrency: int = 8, max_retries: int = 3,
                 backoff_s: float = 0.5, max_backoff_s: float = 8.0, structured_output: bool = False,
                 top_k_logprobs: int = 20, ledger: UsageLedger | None = None,
                 tokenizer: Any = None, enable_thinking: bool = False,
                 route_prefix_chars: int = 1024, load_slack: float = 0.25,
                 max_wait_s: float | None = None, wait_report_s: float = 30.0) -> None:
        import httpx

        if not base_urls:
            raise LLMError("openai backend: no base_urls given (e.g. 'http://127.0.0.1:8000/v1')")
        if max_concurrency < 1 or max_retries < 0:
            raise LLMError("openai backend: max_concurrency must be >= 1 and max_retries >= 0")
        self._secret = api_key if api_key and api_key != "EMPTY" else ""
        for u in base_urls:
            if httpx.URL(str(u)).userinfo:
                raise LLMError(
                    f"openai backend: base URL {redact_url(u)} carries credentials; they are not used "
                    "(they would replace the API key silently): remove them and put the key in the "
                    "environment variable llm.api_key_env names (sent as 'Authorization: Bearer')")
        self.model_id = model
        self.base_urls = tuple(u.rstrip("/") for u in base_urls)
        # what identifies the answering model in cache keys: the endpoints and the served model id
        # (redacted, plus a hash of any secret so that two servers differing only in one still differ)
        self.revision = f"{model}@{','.join(sorted(url_identity(u) for u in self.base_urls))}"
        self.server = ", ".join(redact_url(u) for u in self.base_urls)  # for messages
        self.timeout_s = timeout_s
        self.max_wait_s = float(max_wait_s) if max_wait_s is not None else \
            (max_retries + 1) * timeout_s + max_retries * max_backoff_s
        self.wait_report_s = max(0.01, float(wait_report_s))
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.structured_output = structured_output
        self.top_k_logprobs = top_k_logprobs
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.enable_thinking = bool(enable_thinking)
        self.route_prefix_chars = max(1, int(route_prefix_chars))
        self.load_slack = max(0.0, float(load_slack))
        self._rr_lock = threading.Lock()
        self._in_flight = [0] * len(self.base_urls)
        self.routed = [0] * len(self.base_urls)  # attempts sent to each replica
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=max_concurrency * len(self.base_urls)),
            headers={"Authorization": f"Bearer {api_key}"})
        self._tokenizer = tokenizer
        self.attempts = 0  # HTTP attempts made (for tests and diagnostics)
        self._waiting: dict[int, float] = {}  # request id -> start time (requests not yet answered)
        self._next_id = 0
        self._monitor: threading.Thread | None = None
        self.wait_reports = 0  # "still waiting" console lines printed
        self._counts: dict[str, int] = {}  # /tokenize answers (a text is counted once per backend)

    # ------------------------------------------------------------------ secrets and hangs
    def redact(self, text: str) -> str:
        """``text`` with the API key and URL credentials replaced by ``***``."""
        out = redact_url(str(text))
        return out.replace(self._secret, "***") if len(self._secret) >= 4 else out

    def waiting(self) -> tuple[int, float]:
        """``(requests waiting for an answer, seconds the oldest has waited)``."""
        now = time.monotonic()
        with self._rr_lock:
            starts = list(self._waiting.values())
        return len(starts), (now - min(starts)) if starts else 0.0

    def _watch(self) -> None:
        """Print one line every ``wait_report_s`` while a request has waited that long (a hang)."""
        import sys

        last = time.monotonic()
        while True:
            time.sleep(min(1.0, self.wait_report_s / 4))
            with self._rr_lock:
                if not self._waiting:
                    self._monitor = None
                    return
            n, oldest = self.waiting()
            now = time.monotonic()
            if oldest >= self.wait_report_s and now - last >= self.wait_report_s:
                last = now
                self.wait_reports += 1
                line = (f"[litseg_nb] waiting for {self.server} ({self.model_id}): {n} request(s) "
                        f"unanswered, oldest {oldest:.0f}s (gives up after llm.max_wait_s="
                        f"{self.max_wait_s:.0f}s)")
                try:
                    from tqdm.auto import tqdm

                    tqdm.write(line, file=sys.stderr)
                except Exception:  # noqa: BLE001 - a console line must never break a request
                    print(line, file=sys.stderr, flush=True)

    def _wait_begin(self) -> int:
        with self._rr_lock:
            rid = self._next_id
            self._next_id += 1
            self._waiting[rid] = time.monotonic()
            if self._monitor is None:
                self._monitor = threading.Thread(target=self._watch, name="litseg-openai-wait",
                                                 daemon=True)
                self._monitor.start()
        return rid

    def _wait_end(self, rid: int) -> None:
        with self._rr_lock:
            self._waiting.pop(rid, None)

    # ------------------------------------------------------------------ plumbing
    def route_key(self, body: dict[str, Any]) -> str:
        """The routing key of a request: its first ``route_prefix_chars`` characters of content."""
        if "messages" in body:
            text = "".join(f"\x1e{m.get('role', '')}\x1f{m.get('content', '')}" for m in body["messages"])
        else:
            text = json.dumps(body.get("prompt"))
        return text[:self.route_prefix_chars]

    def replica_ranking(self, key: str) -> list[int]:
        """Replica indices in ``key``'s order of preference (rendezvous hashing)."""
        return sorted(range(len(self.base_urls)),
                      key=lambda i: (-_hash64(f"{self.base_urls[i]}\x00{key}"), i))

    def _pick_first(self, ranking: Sequence[int]) -> int:
        """Position in ``ranking`` of the first replica under the bounded-load cap (under lock)."""
        n = len(ranking)
        cap = math.ceil((sum(self._in_flight) + 1) * (1.0 + self.load_slack) / n)
        for pos, i in enumerate(ranking):
            if self._in_flight[i] < cap:
                return pos
        return 0

    def _post(self, route: str, body: dict[str, Any],
              urls: Sequence[str] | None = None) -> dict[str, Any]:
        """POST ``body`` to ``<base_url><route>`` with retries; the parsed JSON answer.

        Without ``urls`` the replica follows the prefix-affine routing (module docstring). Every
        failure is a :class:`BackendUnavailableError` (redacted, one line).
        """
        rid = self._wait_begin()
        try:
            return self._post_attempts(route, body, urls)
        finally:
            self._wait_end(rid)

    def _post_attempts(self, route: str, body: dict[str, Any],
                       urls: Sequence[str] | None) -> dict[str, Any]:
        import httpx

        routed = not urls
        urls = tuple(urls) if urls else self.base_urls
        if routed:
            ranking = self.replica_ranking(self.route_key(body))
            with self._rr_lock:
                start = self._pick_first(ranking)
        else:
            ranking, start = list(range(len(urls))), 0
        causes: list[str] = []
        deadline = time.monotonic() + self.max_wait_s
        attempts = 0
        for attempt in range(self.max_retries + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                causes.append(f"gave up after llm.max_wait_s={self.max_wait_s:g}s in all")
                break
            idx = ranking[(start + attempt) % len(ranking)]
            url = endpoint(urls[idx], route)
            timeout = min(self.timeout_s, left)
            attempts += 1
            with self._rr_lock:
                self.attempts += 1
                if routed:
                    self._in_flight[idx] += 1
                    self.routed[idx] += 1
            try:
                try:
                    resp = self._client.post(url, json=body, timeout=httpx.Timeout(timeout))
                except httpx.TimeoutException as exc:
                    raise _Retryable(f"no answer within {timeout:g}s ({type(exc).__name__})")
                except httpx.TransportError as exc:
                    raise _Retryable(f"connection error: {type(exc).__name__}: {exc}")
                if resp.status_code >= RETRYABLE_STATUS_MIN:
                    raise _Retryable(f"HTTP {resp.status_code}: {one_line(resp.text, 200)}")
                if resp.status_code >= 400:
                    raise ServerRejected(self.redact(
                        f"openai server {url} answered HTTP {resp.status_code} (not retried): "
                        f"{one_line(resp.text, 300)}"), resp.status_code)
                try:
                    data = resp.json()
                except (json.JSONDecodeError, ValueError) as exc:
                    raise _Retryable(f"malformed JSON body ({one_line(exc, 80)}): "
                                     f"{one_line(repr(resp.text), 120)}")
                if not isinstance(data, dict):
                    raise _Retryable(f"unexpected JSON body (not an object): {one_line(repr(resp.text), 120)}")
                return data
            except _Retryable as exc:
                causes.append(f"{url}: {exc}")
            finally:
                if routed:
                    with self._rr_lock:
                        self._in_flight[idx] -= 1
            if attempt < self.max_retries:  # (not in flight while backing off)
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
                time.sleep(max(0.0, min(delay * (0.5 + random.random() / 2), deadline - time.monotonic())))
        earlier = [c for c in dict.fromkeys(causes[:-1]) if c != causes[-1]]
        raise BackendUnavailableError(self.redact(
            f"openai server {self.server} ({self.model_id}) unavailable after {attempts} attempt(s): "
            f"{causes[-1]}" + (f"; earlier: {'; '.join(earlier)}" if earlier else "")))

    def _map(self, fn, items: Sequence[Any]) -> list[Any]:
        """``fn`` over ``items`` with bounded concurrency, results in order. The first error is
        raised as soon as the requests in flight end: requests not yet sent are cancelled (a dead
        server costs one round of attempts, not one per queued request)."""
        if len(items) <= 1 or self.max_concurrency == 1:
            return [fn(x) for x in items]
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items)))
        try:
            futures = [pool.submit(fn, x) for x in items]
            for f in as_completed(futures):
                if f.exception() is not None:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise f.exception()
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _field(self, data: dict[str, Any], *path: Any) -> Any:
        """``data[path...]``; a body without it is not an OpenAI response (a server fault)."""
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

    # ---------------------------------------------------------------------- chat
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
        t0 = time.perf_counter()
        data = self._post("/chat/completions", self._chat_body(conv, params))
        latency = time.perf_counter() - t0
        choice = self._field(data, "choices", 0)
        msg = self._field(choice, "message")
        text = msg.get("content") if isinstance(msg, dict) else None
        reasoning = (msg.get("reasoning_content") or msg.get("reasoning")) if isinstance(msg, dict) else None
        answered = text is not None  # a reasoning parser leaves content null when </think> never came
        if text is None:
            # cut off inside the reasoning, or a server that answered `content: null`: an empty
            # reply, which the caller's reply checks treat as invalid (retried, counted)
            text = ""
        if not isinstance(text, str):
            raise BackendUnavailableError(self.redact(
                f"openai server {self.server} ({self.model_id}) answered a message whose content "
                f"is not text: {one_line(repr(text), 120)}"))
        p, c, cached = self._usage(data)
        n_reasoning = self._reasoning_tokens(data, choice, text, c)
        if isinstance(reasoning, str) and reasoning:
            # a server-side reasoning parser split the reply: put the block back, so a reply reads
            # the same from every backend (the reply parsers remove it; an unclosed block = cut)
            text = f"<think>{reasoning}" + (f"</think>{text}" if answered else "")
        return Generation(text=text, prompt_tokens=p, completion_tokens=c, latency_s=latency,
                          cached_prompt_tokens=cached, finish_reason=str(choice.get("finish_reason") or ""),
                          reasoning_tokens=n_reasoning)

    def _reasoning_tokens(self, data: dict[str, Any], choice: dict[str, Any], text: str,
                          completion_tokens: int) -> int:
        """Reasoning tokens of a reply (see the module docstring for the sources, in order)."""
        details = (data.get("usage") or {}).get("completion_tokens_details") or {}
        n = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(n, int) and n > 0:
            return n
        msg = choice.get("message") or {}
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = reasoning_text_split(text)[0]
        if not reasoning:
            return 0
        return min(self.count_tokens(reasoning), completion_tokens) if completion_tokens else \
            self.count_tokens(reasoning)

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        """One reply per conversation; requests run concurrently (bounded)."""
        params.schemas(len(conversations))
        gens = self._map(self._chat_one, [(c, params.for_item(i)) for i, c in enumerate(conversations)])
        for g in gens:
            self.ledger.record(tag, g)
        return gens

    # ------------------------------------------------------------------ logprobs
    def _logprobs_one(self, item: tuple[Conversation, tuple[str, ...]]) -> tuple[dict[str, float], Generation]:
        conv, candidates = item
        body = {"model": self.model_id, "messages": list(conv), "max_tokens": 1, "temperature": 0.0,
                "logprobs": True, "top_logprobs": self.top_k_logprobs,
                "chat_template_kwargs": {"enable_thinking": self.enable_thinking}}
        t0 = time.perf_counter()
        data = self._post("/chat/completions", body)
        latency = time.perf_counter() - t0
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
        out = self._map(self._logprobs_one, [(c, tuple(candidates)) for c in conversations])
        for _, g in out:
            self.ledger.record(tag, g)
        return out

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        """Log-prob of each candidate (exact token text) among the top-k first tokens, else -inf."""
        return [r for r, _ in self.next_token_logprobs_ex(conversations, candidates, tag)]

    def _text_one(self, text: str) -> tuple[list[float], Generation]:
        prompt: Any = text
        tok = self.tokenizer
        if tok is not None and tok.bos_token_id is not None:
            # BOS + text token ids, so every text token gets a log-prob (as in the hf backend)
            prompt = [tok.bos_token_id] + tok(text, add_special_tokens=False).input_ids
        return self._echo_one(prompt)

    def _echo_one(self, prompt: Any) -> tuple[list[float], Generation]:
        """Log-probs of the prompt's tokens after its first (completions endpoint, ``echo``)."""
        body = {"model": self.model_id, "prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                "echo": True, "logprobs": 0}
        t0 = time.perf_counter()
        data = self._post("/completions", body)
        latency = time.perf_counter() - t0
        lps = self._field(data, "choices", 0, "logprobs", "token_logprobs")
        p, c, cached = self._usage(data)
        # echo returns the prompt tokens then the generated one; drop the generated token and the
        # prompt's first token (no log-prob)
        prompt_lps = list(lps[:p]) if p else list(lps[:-1])
        if any(not isinstance(v, (int, float)) for v in prompt_lps[1:]):
            raise BackendUnavailableError(
                f"openai server {self.server} ({self.model_id}): completions echo returned "
                f"non-numeric prompt log-probs: {one_line(repr(prompt_lps[:10]), 120)}")
        vals = [float(v) for v in prompt_lps[1:]]
        return vals, Generation("", prompt_tokens=p, completion_tokens=0, latency_s=latency,
                                cached_prompt_tokens=cached)

    def text_logprobs_ex(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                         max_length: int | None = None) -> list[tuple[list[float], Generation]]:
        if max_length is not None:
            raise LLMError("openai backend: text_logprobs does not support max_length "
                           "(window the text on the caller's side)")
        out = self._map(self._text_one, list(texts))
        for _, g in out:
            self.ledger.record(tag, g)
        return out

    def text_logprobs(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                      max_length: int | None = None) -> list[list[float]]:
        """Per-token log-probs of each text's tokens (server-side echo; see the module docstring)."""
        return [r for r, _ in self.text_logprobs_ex(texts, tag, max_length=max_length)]

    def token_logprobs_ex(self, seqs: Sequence[Sequence[int]],
                          tag: UsageTag = UsageTag()) -> list[tuple[list[float], Generation]]:
        """Log-probs of token-id sequences after their first token (echo path)."""
        seqs = [[int(t) for t in s] for s in seqs]
        if any(len(s) < 1 for s in seqs):
            raise LLMError("openai backend: token_logprobs needs non-empty sequences")
        out = self._map(self._echo_one, seqs)
        for s, (vals, g) in zip(seqs, out):
            if len(vals) != len(s) - 1:
                raise LLMError(f"openai backend: echo returned {len(vals)} prompt log-probs for a "
                               f"{len(s)}-token sequence")
            self.ledger.record(tag, g)
        return out

    # -------------------------------------------------------------------- tokens
    @property
    def tokenizer(self):
        """A local tokenizer for the served model, when one exists locally (else ``None``): a
        packaged name, a local path or a model already in the local hub cache. The hub is never
        contacted (a served model's name is often no hub id at all)."""
        if self._tokenizer is None:
            source = local_tokenizer_source(self.model_id)
            try:
                self._tokenizer = load_tokenizer(source, local_only=True) if source else False
            except (ModelNotAvailableError, OSError, ValueError):
                self._tokenizer = False
        return self._tokenizer or None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text``: local tokenizer if available, else the server's ``/tokenize``."""
        tok = self.tokenizer
        if tok is not None:
            return len(tok(text, add_special_tokens=False).input_ids)
        known = self._counts.get(text)
        if known is not None:
            return known
        root = self.base_urls[0]
        root = root[:-3] if root.endswith("/v1") else root
        try:
            data = self._post("/tokenize", {"model": self.model_id, "prompt": text,
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
