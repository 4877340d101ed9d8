"""The one LLM interface every stage shares: ``chat``, ``count_tokens`` and log-prob methods, each call
recording its tokens and latency in a :class:`UsageLedger` keyed by (method, book, stage)."""
from __future__ import annotations

import dataclasses
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from ..errors import LitsegError

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
    # one schema per conversation of the call (replaces ``json_schema``; None entries: unconstrained)
    json_schemas: tuple[dict[str, Any] | None, ...] | None = None

    def schemas(self, n: int) -> list[dict[str, Any] | None]:
        """The schema of each of the call's ``n`` conversations (checks ``json_schemas``' length)."""
        if self.json_schemas is not None and len(self.json_schemas) != n:
            raise LLMError(f"SamplingParams.json_schemas has {len(self.json_schemas)} schemas for {n} "
                           "conversations")
        return [self.json_schema if self.json_schemas is None else self.json_schemas[i] for i in range(n)]

    def for_item(self, i: int) -> "SamplingParams":
        """The params of conversation ``i`` alone (its schema as ``json_schema``)."""
        if self.json_schemas is None:
            return self
        return dataclasses.replace(self, json_schema=self.json_schemas[i], json_schemas=None)

    def subset(self, idx: Sequence[int]) -> "SamplingParams":
        """The params of the conversations ``idx`` of the call (their schemas, in that order)."""
        if self.json_schemas is None:
            return self
        return dataclasses.replace(self, json_schemas=tuple(self.json_schemas[i] for i in idx))


@dataclass(frozen=True, order=True)
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
    cached_prompt_tokens: int | None = None  # prompt tokens served from a prefix cache
    cache_hit: bool = False  # served from the persistent request cache
    finish_reason: str = ""
    reasoning_tokens: int = 0  # completion tokens spent in a <think> block (reasoning models)


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    reasoning_tokens: int = 0


class UsageLedger:
    """Thread-safe accumulation of LLM usage per (method, book, stage)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_tag: dict[UsageTag, Usage] = defaultdict(Usage)

    def record(self, tag: UsageTag, gen: Generation) -> None:
        with self._lock:
            u = self._by_tag[tag]
            u.calls += 1
            _add(u, {**asdict(gen), "cache_hits": gen.cache_hit})

    def replay(self, tag: UsageTag, row: dict[str, Any]) -> None:
        """Add usage recorded by a run whose work is reused; every replayed call counts as a cache hit."""
        with self._lock:
            _add(self._by_tag[tag], {**row, "cache_hits": row.get("calls")})

    def merge(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add another ledger's :meth:`rows` (a Ray actor's) as they are."""
        with self._lock:
            for row in rows:
                _add(self._by_tag[UsageTag(row["method"], row["book"], row["stage"])], row)

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{**asdict(t), **asdict(u)} for t, u in sorted(self._by_tag.items(), key=lambda kv: kv[0])]

    def to_frame(self):
        import pandas as pd

        cols = ["method", "book", "stage", *Usage.__dataclass_fields__]
        return pd.DataFrame(self.rows(), columns=cols)

    def reset(self) -> None:
        with self._lock:
            self._by_tag.clear()


def _add(u: Usage, row: Mapping[str, Any]) -> None:
    for name, f in Usage.__dataclass_fields__.items():
        if row.get(name) is not None:
            setattr(u, name, getattr(u, name) + (float if f.type in (float, "float") else int)(row[name]))


class BackendBase:
    """A backend implements ``chat``, ``count_tokens`` and the ``*_ex`` log-prob methods (with usage records)."""

    name: str  # backend name, e.g. "hf"
    model_id: str  # model identifier used in cache keys and table labels
    ledger: UsageLedger

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        raise NotImplementedError

    def next_token_logprobs_ex(self, conversations, candidates, tag=UsageTag()):
        raise LLMError(f"backend {getattr(self, 'name', type(self).__name__)!r} does not score "
                       "next tokens")

    def token_logprobs_ex(self, seqs, tag=UsageTag()):
        raise LLMError(f"backend {getattr(self, 'name', type(self).__name__)!r} does not score "
                       "token sequences")

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        """Log-probability of each candidate's first token as the reply's first token."""
        return [r for r, _ in self.next_token_logprobs_ex(conversations, candidates, tag)]

    def token_logprobs(self, seqs: Sequence[Sequence[int]],
                       tag: UsageTag = UsageTag()) -> list[list[float]]:
        """``out[i][k-1] = log p(seqs[i][k] | seqs[i][:k])`` for ``k >= 1``."""
        return [r for r, _ in self.token_logprobs_ex(seqs, tag)]


class LocalTokenizerMixin:
    """Token counting and prompt rendering for backends holding a transformers ``tokenizer``."""

    name: str
    tokenizer: Any
    enable_thinking: bool

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def render_prompt(self, conversation: Conversation) -> str:
        return self.tokenizer.apply_chat_template(list(conversation), tokenize=False,
                                                  add_generation_prompt=True,
                                                  enable_thinking=self.enable_thinking)

    def prompt_ids(self, conversation: Conversation) -> list[int]:
        return self.tokenizer(self.render_prompt(conversation), add_special_tokens=False).input_ids

    def candidate_token_ids(self, candidates: Sequence[str]) -> list[int]:
        """First token id of each candidate (next-token log-probs score only the first token)."""
        ids = []
        for c in candidates:
            toks = self.tokenizer(c, add_special_tokens=False).input_ids
            if not toks:
                raise LLMError(f"{self.name} backend: candidate {c!r} tokenizes to nothing")
            ids.append(toks[0])
        return ids


def think_token_ids(tokenizer: Any) -> tuple[int | None, int | None]:
    """Ids of ``<think>`` and ``</think>`` when the tokenizer has them as single tokens."""
    out: list[int | None] = []
    for t in ("<think>", "</think>"):
        try:
            i = tokenizer.convert_tokens_to_ids(t)
            ok = isinstance(i, int) and i != tokenizer.unk_token_id and \
                tokenizer.convert_ids_to_tokens(i) == t
        except Exception:  # a tokenizer without these helpers
            i, ok = None, False
        out.append(i if ok else None)
    return out[0], out[1]


def reasoning_token_count(completion_ids: Sequence[int], think_ids: tuple[int | None, int | None]) -> int:
    """Completion tokens up to and including ``</think>`` (all of them when ``<think>`` never closed)."""
    start, end = think_ids
    ids = list(completion_ids)
    if end is not None and end in ids:
        return ids.index(end) + 1
    if start is not None and start in ids[:2]:
        return len(ids)
    return 0


def reasoning_text_split(text: str) -> tuple[str, str]:
    """``(reasoning, rest)`` of a reply text by its ``<think>...</think>`` block (``("", text)`` without one)."""
    end = text.find("</think>")
    if end >= 0:
        return text[:end + len("</think>")], text[end + len("</think>"):]
    if text.lstrip().startswith("<think>"):
        return text, ""
    return "", text


LLMBackend = BackendBase  # the type stages annotate a backend with (the request cache wraps one alike)


class LLMError(LitsegError, RuntimeError):
    """A backend failed after its bounded retries (names backend, model and the cause)."""


class BackendUnavailableError(LLMError):
    """The model server gave no reply after its retries: it stops the run (no fallback answers it)."""


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
