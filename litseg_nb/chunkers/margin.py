"""Margin-sampling chunking (Meta-Chunking §3.1.2) with the LitSeg Appendix H prompt.

For the current chunk L (all sentences since the last split) and the next sentence R the model is
asked to answer "1" (split) or "2" (keep) (prompt ``baselines/margin_sampling``). From the
next-token probabilities of the two options:

    margin = P("2" | prompt) - P("1" | prompt)        # P(keep) - P(split)

**Sign convention.** Meta-Chunking's Eq. (2) writes ``Margin = P(y=k1) - P(y=k2)`` for a binary
yes/no decision without fixing which option is k1; its reference code computes the probability of
the *keep* option minus that of the *split* option and keeps R in the chunk when the margin is
*greater than* θ. We follow the code: high margin = keep; **split when margin <= θ**.
Probabilities are the full-vocabulary softmax values (not renormalised over the two options).

**Dynamic threshold** (§3.1.2): θ starts at 0; after every decision the margin is recorded and,
once ``window`` margins exist, θ becomes the mean of the last ``window`` margins (the reference code
uses five). The decision for a sentence uses θ as it was *before* its own margin is recorded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..config import Options
from ..llm.base import UsageTag
from ..core.prompts import fill_prompt, load_prompt
from ..core.schema import Book, Chunk, Unit
from .base import chunks_from_boundaries
from .lockstep import logprob_call, run_lockstep


SPLIT_OPTION, KEEP_OPTION = "1", "2"


@dataclass
class MarginThreshold:
    """θ = 0, then the mean of the last ``window`` margins."""

    window: int = 5
    history: list[float] = field(default_factory=list)
    theta: float = 0.0

    def decide(self, margin: float) -> bool:
        """True = split before the new sentence. Updates θ afterwards."""
        split = margin <= self.theta
        self.history.append(margin)
        if len(self.history) >= self.window:
            recent = self.history[-self.window:]
            self.theta = sum(recent) / len(recent)
        return split


def margin_from_logprobs(lp: dict[str, float]) -> float:
    """``P(keep) - P(split)`` from the candidates' log-probabilities (missing = probability 0)."""
    def p(k: str) -> float:
        v = lp.get(k)
        return 0.0 if v is None or math.isnan(v) else math.exp(v)

    return p(KEEP_OPTION) - p(SPLIT_OPTION)


class MarginState:
    """One unit's margin-sampling procedure (see :mod:`litseg_nb.chunkers.lockstep`)."""

    def __init__(self, book: Book, unit: Unit, template: str, window: int, tag: UsageTag,
                 max_left_tokens: int = 0, count_tokens: Any = None):
        self.book, self.unit, self.template, self.tag = book, unit, template, tag
        self.thr = MarginThreshold(window)
        self.starts = [1]
        self.next = 2  # 1-based index of the sentence R being decided
        self.max_left_tokens = max_left_tokens
        self.count_tokens = count_tokens
        self._sent_tokens: dict[int, int] = {}
        self.margins: list[float] = []
        self.thetas: list[float] = []

    def _left_start(self) -> int:
        """First sentence of L shown in the prompt (the whole current chunk unless capped)."""
        lo = self.starts[-1]
        if self.max_left_tokens <= 0 or self.count_tokens is None:
            return lo
        total, i = 0, self.next - 1
        while i >= lo:
            if i not in self._sent_tokens:
                self._sent_tokens[i] = self.count_tokens(self.unit.sentence_text(self.book.text, i))
            total += self._sent_tokens[i]
            if total > self.max_left_tokens and i < self.next - 1:
                return i + 1
            i -= 1
        return lo

    def request(self):
        if self.next > self.unit.n_sentences:
            return None
        s = self.unit.sentences
        left = self.book.text[s[self._left_start() - 1].start:s[self.next - 2].end]
        right = self.unit.sentence_text(self.book.text, self.next)
        prompt = fill_prompt(self.template, left=left, right=right)
        return [{"role": "user", "content": prompt}], None

    def feed(self, reply: dict[str, float]) -> None:
        m = margin_from_logprobs(reply)
        self.thetas.append(self.thr.theta)
        self.margins.append(m)
        if self.thr.decide(m):
            self.starts.append(self.next)
        self.next += 1

    def chunks(self, method: str) -> list[Chunk]:
        out = chunks_from_boundaries(self.book, self.unit, method, self.starts)
        for c in out:
            # margins[k] decided sentence k+2; keep those inside the chunk for inspection
            c.metadata["margins"] = [round(self.margins[i - 2], 4) for i in range(max(2, c.from_idx), c.to_idx + 1)]
        return out


def margin_chunks_batch(items: Sequence[tuple[Book, Unit]], backend: Any, window: int = 5,
                        max_left_tokens: int = 0, stage: str = "04", method: str = "margin") -> list[list[Chunk]]:
    """Margin-sampling chunks for several units, batched across units (one list per unit)."""
    template = load_prompt("baselines/margin_sampling")
    states = [MarginState(b, u, template, window, UsageTag(method, b.book_id, stage), max_left_tokens,
                          getattr(backend, "count_tokens", None)) for b, u in items]
    run_lockstep(states, logprob_call(backend, [SPLIT_OPTION, KEEP_OPTION]))
    return [s.chunks(method) if s.unit.n_sentences else [] for s in states]


@dataclass(frozen=True)
class MarginOptions(Options):
    """Options of margin sampling (Meta-Chunking §3.1.2)."""

    margin_threshold_window: int = 5  # θ = mean of the last k margins (θ = 0 before k margins)
    margin_max_left_tokens: int = 0  # cap on the left text in the prompt (0 = whole current chunk)
