"""Persistent LLM request cache (SQLite) in front of any backend, keyed by the SHA-256 of a request's content.

Hits keep their original token counts and latency (a rerun reproduces the efficiency tables); misses are
computed in slices, each committed as it returns. Failures, empty replies and NaN log-probs are never stored."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.cache import CacheWarning, SQLiteStore
from ..core.paths import cache_dir
from .base import Conversation, Generation, LLMError, SamplingParams, UsageLedger, UsageTag

CACHE_FORMAT = 1


class RequestCache(SQLiteStore):
    """A key -> JSON-value store (see :class:`~litseg_nb.core.cache.SQLiteStore`)."""

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path if path is not None else cache_dir() / "llm_requests.sqlite", "LLM request cache",
                         "requests", "key TEXT PRIMARY KEY, kind TEXT NOT NULL, model TEXT NOT NULL, "
                         "value TEXT NOT NULL, created REAL NOT NULL")

    @staticmethod
    def make_key(payload: dict[str, Any]) -> str:
        blob = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, ensure_ascii=False,
                          default=str)
        # "surrogatepass": a prompt holding an unpaired surrogate still has a key (valid strings unchanged)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """Stored values of those ``keys`` that are present (an unreadable row is a miss)."""
        found: dict[str, Any] = {}
        for k, v in self.select(keys, "key, value"):
            try:
                found[k] = json.loads(v)
            except json.JSONDecodeError:
                warnings.warn(f"LLM request cache {self.path}: unreadable entry {k[:16]}...; recomputing it",
                              CacheWarning, stacklevel=2)
        return found

    def put_many(self, items: Sequence[tuple[str, str, str, Any]]) -> None:
        """Store ``(key, kind, model, value)`` rows in one transaction."""
        now = time.time()
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO requests (key, kind, model, value, created) VALUES (?, ?, ?, ?, ?)",
                # ASCII JSON: an unpaired surrogate is stored as its escape (SQLite cannot store it raw)
                [(k, kind, model, json.dumps(v, ensure_ascii=True), now) for k, kind, model, v in items])


def is_failed_reply(kind: str, value: Any) -> bool:
    """A result the cache never stores or serves: an empty chat reply, a log-prob result with NaN."""
    if kind == "chat":
        return not isinstance(value, str) or not value.strip()
    vals = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if vals is None:
        return True
    return any(isinstance(v, float) and v != v for v in vals)


def reject_replies(backend: Any, conversations: Sequence[Conversation], params: SamplingParams) -> int:
    """:meth:`CachedBackend.reject` on a backend that has a request cache; 0 on one without."""
    return backend.reject(conversations, params) if isinstance(backend, CachedBackend) else 0


def cache_report(backend: Any) -> str:
    """One line on how many LLM replies of this run came from the request cache; ``""`` for no backend."""
    if backend is None:
        return ""
    if not isinstance(backend, CachedBackend):
        return f"LLM request cache: off ({getattr(backend, 'name', '?')} backend, every reply computed)"
    total = backend.hits + backend.misses
    return (f"LLM request cache: {backend.hits} of {total} repl{'y' if total == 1 else 'ies'} from the "
            f"cache, {backend.misses} computed ({backend.cache.path})")


class CachedBackend:
    """Wraps a backend with a :class:`RequestCache` (same interface, plus ``hits``/``misses``)."""

    def __init__(self, inner: Any, cache: RequestCache | None = None, chunk_size: int = 8,
                 keep_invalid: bool = False) -> None:
        self.inner = inner
        self.cache = cache if cache is not None else RequestCache()
        self.chunk_size = max(1, int(chunk_size))
        self.keep_invalid = bool(keep_invalid)
        self.hits = 0
        self.misses = 0
        self._count_lock = threading.Lock()

    name = property(lambda self: self.inner.name)
    model_id = property(lambda self: self.inner.model_id)
    ledger: UsageLedger = property(lambda self: self.inner.ledger)  # type: ignore[assignment]

    def __getattr__(self, item: str) -> Any:  # count_tokens, tokenizer, render_prompt ...
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def _base_payload(self, kind: str) -> dict[str, Any]:
        payload = {"kind": kind, "backend": self.inner.name,
                   "model": getattr(self.inner, "revision", self.inner.model_id),
                   "structured": bool(getattr(self.inner, "structured_output", False))}
        if getattr(self.inner, "enable_thinking", False):  # keys of non-thinking runs unchanged
            payload["thinking"] = True
        return payload

    def _keys(self, kind: str, fields: list[dict[str, Any]]) -> list[str]:
        return [RequestCache.make_key({**self._base_payload(kind), **f}) for f in fields]

    def _serve(self, kind: str, fields: list[dict[str, Any]],
               compute: Callable[[list[int]], list[tuple[Any, Generation]]],
               tag: UsageTag) -> list[tuple[Any, Generation]]:
        """Answer each request (``fields``: its content) from the cache or via ``compute(indices)``."""
        keys = self._keys(kind, fields)
        stored = self.cache.get_many(keys)
        out: list[Any] = [None] * len(keys)
        todo: list[int] = []
        first_of_key: dict[str, int] = {}
        dupes: dict[int, int] = {}
        for i, k in enumerate(keys):
            if k in stored and is_failed_reply(kind, stored[k].get("value")):
                stored.pop(k)  # an older cache's stored failure: asked again
            if k in stored:
                value, gen = stored[k]["value"], Generation(**{**stored[k]["usage"], "cache_hit": True})
                out[i] = (value, gen)
                self.ledger.record(tag, gen)
            elif k in first_of_key:  # identical request twice in one call: compute once
                dupes[i] = first_of_key[k]
            else:
                first_of_key[k] = i
                todo.append(i)
        with self._count_lock:
            self.hits += len(keys) - len(todo) - len(dupes)
        model = getattr(self.inner, "revision", self.inner.model_id)
        for start in range(0, len(todo), self.chunk_size):
            part = todo[start:start + self.chunk_size]
            results = compute(part)
            if len(results) != len(part):
                raise LLMError(f"{self.inner.name} backend answered {len(results)} of {len(part)} "
                               "requests")
            self.cache.put_many([(keys[i], kind, model, {"value": v, "usage": {
                f: x for f, x in dataclasses.asdict(g).items() if f != "cache_hit"}})
                for i, (v, g) in zip(part, results) if not is_failed_reply(kind, v)])
            for i, r in zip(part, results):
                out[i] = r
            with self._count_lock:  # computed = answered by the model (a failed request is not counted)
                self.misses += len(part)
        for i, j in dupes.items():
            value, gen = out[j]
            hit = dataclasses.replace(gen, cache_hit=True)
            out[i] = (value, hit)
            self.ledger.record(tag, hit)
            with self._count_lock:
                self.hits += 1
        return out

    @staticmethod
    def _chat_fields(convs: Sequence[Conversation], params: SamplingParams) -> list[dict[str, Any]]:
        """The key content of chat requests (per conversation: its own schema, if any)."""
        return [{"messages": list(c), "params": {
                    f: x for f, x in dataclasses.asdict(params.for_item(i)).items() if f != "json_schemas"}}
                for i, c in enumerate(convs)]

    def reject(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams()) -> int:
        """Remove replies that failed the caller's validation (unless ``keep_invalid``); the number removed."""
        if self.keep_invalid or not conversations:
            return 0
        return self.cache.delete(self._keys("chat", self._chat_fields(conversations, params)))

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        convs = [list(c) for c in conversations]
        params.schemas(len(convs))  # a wrong number of per-conversation schemas is an error here

        def compute(idx: list[int]) -> list[tuple[Any, Generation]]:
            gens = self.inner.chat([convs[i] for i in idx], params.subset(idx), tag)
            return [(g.text, g) for g in gens]

        return [gen for _, gen in self._serve("chat", self._chat_fields(convs, params), compute, tag)]

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        convs = [list(c) for c in conversations]
        cands = list(candidates)
        out = self._serve("next_token_logprobs", [{"messages": c, "candidates": cands} for c in convs],
                          lambda idx: self.inner.next_token_logprobs_ex([convs[i] for i in idx], cands, tag), tag)
        return [dict(v) for v, _ in out]

    def token_logprobs(self, seqs: Sequence[Sequence[int]],
                       tag: UsageTag = UsageTag()) -> list[list[float]]:
        seqs = [[int(t) for t in s] for s in seqs]
        out = self._serve("token_logprobs", [{"ids": s} for s in seqs],
                          lambda idx: self.inner.token_logprobs_ex([seqs[i] for i in idx], tag), tag)
        return [list(v) for v, _ in out]
