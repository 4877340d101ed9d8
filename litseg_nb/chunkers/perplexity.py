"""Perplexity chunking (Meta-Chunking, Zhao et al. 2025, §3.1.1): chunks end at the minima of each
sentence's mean token cross-entropy given the unit's preceding text. Past ``max_context`` the newest
tokens are kept: a front-trimmed KV cache (hf) or windows replaying that schedule (other backends).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..config import Options
from ..llm.base import Generation, UsageTag
from ..core.schema import Book, Chunk, Unit
from .base import ChunkerError, chunks_from_boundaries
from ..core.cache import StepCache


def find_minima(values: Sequence[float], threshold: float) -> list[int]:
    """0-based indices of Meta-Chunking's boundary minima: interior ``PPL[i]`` below both neighbours
    with one drop ``>= threshold``, or a left drop ``>= threshold`` with an equal right neighbour."""
    out = []
    for i in range(1, len(values) - 1):
        left, mid, right = values[i - 1], values[i], values[i + 1]
        if any(math.isnan(v) for v in (left, mid, right)):
            continue
        if mid < left and mid <= right and (left - mid >= threshold or (mid < right and right - mid >= threshold)):
            out.append(i)
    return out


def chunk_starts_from_minima(n: int, minima: Sequence[int]) -> list[int]:
    """1-based chunk starts: a chunk ends with each minimum sentence."""
    return [1] + [m + 2 for m in minima if m + 2 <= n]


class KVWindowScorer:
    """Teacher-forced token log-probabilities with a KV cache front-trimmed at ``max_context``."""

    def __init__(self, model: Any, max_context: int, block_tokens: int):
        if block_tokens <= 0 or max_context <= 0:
            raise ValueError("max_context and block_tokens must be positive")
        self.model = model
        self.max_context = max_context
        self.block_tokens = min(block_tokens, max_context)
        self.max_cache_seen = 0  # for tests/diagnostics
        self.dropped_tokens = 0

    def token_logprobs(self, ids: Sequence[int]) -> list[float]:
        """``lp[k]`` = log p(ids[k] | ids[<k]) for k >= 1 (``lp[0]`` is NaN: nothing predicts it)."""
        import torch
        from transformers import DynamicCache

        dev = next(self.model.parameters()).device
        cache = DynamicCache()
        out: list[float] = [float("nan")]
        last_logits = None
        pos = 0
        with torch.no_grad():
            while pos < len(ids):
                block = list(ids[pos:pos + self.block_tokens])
                cached = cache.get_seq_length()
                overflow = cached + len(block) - self.max_context
                if overflow > 0:
                    for layer in cache.layers:
                        layer.keys = layer.keys[..., overflow:, :]
                        layer.values = layer.values[..., overflow:, :]
                    self.dropped_tokens += overflow
                    cached -= overflow
                inp = torch.tensor([block], device=dev)
                position_ids = torch.arange(pos, pos + len(block), device=dev).unsqueeze(0)
                attn = torch.ones(1, cached + len(block), dtype=torch.long, device=dev)
                res = self.model(input_ids=inp, position_ids=position_ids, attention_mask=attn,
                                 past_key_values=cache, use_cache=True)
                cache = res.past_key_values
                self.max_cache_seen = max(self.max_cache_seen, cache.get_seq_length())
                logp = torch.log_softmax(res.logits[0].float(), dim=-1)
                tgt = torch.tensor(block, device=dev)
                if last_logits is not None:
                    out.append(float(last_logits[tgt[0]]))
                if len(block) > 1:
                    out.extend(logp[:-1].gather(1, tgt[1:].unsqueeze(1)).squeeze(1).tolist())
                last_logits = logp[-1]
                pos += len(block)
        return out


def segment_token_ids(tokenizer: Any, segments: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
    """Start token + each segment tokenised alone; returns ids and each segment's ``[a, b)`` ids."""
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if start is None:
        raise ChunkerError("perplexity: the tokenizer has neither a BOS nor an EOS token to start with")
    ids, bounds = [start], []
    enc = tokenizer(list(segments), add_special_tokens=False)["input_ids"]
    for toks in enc:
        bounds.append((len(ids), len(ids) + len(toks)))
        ids.extend(toks)
    return ids, bounds


def segment_nll(token_lp: Sequence[float], bounds: Sequence[tuple[int, int]]) -> list[float]:
    nlls = [[-v for v in token_lp[a:b] if not math.isnan(v)] for a, b in bounds]
    return [sum(vals) / len(vals) if vals else float("nan") for vals in nlls]


def window_plan(n_tokens: int, max_context: int, block_tokens: int) -> list[tuple[int, int, int]]:
    """``(context_start, block_start, block_end)`` per block of :class:`KVWindowScorer`'s schedule."""
    if block_tokens <= 0 or max_context <= 0:
        raise ValueError("max_context and block_tokens must be positive")
    block = min(block_tokens, max_context)
    plan, pos, cached = [], 0, 0
    while pos < n_tokens:
        size = min(block, n_tokens - pos)
        cached = min(cached, max_context - size)  # the oldest cached tokens are dropped
        plan.append((pos - cached, pos, pos + size))
        cached += size
        pos += size
    return plan


def windowed_token_logprobs(backend: Any, ids: Sequence[int], max_context: int, block_tokens: int,
                            tag: UsageTag = UsageTag()) -> list[float]:
    """``lp[k] = log p(ids[k] | context)`` through ``backend.token_logprobs``, windows of :func:`window_plan`."""
    plan = window_plan(len(ids), max_context, block_tokens)
    # merge blocks that see the text from its start into one window (no trimming yet)
    windows: list[tuple[int, int, int]] = []
    for ctx, a, b in plan:
        if windows and ctx == 0 and windows[-1][0] == 0:
            windows[-1] = (0, windows[-1][1], b)
        else:
            windows.append((ctx, a, b))
    # as in the hf path, a block's first token is predicted by the previous block: one token more per window
    seqs = [list(ids[ctx:b + 1 if i + 1 < len(windows) else b])
            for i, (ctx, _, b) in enumerate(windows)]
    out = backend.token_logprobs(seqs, tag)
    lp = [float("nan")] * len(ids)
    for i, ((ctx, a, _), seq, vals) in enumerate(zip(windows, seqs, out)):
        if len(vals) != len(seq) - 1:
            raise ChunkerError(f"perplexity: backend returned {len(vals)} log-probs for a "
                               f"{len(seq)}-token window")
        for k in range(a + 1 if i else ctx + 1, ctx + len(seq)):
            lp[k] = float(vals[k - ctx - 1])
    return lp


def unit_segments(book: Book, unit: Unit) -> list[str]:
    """Sentence texts with the whitespace before each (except the first) attached to it."""
    sents = unit.sentences
    return [book.text[sents[i - 1].end if i else s.start:s.end] for i, s in enumerate(sents)]


def sentence_perplexities(book: Book, unit: Unit, backend: Any, max_context: int, block_tokens: int,
                          tag: UsageTag = UsageTag()) -> list[float]:
    """Per-sentence mean NLL given the unit's preceding text (hf: carried KV cache; else windows)."""
    model, tok = getattr(backend, "model", None), getattr(backend, "tokenizer", None)
    hf = model is not None and tok is not None and callable(model)
    if tok is None:
        raise ChunkerError(
            f"perplexity chunking needs the model's tokenizer locally: backend "
            f"{getattr(backend, 'name', type(backend).__name__)!r} ({getattr(backend, 'model_id', '?')}) "
            "has none (give a model name or local path the tokenizer loads from)")
    segments = unit_segments(book, unit)
    config = {"model": getattr(backend, "model_id", "?"), "max_context": max_context,
              "block_tokens": block_tokens}
    if not hf:
        config["scorer"] = "windows"  # recomputed windows, not the carried cache
    cache = StepCache("ppl-sentence-scores", config=config, inputs={"segments": segments})
    if cache.exists():  # e.g. Perplexity+Merge reuses the scores of the Perplexity run
        return [float("nan") if v is None else v for v in cache.load()]
    ids, bounds = segment_token_ids(tok, segments)
    if not hf:  # vLLM / OpenAI-compatible: the backend records its own usage
        lp = windowed_token_logprobs(backend, ids, max_context, block_tokens, tag)
    else:
        t0 = time.perf_counter()
        lp = KVWindowScorer(model, max_context, block_tokens).token_logprobs(ids)
        ledger = getattr(backend, "ledger", None)
        if ledger is not None:
            ledger.record(tag, Generation("", prompt_tokens=len(ids), completion_tokens=0,
                                          latency_s=time.perf_counter() - t0, cached_prompt_tokens=0))
    scores = segment_nll(lp, bounds)
    cache.save([None if math.isnan(v) else v for v in scores])
    return scores


def perplexity_chunks(book: Book, unit: Unit, threshold: float, dynamic_overlap: bool = False,
                      backend: Any = None, max_context: int = 8192, block_tokens: int = 1024,
                      tag: UsageTag = UsageTag(), method: str = "perplexity") -> list[Chunk]:
    """Meta-Chunking PPL chunks of one unit."""
    if unit.n_sentences == 0:
        return []
    ppl = sentence_perplexities(book, unit, backend, max_context, block_tokens, tag)
    minima = find_minima(ppl, threshold)
    starts = chunk_starts_from_minima(unit.n_sentences, minima)
    overlap = [False] + [dynamic_overlap] * (len(starts) - 1)
    chunks = chunks_from_boundaries(book, unit, method, starts, overlap_prev=overlap)
    for c in chunks:
        c.metadata["ppl"] = [round(float(v), 4) for v in ppl[c.from_idx - 1:c.to_idx]]
    return chunks


@dataclass(frozen=True)
class PerplexityOptions(Options):
    """Options of the perplexity chunker (Meta-Chunking §3.1.1) and of ``perplexity+merge`` (App. F)."""

    perplexity_threshold: float = 0.4  # Meta-Chunking App. G (NarrativeQA)
    perplexity_merge_threshold: float = 0.0  # App. F: θ = 0 before dynamic combination
    perplexity_dynamic_overlap: bool = False  # the minimum sentence joins both neighbours
    perplexity_max_context: int = 0  # tokens kept in the KV cache; 0 = llm.max_model_len
    perplexity_block_tokens: int = 1024  # tokens fed per forward pass
