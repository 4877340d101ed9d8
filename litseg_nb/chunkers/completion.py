"""Meta-Chunking's semantic completion (Zhao et al., 2025, §3.2 and Appendix C) on top of a chunk set:
a discriminator, missing reflection, refinement and completion for chunks lacking context, then the
two-level summary of §3.2.2. Spans stay the original's; the prompts are our own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import Options
from ..llm.base import SamplingParams, UsageTag
from ..core.prompts import render_prompt
from ..llm.replies import answer_text, list_items, read_int
from ..core.schema import Book, Chunk

_DIGIT = re.compile(r"(?<!\d)([1-5])(?!\d)")


@dataclass
class CompletionStats:
    chunks: int = 0
    lacking: int = 0
    rewritten: int = 0
    no_items: int = 0  # lacking, but the reflection reply had no item line
    invalid_scores: int = 0
    no_kept_items: int = 0
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
    out = []
    for i in range(n):
        parts = [texts[j][:chars] for j in picks[i]]
        out.append("\n\n".join(f"[{t + 1}] {p}" for t, p in enumerate(parts)) or "(none)")
    return out, source


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
    lacking = [m > 0 for m in margin]
    st.lacking = sum(lacking)
    lack_idx = [i for i, x in enumerate(lacking) if x]

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
    st.no_kept_items = sum(1 for i in lack_idx if items[i] and not kept[i])
    # 2c. missing completion
    rw_idx = [i for i in lack_idx if kept[i]]
    # a rewrite repeats the chunk and adds to it: its budget is the chunk's length plus max_new_tokens
    rw_tokens = max_new_tokens + max((backend.count_tokens(orig[i]) for i in rw_idx), default=0)
    rewrites_raw = chat([render_prompt("baselines/completion_rewrite", title=title, context=ctx[i], chunk=orig[i],
                                       items="\n".join(f"- {x}" for x in kept[i])) for i in rw_idx],
                        SamplingParams(max_new_tokens=rw_tokens, temperature=0.0, seed=seed))
    rewritten: dict[int, str | None] = {}
    rejected: dict[int, str] = {}
    for i, r in zip(rw_idx, rewrites_raw):
        t = answer_text(r).strip()
        if not t or len(t) < 0.5 * len(orig[i]):
            st.rejected_rewrites += 1
            rejected[i] = "empty" if not t else f"shorter than half the original ({len(t)} < {len(orig[i])} chars)"
            rewritten[i] = None
        else:
            rewritten[i] = t
    st.rewritten = sum(1 for v in rewritten.values() if v)

    # 3. two-level summary
    glob = chat([render_prompt("baselines/completion_summary_global", title=title, context=ctx[i], chunk=orig[i])
                 for i in range(len(chunks))])
    loc = chat([render_prompt("baselines/completion_summary_local", chunk=orig[i]) for i in range(len(chunks))])
    glob = [_one_line(x) for x in glob]
    loc = [_one_line(x) for x in loc]
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
            "context": ctx_source, "lacks_context": lacking[i], "discriminator_margin": margin[i],
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
