"""The LLM chunkers that ask a model for each decision: LumberChunker, margin sampling, propositions, and
Meta-Chunking's semantic completion (§3.2, App. C; own prompts) on top of a chunk set.

LumberChunker and margin sampling are per-unit state objects (``request()``, ``feed(reply)``) that
:func:`run_lockstep` advances together, one batched backend call per step.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..config import Options
from ..core.prompts import fill_prompt, load_prompt, render_prompt
from ..core.schema import Book, Chunk, Unit, chunk_id, word_count
from ..llm.base import SamplingParams, UsageTag
from ..llm.replies import answer_text, list_items, read_int
from ..llm.request_cache import reject_replies
from .base import chunks_from_boundaries, chunks_from_spans, unit_paragraphs


def run_lockstep(states: Sequence[Any], call: Callable[[list[Any], Any, UsageTag], list[Any]],
                 by_book: bool = True, reject: Callable[[list[Any], Any], Any] | None = None) -> None:
    """Drive ``states`` to completion, one ``call`` per (params, tag) group and step."""
    while True:
        pending = [(s, r) for s in states if (r := s.request()) is not None]
        if not pending:
            return
        groups: dict[tuple[Any, UsageTag], list[tuple[Any, Any]]] = {}
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


# possessive quantifiers: linear however much whitespace a reply holds
ANSWER_RE = re.compile(r"Answer\s*+:?\s*+ID\s*+:?\s*+([0-9]+)", re.IGNORECASE)


def parse_answer(reply: str) -> int | None:
    """The ID in the first ``Answer: ID n`` of the reply's answer; None when absent or over 9 digits."""
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
    """One unit's LumberChunker (Duarte et al., 2024; LitSeg App. H prompt); invalid replies are retried
    with sampling, then the window is one chunk (a counted fallback)."""

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
        params = SamplingParams(max_new_tokens=self.max_new_tokens, seed=self.attempt,
                                temperature=0.0 if self.attempt == 0 else self.retry_temperature)
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
    template = load_prompt("baselines/lumberchunker")
    states = [LumberState(b, u, template, UsageTag(method, b.book_id, stage), budget, max_retries,
                          retry_temperature, max_new_tokens, backend.count_tokens, reference_mode)
              for b, u in items]
    run_lockstep(states, lambda convs, params, tag: [g.text for g in backend.chat(convs, params, tag)],
                 by_book=batch_by_book,
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


SPLIT_OPTION, KEEP_OPTION = "1", "2"


@dataclass
class MarginThreshold:
    """θ = 0, then the mean of the last ``window`` margins."""

    window: int = 5
    history: list[float] = field(default_factory=list)
    theta: float = 0.0

    def decide(self, margin: float) -> bool:
        """True = split before the new sentence; updates θ afterwards."""
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
    """One unit's margin sampling (Meta-Chunking §3.1.2, LitSeg App. H prompt): split when
    P("2" keep) - P("1" split) <= θ, θ as it was before this margin (as in the reference code)."""

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

    def _left_start(self) -> int:
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
    template = load_prompt("baselines/margin_sampling")
    states = [MarginState(b, u, template, window, UsageTag(method, b.book_id, stage), max_left_tokens,
                          getattr(backend, "count_tokens", None)) for b, u in items]
    run_lockstep(states, lambda convs, _params, tag: backend.next_token_logprobs(
        convs, [SPLIT_OPTION, KEEP_OPTION], tag))
    return [s.chunks(method) if s.unit.n_sentences else [] for s in states]


@dataclass(frozen=True)
class MarginOptions(Options):
    """Options of margin sampling (Meta-Chunking §3.1.2)."""

    margin_threshold_window: int = 5  # θ = mean of the last k margins (θ = 0 before k margins)
    margin_max_left_tokens: int = 0  # cap on the left text in the prompt (0 = whole current chunk)


def proposition_chunks_batch(items: Sequence[tuple[Book, Unit]], backend: Any, max_new_tokens: int = 512,
                             max_retries: int = 1, stage: str = "04",
                             method: str = "proposition") -> tuple[list[list[Chunk]], int]:
    """Proposition chunks (each paragraph rewritten into statements, keeping its spans) and the fallback count."""
    template = load_prompt("baselines/proposition")
    paras = [(k, p) for k, (b, u) in enumerate(items)  # (item index, paragraph chunk)
             for p in chunks_from_spans(b, u, "paragraph", unit_paragraphs(b, u))]
    results: dict[int, list[str]] = {}
    todo = list(range(len(paras)))
    for attempt in range(max_retries + 1):
        if not todo:
            break
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0 if attempt == 0 else 0.7,
                                seed=attempt)
        by_book: dict[str, list[int]] = {}
        for i in todo:
            by_book.setdefault(items[paras[i][0]][0].book_id, []).append(i)
        for book_id, idxs in by_book.items():
            convs = [[{"role": "user", "content": fill_prompt(template, paragraph=paras[i][1].text)}] for i in idxs]
            gens = backend.chat(convs, params, UsageTag(method, book_id, stage))
            for i, g in zip(idxs, gens):
                props = list_items(g.text)
                if props:
                    results[i] = props
        todo = [i for i in todo if i not in results]
    out: list[list[Chunk]] = [[] for _ in items]
    for i, (k, p) in enumerate(paras):
        b, u = items[k]
        props = results.get(i)
        for t in props or [p.text]:
            out[k].append(Chunk(
                book_id=b.book_id, unit_id=u.unit_id, chunk_id=chunk_id(u.unit_id, len(out[k])), method=method,
                from_idx=p.from_idx, to_idx=p.to_idx, spans=list(p.spans), text=t, main_text=t,
                is_source_span=not props,
                metadata={"paragraph": p.chunk_id, "fallback": not props},
            ))
    return out, len(todo)


@dataclass(frozen=True)
class PropositionOptions(Options):
    """Options of proposition chunking (Chen et al.'s propositionizer prompt)."""

    proposition_max_new_tokens: int = 512
    proposition_max_retries: int = 1


_DIGIT = re.compile(r"(?<!\d)([1-5])(?!\d)")


@dataclass
class CompletionStats:
    chunks: int = 0
    lacking: int = 0
    rewritten: int = 0
    no_items: int = 0  # lacking, but the reflection reply had no item line
    invalid_scores: int = 0
    rejected_rewrites: int = 0
    empty_summaries: int = 0


def parse_score(reply: str) -> int | None:
    """The first standalone digit 1-5 of the reply's answer text."""
    m = _DIGIT.search(answer_text(reply))
    return read_int(m.group(1)) if m else None


def _one_line(reply: str) -> str:
    return " ".join(answer_text(reply).split())


def _contexts(chunks: Sequence[Chunk], embedder: Any, k: int, chars: int) -> tuple[list[str], str]:
    texts = [c.main_text or c.text for c in chunks]
    n = len(texts)
    if embedder is not None and k > 0 and n > 1:
        emb = np.asarray(embedder.encode(texts, kind="passage"), dtype=np.float64)
        emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        sim = emb @ emb.T
        np.fill_diagonal(sim, -np.inf)
        picks = [sorted(np.argsort(-sim[i], kind="stable")[: min(k, n - 1)].tolist()) for i in range(n)]
        source = f"top-{k} similar chunks (embedding cosine)"
    else:
        picks = [[j for j in (i - 1, i + 1) if 0 <= j < n] for i in range(n)]
        source = "neighbouring chunks"
    return ["\n\n".join(f"[{t + 1}] {texts[j][:chars]}" for t, j in enumerate(pick)) or "(none)"
            for pick in picks], source


def complete_book_chunks(book: Book, chunks: Sequence[Chunk], backend: Any, method: str, embedder: Any = None,
                         max_new_tokens: int = 256, max_items: int = 5, min_score: int = 4,
                         related_chunks: int = 2, context_chars: int = 600, index_summary: bool = True,
                         stage: str = "04", seed: int = 0) -> tuple[list[Chunk], CompletionStats]:
    """Semantic completion of one book's chunks; unusable replies are counted and keep the original text."""
    st = CompletionStats(chunks=len(chunks))
    if not chunks:
        return [], st
    tag = UsageTag(method, book.book_id, stage)
    sp = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, seed=seed)
    title = book.title
    orig = [c.main_text or c.text for c in chunks]
    ctx, ctx_source = _contexts(chunks, embedder, related_chunks, context_chars)

    def chat(prompts: list[str], params: SamplingParams = sp) -> list[str]:
        if not prompts:
            return []
        gens = backend.chat([[{"role": "user", "content": p}] for p in prompts], params, tag)
        return [g.text for g in gens]

    # 1. discriminator
    convs = [[{"role": "user", "content": render_prompt("baselines/completion_discriminator", title=title,
                                                         context=ctx[i], chunk=orig[i])}] for i in range(len(chunks))]
    lps = backend.next_token_logprobs(convs, ["yes", "no"], tag)
    margin = [float(lp["yes"] - lp["no"]) for lp in lps]
    lack_idx = [i for i, m in enumerate(margin) if m > 0]
    st.lacking = len(lack_idx)

    # 2a. missing reflection
    refl = chat([render_prompt("baselines/completion_reflection", title=title, context=ctx[i], chunk=orig[i])
                 for i in lack_idx])
    items = {i: list_items(r, max_items) for i, r in zip(lack_idx, refl)}
    st.no_items = sum(1 for i in lack_idx if not items[i])
    # 2b. missing refinement (one scoring call per item)
    pairs = [(i, it) for i in lack_idx for it in items[i]]
    scores_raw = chat([render_prompt("baselines/completion_refinement", title=title, context=ctx[i], chunk=orig[i],
                                     item=it) for i, it in pairs])
    scores: dict[int, list[int | None]] = {i: [] for i in lack_idx}
    kept: dict[int, list[str]] = {i: [] for i in lack_idx}
    for (i, it), r in zip(pairs, scores_raw):
        s = parse_score(r)
        scores[i].append(s)
        if s is None:
            st.invalid_scores += 1
        elif s >= min_score:
            kept[i].append(it)
    # 2c. missing completion
    rw_idx = [i for i in lack_idx if kept[i]]
    # a rewrite repeats the chunk and adds to it: its budget is the chunk's length plus max_new_tokens
    rw_tokens = max_new_tokens + max((backend.count_tokens(orig[i]) for i in rw_idx), default=0)
    rewrites_raw = chat([render_prompt("baselines/completion_rewrite", title=title, context=ctx[i], chunk=orig[i],
                                       items="\n".join(f"- {x}" for x in kept[i])) for i in rw_idx],
                        SamplingParams(max_new_tokens=rw_tokens, temperature=0.0, seed=seed))
    rewritten: dict[int, str] = {}
    rejected: dict[int, str] = {}
    for i, r in zip(rw_idx, rewrites_raw):
        t = answer_text(r).strip()
        if not t or len(t) < 0.5 * len(orig[i]):
            rejected[i] = "empty" if not t else f"shorter than half the original ({len(t)} < {len(orig[i])} chars)"
        else:
            rewritten[i] = t
    st.rejected_rewrites, st.rewritten = len(rejected), len(rewritten)

    # 3. two-level summary
    glob = [_one_line(x) for x in chat([render_prompt("baselines/completion_summary_global", title=title,
                                                      context=ctx[i], chunk=orig[i]) for i in range(len(chunks))])]
    loc = [_one_line(x) for x in chat([render_prompt("baselines/completion_summary_local", chunk=c) for c in orig])]
    fuse_idx = [i for i in range(len(chunks)) if glob[i] or loc[i]]
    fused_raw = chat([render_prompt("baselines/completion_summary_fuse", global_summary=glob[i] or "(none)",
                                    local_summary=loc[i] or "(none)") for i in fuse_idx])
    fused = {i: _one_line(r) for i, r in zip(fuse_idx, fused_raw)}
    st.empty_summaries = sum(1 for i in range(len(chunks)) if not fused.get(i))

    out = []
    for i, c in enumerate(chunks):
        body = rewritten.get(i) or orig[i]
        summary = fused.get(i, "")
        text = f"{summary}\n\n{body}" if (index_summary and summary) else body
        md = dict(c.metadata)
        md["base_method"] = c.method
        md["completion"] = {
            "context": ctx_source, "lacks_context": margin[i] > 0, "discriminator_margin": margin[i],
            "missing_items": items.get(i, []), "item_scores": scores.get(i, []), "kept_items": kept.get(i, []),
            "rewritten": rewritten.get(i), "rewrite_rejected": rejected.get(i),
            "summary_global": glob[i], "summary_local": loc[i], "summary": summary,
            "indexed": "summary + " + ("rewrite" if rewritten.get(i) else "original") if (index_summary and summary)
            else ("rewrite" if rewritten.get(i) else "original"),
        }
        out.append(Chunk(c.book_id, c.unit_id, c.chunk_id, method, c.from_idx, c.to_idx, list(c.spans), text,
                         c.main_text, list(c.context_idx), c.subtitle, c.is_source_span, md))
    return out, st


@dataclass(frozen=True)
class CompletionOptions(Options):
    """Options of the semantic completion (§3.2, App. C) of ``perplexity+merge+completion``."""

    seed: int = 0
    completion_max_new_tokens: int = 256
    completion_max_items: int = 5  # missing items kept from the reflection stage
    completion_min_score: int = 4  # refinement: items scored >= this (1-5) are added
    completion_related_chunks: int = 2  # context: most similar chunks by embedding (0 = neighbours)
    completion_context_chars: int = 600  # characters of each context chunk in the prompts
    completion_index_summary: bool = True  # retriever text = enhanced summary + (rewritten) chunk
