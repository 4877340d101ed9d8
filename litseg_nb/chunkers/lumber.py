"""LumberChunker (Duarte et al., 2024) on sentence-level units, LitSeg Appendix H prompt.

Per unit, sentences are numbered ``ID n: <sentence>`` (n = the sentence's 1-based index in the
unit). Starting at sentence s, a window grows until its token count reaches the budget (550 by
default; real token counts from the backend's tokenizer, the crossing sentence included, at least
two sentences while two remain). The model is asked for the first ID where the content changes
(prompt ``baselines/lumberchunker``) and the reply is parsed for ``Answer: ID n``.

Validity: n must lie inside the window and not be its first ID (``s < n <= last``). Then the chunk
is ``s .. n-1`` and the next window starts at n. An invalid reply (no ``Answer: ID``, an ID outside
the window, the window's first ID) is retried up to ``max_retries`` times with sampling
(temperature ``retry_temperature``, seed = attempt number, so reruns are reproducible).
**Fallback** after the retries: the whole window becomes one chunk and the next window starts
after it (the chunk is bounded by the budget; every fallback is counted in the chunk metadata and
the run report). The procedure runs to the unit's last sentence: unlike the reference script,
which stops five paragraphs before the end, the tail is never skipped.

``reference_mode=True`` follows the reference script's window choices instead: token estimate
1.2 x words and the window stops *before* the sentence that reaches the budget (labelled
``lumber[reference-mode]`` in metadata).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..config import Options
from ..llm.base import SamplingParams, UsageTag
from ..core.prompts import fill_prompt, load_prompt
from ..llm.replies import answer_text
from ..llm.request_cache import reject_replies
from ..core.schema import Book, Chunk, Unit, word_count
from .base import chunks_from_boundaries
from .lockstep import chat_call, run_lockstep


# possessive quantifiers: linear however much whitespace a reply holds
ANSWER_RE = re.compile(r"Answer\s*+:?\s*+ID\s*+:?\s*+([0-9]+)", re.IGNORECASE)


def parse_answer(reply: str) -> int | None:
    """The ID in the first ``Answer: ID n`` of the reply's answer (reasoning blocks removed by
    :func:`litseg_nb.llm.replies.answer_text`); None when absent or longer than 9 digits."""
    m = ANSWER_RE.search(answer_text(reply))
    return int(m.group(1)) if m and len(m.group(1)) <= 9 else None


def classify_reply(reply: str, first: int, last: int) -> tuple[str, int | None]:
    """``("valid", n)`` or an error kind: ``no_answer``, ``first_id``, ``outside_window``."""
    n = parse_answer(reply)
    if n is None:
        return "no_answer", None
    if n == first:
        return "first_id", n
    if not first < n <= last:
        return "outside_window", n
    return "valid", n


def grow_window(tokens: Sequence[float], start: int, budget: float, reference_mode: bool) -> int:
    """Last 1-based index of the window starting at ``start`` (``tokens[i-1]`` = size of line i)."""
    n = len(tokens)
    total, end = 0.0, start - 1
    while end < n and total < budget:
        end += 1
        total += tokens[end - 1]
    if reference_mode and total >= budget and end > start:
        end -= 1  # the reference script drops the line that reached the budget
    if end < min(start + 1, n):  # at least two lines while two remain
        end = min(start + 1, n)
    return end


@dataclass
class LumberStats:
    calls: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    fallbacks: int = 0


class LumberState:
    def __init__(self, book: Book, unit: Unit, template: str, tag: UsageTag, budget: int,
                 max_retries: int, retry_temperature: float, max_new_tokens: int,
                 count_tokens: Any, reference_mode: bool = False):
        self.book, self.unit, self.template, self.tag = book, unit, template, tag
        self.lines = [f"ID {s.index}: {book.text[s.start:s.end]}" for s in unit.sentences]
        if reference_mode:
            self.tokens = [1.2 * word_count(line) for line in self.lines]
        else:
            self.tokens = [float(count_tokens(line)) for line in self.lines]
        self.budget, self.reference_mode = budget, reference_mode
        self.max_retries, self.retry_temperature = max_retries, retry_temperature
        self.max_new_tokens = max_new_tokens
        self.starts = [1] if self.lines else []
        self.fallback_chunks: set[int] = set()
        self.s = 1
        self.attempt = 0
        self.stats = LumberStats()
        self._window_end = 0
        self._advance_trivial()

    def _advance_trivial(self) -> None:
        """Finish when a single sentence remains (nothing to ask)."""
        n = len(self.lines)
        if self.s >= n:
            self.s = n + 1  # done: the last chunk runs to the end
        else:
            self._window_end = grow_window(self.tokens, self.s, self.budget, self.reference_mode)

    def request(self):
        if self.s > len(self.lines):
            return None
        doc = "\n".join(self.lines[self.s - 1:self._window_end])
        prompt = fill_prompt(self.template, numbered_units=doc)
        if self.attempt == 0:
            params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=0.0)
        else:
            params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.retry_temperature,
                                    seed=self.attempt)
        return [{"role": "user", "content": prompt}], params

    def feed(self, reply: str) -> bool:
        """Take one reply; False when it was invalid (retried, or the window's fallback)."""
        self.stats.calls += 1
        kind, n = classify_reply(reply, self.s, self._window_end)
        if kind == "valid":
            self._start_chunk(n)
            return True
        self.stats.invalid[kind] = self.stats.invalid.get(kind, 0) + 1
        if self.attempt < self.max_retries:
            self.attempt += 1
            return False
        # fallback: the whole window is one chunk
        self.stats.fallbacks += 1
        self.fallback_chunks.add(self.starts[-1])
        self._start_chunk(self._window_end + 1)
        return False

    def _start_chunk(self, n: int) -> None:
        self.attempt = 0
        if n <= len(self.lines):
            self.starts.append(n)
        self.s = n
        self._advance_trivial()

    def chunks(self, method: str) -> list[Chunk]:
        if not self.lines:
            return []
        out = chunks_from_boundaries(self.book, self.unit, method, self.starts)
        for c in out:
            c.metadata["fallback"] = c.from_idx in self.fallback_chunks
            if self.reference_mode:
                c.metadata["mode"] = "reference-script (1.2 x words)"
        return out


def lumber_chunks_batch(items: Sequence[tuple[Book, Unit]], backend: Any, budget: int = 550,
                        max_retries: int = 2, retry_temperature: float = 0.7, max_new_tokens: int = 32,
                        reference_mode: bool = False, stage: str = "04",
                        method: str = "lumber", batch_by_book: bool = True
                        ) -> tuple[list[list[Chunk]], list[LumberStats]]:
    """LumberChunker chunks for several units, batched across units (per book, or across books with
    ``batch_by_book=False``); also per-unit stats."""
    template = load_prompt("baselines/lumberchunker")
    states = [LumberState(b, u, template, UsageTag(method, b.book_id, stage), budget, max_retries,
                          retry_temperature, max_new_tokens, backend.count_tokens, reference_mode)
              for b, u in items]
    run_lockstep(states, chat_call(backend), by_book=batch_by_book,
                 reject=lambda convs, params: reject_replies(backend, convs, params))
    return [s.chunks(method) for s in states], [s.stats for s in states]


@dataclass(frozen=True)
class LumberOptions(Options):
    """Options of LumberChunker (Duarte et al., 2024): window budget θ and the reply handling."""

    lumber_budget_tokens: int = 550
    lumber_max_retries: int = 2  # extra attempts after an invalid reply
    lumber_retry_temperature: float = 0.7
    lumber_max_new_tokens: int = 32
    lumber_reference_mode: bool = False  # reference script: 1.2 x words estimate, stop before budget
