"""Batching sequential per-unit LLM procedures across units.

Margin sampling and LumberChunker are sequential *within* a unit (each decision depends on the
previous one) but independent *across* units. A procedure is written as a state object with
``request() -> (conversation, SamplingParams) | None`` (None = finished) and ``feed(reply)``;
:func:`run_lockstep` advances all states together, one batched backend call per step and per
distinct sampling setting, so a batched backend sees up to ``len(states)`` prompts at a time.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from ..llm.base import SamplingParams, UsageTag


class StepState(Protocol):
    tag: UsageTag

    def request(self) -> tuple[Any, Any] | None: ...

    def feed(self, reply: Any) -> bool | None: ...  # False: the reply was invalid


def run_lockstep(states: Sequence[StepState], call: Callable[[list[Any], Any, UsageTag], list[Any]],
                 max_steps: int = 1_000_000, by_book: bool = True,
                 reject: Callable[[list[Any], Any], Any] | None = None) -> int:
    """Drive ``states`` to completion; ``call(conversations, params, tag)`` answers one batch.
    A state's ``feed`` returning ``False`` says the reply was invalid: ``reject(conversations, params)``
    is called with those requests (the request cache forgets them, see ``reject_replies``).

    Requests are grouped by (params, tag) so usage is attributed per book; ``by_book=False`` groups by
    (params, method, stage) only, one call per step over every book (tag with an empty book: notebook
    08's paired §4.4 measurement). Returns the number of steps. ``max_steps`` guards against a state
    that never finishes (raises RuntimeError).
    """
    steps = 0
    while True:
        pending = [(s, s.request()) for s in states]
        pending = [(s, r) for s, r in pending if r is not None]
        if not pending:
            return steps
        steps += 1
        if steps > max_steps:
            raise RuntimeError(f"lockstep: states still running after {max_steps} steps")
        groups: dict[tuple[Any, UsageTag], list[tuple[StepState, Any]]] = {}
        for s, (conv, params) in pending:
            tag = s.tag if by_book else UsageTag(s.tag.method, "", s.tag.stage)
            groups.setdefault((params, tag), []).append((s, conv))
        for (params, tag), items in groups.items():
            replies = call([c for _, c in items], params, tag)
            if len(replies) != len(items):
                raise RuntimeError(f"backend answered {len(replies)} of {len(items)} requests")
            invalid = [c for (s, c), r in zip(items, replies) if s.feed(r) is False]
            if invalid and reject is not None:  # replies that failed the state's check: out of the cache
                reject(invalid, params)


def chat_call(backend: Any) -> Callable[[list[Any], SamplingParams, UsageTag], list[str]]:
    def call(convs, params, tag):
        return [g.text for g in backend.chat(convs, params, tag)]

    return call


def logprob_call(backend: Any, candidates: Sequence[str]) -> Callable[[list[Any], Any, UsageTag], list[dict]]:
    def call(convs, _params, tag):
        return backend.next_token_logprobs(convs, list(candidates), tag)

    return call
