"""Persistent request cache (SQLite) in front of any backend.

:class:`RequestCache` stores one row per request, keyed by the SHA-256 of a canonical JSON of
(kind, backend, what identifies the answering model, constrained-decoding flag, messages or text,
sampling parameters, candidates). The model part is the backend's ``revision``: for ``openai`` the
served model id *and* the endpoint(s) (credentials redacted), so another server under the same
``--llm-model`` is asked, not served this one's replies; for ``hf``/``vllm`` the model's revision
(packaged recipe version, the hub snapshot commit, or a local folder's path and file stamp).

Only replies that were received and read are stored: a backend error stores nothing (the exception
leaves before the slice is written), and an empty chat reply or a log-prob result holding NaN is
not stored either (nor served, if an older cache holds one), so fixing a server and rerunning asks
it again. :class:`CachedBackend` wraps a backend: it answers what it can from the cache and
sends only the misses to the backend, in slices of ``chunk_size`` requests, committing each slice
as soon as it returns. So a run interrupted midway loses at most the slice in flight, and a rerun
repeats no finished request.

The database uses WAL journaling and one transaction per slice; several processes may share it. A
file that is not a readable SQLite database is moved aside (``<name>.corrupt-<time>-<pid>``) with a
:class:`~litseg_nb.core.cache.CacheWarning` naming both paths, and an empty cache takes its place; an
unreadable row is a miss.
Hits and misses are counted on the wrapper (``hits``, ``misses``) and each served reply carries
``Generation.cache_hit``; :func:`cache_report` says it in one line at the end of a run. A hit returns the stored reply *with its original token counts and
latency* (so a rerun reproduces the efficiency tables); the ledger counts it under ``cache_hits``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.cache import CacheWarning
from ..core.paths import cache_dir
from .base import Conversation, Generation, LLMError, SamplingParams, UsageLedger, UsageTag

CACHE_FORMAT = 1


def default_cache_path() -> Path:
    """``cache_dir()/llm_requests.sqlite``."""
    return cache_dir() / "llm_requests.sqlite"


class RequestCache:
    """A key → JSON-value store in SQLite (WAL, commit per batch, thread-safe)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.moved_aside: Path | None = None
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            self.moved_aside = self._move_aside(exc)
            self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS requests (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                "model TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL)")
            conn.execute("SELECT key, value FROM requests LIMIT 1").fetchall()
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self, exc: Exception) -> Path:
        """Rename an unreadable database (and its WAL/SHM files) and warn naming both paths."""
        return _move_aside_file(self.path, "LLM request cache", exc, stacklevel=3)

    @staticmethod
    def make_key(payload: dict[str, Any]) -> str:
        blob = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, ensure_ascii=False,
                          default=str)
        # "surrogatepass": a prompt holding an unpaired surrogate (a model's reply fed back) still has a
        # key; every valid string encodes exactly as plain UTF-8, so existing keys are unchanged
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """Stored values of those ``keys`` that are present."""
        found: dict[str, Any] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(uniq), 500):
                part = uniq[i:i + 500]
                rows = self._conn.execute(
                    f"SELECT key, value FROM requests WHERE key IN ({','.join('?' * len(part))})",
                    part).fetchall()
                for k, v in rows:
                    try:
                        found[k] = json.loads(v)
                    except json.JSONDecodeError:  # an unreadable row is a miss (recomputed, replaced)
                        warnings.warn(f"LLM request cache {self.path}: unreadable entry {k[:16]}...; "
                                      "recomputing it", CacheWarning, stacklevel=2)
        return found

    def put_many(self, items: Sequence[tuple[str, str, str, Any]]) -> None:
        """Store ``(key, kind, model, value)`` rows in one transaction."""
        now = time.time()
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO requests (key, kind, model, value, created) "
                "VALUES (?, ?, ?, ?, ?)",
                # ASCII JSON: a reply holding an unpaired surrogate (e.g. an OpenAI body's "\\ud83d"
                # escape) is stored as its escape and reads back identical; SQLite cannot store it raw
                [(k, kind, model, json.dumps(v, ensure_ascii=True), now)
                 for k, kind, model, v in items])

    def delete_many(self, keys: Sequence[str]) -> int:
        """Remove the rows of ``keys`` (one transaction); the number removed."""
        uniq = list(dict.fromkeys(keys))
        n = 0
        with self._lock, self._conn:
            for i in range(0, len(uniq), 500):
                part = uniq[i:i + 500]
                n += self._conn.execute(f"DELETE FROM requests WHERE key IN ({','.join('?' * len(part))})",
                                        part).rowcount
        return n

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _move_aside_file(path: Path, what: str, exc: Exception, stacklevel: int = 3) -> Path:
    """Rename an unreadable SQLite database ``path`` (and its WAL/SHM files) to
    ``<name>.corrupt-<time>-<pid>`` and warn in one line naming both paths (LLM and embedding caches)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}")
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, aside.with_name(aside.name + suffix))
    msg = (f"{what} {path} is not a readable SQLite database ({exc}); moved it "
           f"to {aside} and started an empty cache (cached entries will be recomputed)")
    warnings.warn(msg, CacheWarning, stacklevel=stacklevel + 1)
    return aside


def is_failed_reply(kind: str, value: Any) -> bool:
    """A result the cache never stores or serves: an empty chat reply, a log-prob result with NaN."""
    if kind == "chat":
        return not isinstance(value, str) or not value.strip()
    vals = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if vals is None:
        return True
    return any(isinstance(v, float) and v != v for v in vals)


def reject_replies(backend: Any, conversations: Sequence[Conversation], params: SamplingParams) -> int:
    """:meth:`CachedBackend.reject` on a backend that has a request cache; 0 (nothing to do) on one
    without."""
    reject = getattr(backend, "reject", None) if isinstance(backend, CachedBackend) else None
    return reject(conversations, params) if reject is not None else 0


def cache_report(backend: Any) -> str:
    """One line on how many LLM replies of this run came from the request cache (for run summaries:
    the ``segment`` command, notebooks); ``""`` for no backend. Counts are those of the
    :class:`CachedBackend` (hits include identical requests answered once in a call)."""
    if backend is None:
        return ""
    if not isinstance(backend, CachedBackend):
        return f"LLM request cache: off ({getattr(backend, 'name', '?')} backend, every reply computed)"
    total = backend.hits + backend.misses
    return (f"LLM request cache: {backend.hits} of {total} repl{'y' if total == 1 else 'ies'} from the "
            f"cache, {backend.misses} computed ({backend.cache.path})")


def _gen_to_json(gen: Generation) -> dict[str, Any]:
    d = dataclasses.asdict(gen)
    d.pop("cache_hit", None)
    return d


def _gen_from_json(d: dict[str, Any]) -> Generation:
    return Generation(**{**d, "cache_hit": True})


def _params_payload(params: SamplingParams) -> dict[str, Any]:
    """A request's sampling params in its cache key: the conversation's own schema as ``json_schema``
    (so a per-conversation schema keys like the same schema given for the whole call), without the
    ``json_schemas`` field (keys of calls that never used it are unchanged)."""
    d = dataclasses.asdict(params)
    d.pop("json_schemas", None)
    return d


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
        self.rejected = 0  # replies a caller found invalid and took out of the cache
        self._count_lock = threading.Lock()

    # the wrapped backend's identity and tokenizer pass through
    name = property(lambda self: self.inner.name)
    model_id = property(lambda self: self.inner.model_id)
    ledger: UsageLedger = property(lambda self: self.inner.ledger)  # type: ignore[assignment]

    def __getattr__(self, item: str) -> Any:  # tokenizer, render_prompt, count_tokens helpers ...
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def _base_payload(self, kind: str) -> dict[str, Any]:
        payload = {"kind": kind, "backend": self.inner.name,
                   "model": getattr(self.inner, "revision", self.inner.model_id),
                   "structured": bool(getattr(self.inner, "structured_output", False))}
        if getattr(self.inner, "enable_thinking", False):  # keys of non-thinking runs unchanged
            payload["thinking"] = True
        return payload

    def _serve(self, kind: str, payloads: list[dict[str, Any]],
               compute: Callable[[list[int]], list[tuple[Any, Generation]]],
               tag: UsageTag) -> list[tuple[Any, Generation]]:
        """Answer each payload from the cache or via ``compute(indices)`` (misses, in slices)."""
        keys = [RequestCache.make_key(p) for p in payloads]
        stored = self.cache.get_many(keys)
        out: list[Any] = [None] * len(keys)
        todo: list[int] = []
        first_of_key: dict[str, int] = {}
        dupes: dict[int, int] = {}
        for i, k in enumerate(keys):
            if k in stored and is_failed_reply(kind, stored[k].get("value")):
                stored.pop(k)  # an older cache's stored failure: asked again
            if k in stored:
                value, gen = stored[k]["value"], _gen_from_json(stored[k]["usage"])
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
            self.cache.put_many([(keys[i], kind, model, {"value": v, "usage": _gen_to_json(g)})
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

    def _chat_payloads(self, convs: Sequence[Conversation], params: SamplingParams) -> list[dict[str, Any]]:
        """The cache payloads of chat requests (per conversation: its own schema, if any)."""
        return [{**self._base_payload("chat"), "messages": list(c), "params": _params_payload(params.for_item(i))}
                for i, c in enumerate(convs)]

    def reject(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams()) -> int:
        """The replies to these chat requests failed the caller's validation (LitSeg's schema, LumberChunker's
        ``Answer: ID``): take them out of the cache, so that a rerun asks the model again instead of
        replaying the same fallback (a server answering nonsense, fixed since). This run keeps the
        replies it has. With ``keep_invalid`` (``llm.cache_invalid_replies``) nothing is removed.
        Returns the number of cached replies removed."""
        if self.keep_invalid or not conversations:
            return 0
        n = self.cache.delete_many([RequestCache.make_key(p) for p in self._chat_payloads(conversations, params)])
        with self._count_lock:
            self.rejected += n
        return n

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        convs = [list(c) for c in conversations]
        params.schemas(len(convs))  # a wrong number of per-conversation schemas is an error here
        payloads = self._chat_payloads(convs, params)

        def compute(idx: list[int]) -> list[tuple[Any, Generation]]:
            gens = self.inner.chat([convs[i] for i in idx], params.subset(idx), tag)
            return [(g.text, g) for g in gens]

        return [gen for _, gen in self._serve("chat", payloads, compute, tag)]

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        convs = [list(c) for c in conversations]
        cands = list(candidates)
        payloads = [{**self._base_payload("next_token_logprobs"), "messages": c, "candidates": cands}
                    for c in convs]

        def compute(idx: list[int]) -> list[tuple[Any, Generation]]:
            return self.inner.next_token_logprobs_ex([convs[i] for i in idx], cands, tag)

        return [dict(v) for v, _ in self._serve("next_token_logprobs", payloads, compute, tag)]

    def text_logprobs(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                      max_length: int | None = None) -> list[list[float]]:
        texts = list(texts)
        payloads = [{**self._base_payload("text_logprobs"), "text": t, "max_length": max_length}
                    for t in texts]
        kwargs = {} if max_length is None else {"max_length": max_length}

        def compute(idx: list[int]) -> list[tuple[Any, Generation]]:
            return self.inner.text_logprobs_ex([texts[i] for i in idx], tag, **kwargs)

        return [list(v) for v, _ in self._serve("text_logprobs", payloads, compute, tag)]

    def token_logprobs(self, seqs: Sequence[Sequence[int]],
                       tag: UsageTag = UsageTag()) -> list[list[float]]:
        seqs = [[int(t) for t in s] for s in seqs]
        payloads = [{**self._base_payload("token_logprobs"), "ids": s} for s in seqs]

        def compute(idx: list[int]) -> list[tuple[Any, Generation]]:
            return self.inner.token_logprobs_ex([seqs[i] for i in idx], tag)

        return [list(v) for v, _ in self._serve("token_logprobs", payloads, compute, tag)]
