"""The one LLM interface every stage shares (LitSeg, baselines, Lite, judges, RAG generation).

A backend implements :class:`LLMBackend`:

* ``chat(conversations, params, tag)`` – batched chat generation → :class:`Generation` per item;
* ``next_token_logprobs(conversations, candidates, tag)`` – log-probabilities of chosen candidate
  tokens as the next token after the chat prompt (margin sampling, yes/no scoring);
* ``text_logprobs(texts, tag)`` – teacher-forced per-token log-probabilities of raw texts
  (perplexity chunking);
* ``count_tokens(text)`` and ``tokenizer``.

Every call records prompt, cached-prompt and completion tokens and latency in a
:class:`UsageLedger`, keyed by :class:`UsageTag` (method, book, stage), for notebook 08.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}
Conversation = list[Message]


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 512
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    json_schema: dict[str, Any] | None = None  # constrained decoding when the backend supports it
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class UsageTag:
    method: str = ""
    book: str = ""
    stage: str = ""


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached_prompt_tokens: int | None = None
    cache_hit: bool = False  # served from the persistent request cache
    finish_reason: str = ""


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0


class UsageLedger:
    """Thread-safe accumulation of LLM usage per (method, book, stage)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_tag: dict[UsageTag, Usage] = defaultdict(Usage)

    def record(self, tag: UsageTag, gen: Generation) -> None:
        with self._lock:
            u = self._by_tag[tag]
            u.calls += 1
            u.prompt_tokens += gen.prompt_tokens
            u.cached_prompt_tokens += gen.cached_prompt_tokens or 0
            u.completion_tokens += gen.completion_tokens
            u.latency_s += gen.latency_s
            u.cache_hits += int(gen.cache_hit)

    def replay(self, tag: UsageTag, row: dict[str, Any]) -> None:
        """Add usage recorded when the work was done to a run that did not redo it (a step-cache hit,
        a resumed unit): the cost is kept as recorded, and every replayed call counts as a cache hit."""
        with self._lock:
            u = self._by_tag[tag]
            for name, f in Usage.__dataclass_fields__.items():
                if name != "cache_hits" and row.get(name) is not None:
                    setattr(u, name, getattr(u, name) + (float if f.type in (float, "float") else int)(row[name]))
            u.cache_hits += int(row.get("calls") or 0)

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{**asdict(t), **asdict(u)} for t, u in sorted(self._by_tag.items(), key=lambda kv: (
                kv[0].method, kv[0].book, kv[0].stage))]

    def to_frame(self):
        import pandas as pd

        cols = ["method", "book", "stage", *Usage.__dataclass_fields__]
        return pd.DataFrame(self.rows(), columns=cols)

    def reset(self) -> None:
        with self._lock:
            self._by_tag.clear()


@runtime_checkable
class LLMBackend(Protocol):
    name: str  # backend name, e.g. "hf"
    model_id: str  # model identifier used in cache keys and table labels
    ledger: UsageLedger

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams,
             tag: UsageTag = UsageTag()) -> list[Generation]: ...

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]: ...

    def text_logprobs(self, texts: Sequence[str], tag: UsageTag = UsageTag()) -> list[list[float]]: ...

    def count_tokens(self, text: str) -> int: ...


class LLMError(RuntimeError):
    """A backend failed after its bounded retries (names backend, model and the cause)."""


@dataclass
class ScriptedBackend:
    """A deterministic stand-in backend for tests: replies come from a script.

    ``replies`` is consumed in order by ``chat`` (a callable ``reply(conversation) -> str`` may be
    given instead). ``logprobs`` likewise scripts ``next_token_logprobs``. Tokens are counted as
    whitespace-separated words. Exceptions in the script are raised (to test fault handling).
    """

    replies: list[Any] = field(default_factory=list)
    reply_fn: Any = None
    logprob_fn: Any = None
    text_logprob_fn: Any = None
    name: str = "scripted"
    model_id: str = "scripted"
    ledger: UsageLedger = field(default_factory=UsageLedger)
    calls: list[Conversation] = field(default_factory=list)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    @property
    def tokenizer(self) -> None:
        return None

    def chat(self, conversations, params=SamplingParams(), tag=UsageTag()):
        out = []
        for conv in conversations:
            self.calls.append(list(conv))
            if self.reply_fn is not None:
                reply = self.reply_fn(conv)
            elif self.replies:
                reply = self.replies.pop(0)
            else:
                raise LLMError("ScriptedBackend: script exhausted")
            if isinstance(reply, BaseException):
                raise reply
            prompt = " ".join(m["content"] for m in conv)
            gen = Generation(text=reply, prompt_tokens=self.count_tokens(prompt),
                             completion_tokens=self.count_tokens(reply), latency_s=0.0)
            self.ledger.record(tag, gen)
            out.append(gen)
        return out

    def next_token_logprobs(self, conversations, candidates, tag=UsageTag()):
        if self.logprob_fn is None:
            raise LLMError("ScriptedBackend: no logprob_fn scripted")
        out = []
        for conv in conversations:
            self.calls.append(list(conv))
            out.append(self.logprob_fn(conv, list(candidates)))
            prompt = " ".join(m["content"] for m in conv)
            self.ledger.record(tag, Generation("", self.count_tokens(prompt), 1, 0.0))
        return out

    def text_logprobs(self, texts, tag=UsageTag()):
        if self.text_logprob_fn is None:
            raise LLMError("ScriptedBackend: no text_logprob_fn scripted")
        return [self.text_logprob_fn(t) for t in texts]
