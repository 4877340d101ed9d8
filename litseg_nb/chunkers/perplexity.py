"""Perplexity chunking (Meta-Chunking, Zhao et al. 2025, §3.1.1).

1. Every sentence ``x_i`` of the unit is scored by the mean token negative log-likelihood (nats)
   given *all preceding text of the unit*: Eq. (1) averages token-level values over the sentence's
   K tokens; like the reference implementation we average the token cross-entropy, which is the
   scale the paper's thresholds (θ = 0 ... 0.5, App. F/G) refer to. Sentences are tokenised one by
   one (the leading whitespace belongs to the sentence) and concatenated after one start token
   (BOS, else EOS), so token-to-sentence attribution is exact.
2. Boundaries are the minima of that sequence (:func:`find_minima`): ``PPL[i]`` lower than both
   neighbours with at least one drop ``>= θ``, or a left drop ``>= θ`` with an equal right
   neighbour. The minimum sentence *ends* its chunk (it is well predicted by what precedes it; the
   next, less predictable sentence starts a new chunk), as in the reference code; with dynamic
   overlap it also starts the next chunk (App. D, "PPL Chunking overlap").
3. Texts longer than the context: the token sequence is fed in blocks while the KV cache is
   carried; before a block would push the cache past ``max_context`` tokens the *oldest* cached
   key/value pairs are dropped (§3.1.1). Positions keep counting (rotary keys stay consistent),
   so when the text fits, the result equals a single full pass (tested).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

from ..llm.base import Generation, UsageTag
from ..schema import Book, Chunk, Unit
from .base import ChunkerError, chunks_from_boundaries, where


def find_minima(values: Sequence[float], threshold: float) -> list[int]:
    """0-based indices of Meta-Chunking's boundary minima (see the module docstring).

    Only interior points qualify (both neighbours must exist).
    """
    out = []
    for i in range(1, len(values) - 1):
        left, mid, right = values[i - 1], values[i], values[i + 1]
        if any(math.isnan(v) for v in (left, mid, right)):
            continue
        if mid < left and mid < right:
            if left - mid >= threshold or right - mid >= threshold:
                out.append(i)
        elif mid < left and mid == right:
            if left - mid >= threshold:
                out.append(i)
    return out


def chunk_starts_from_minima(n: int, minima: Sequence[int]) -> list[int]:
    """1-based chunk starts: a chunk ends with each minimum sentence."""
    return [1] + [m + 2 for m in minima if m + 2 <= n]


class KVWindowScorer:
    """Teacher-forced token log-probabilities with a carried, front-trimmed KV cache."""

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
    """Mean negative log-likelihood per segment (NaN for a segment with no tokens)."""
    out = []
    for a, b in bounds:
        vals = [-v for v in token_lp[a:b] if not math.isnan(v)]
        out.append(sum(vals) / len(vals) if vals else float("nan"))
    return out


def hf_parts(backend: Any) -> tuple[Any, Any]:
    """The causal LM and tokenizer behind an LLM backend (the hf backend exposes both)."""
    model = getattr(backend, "model", None)
    tok = getattr(backend, "tokenizer", None)
    if model is None or tok is None or not callable(model):
        raise ChunkerError(
            f"perplexity chunking needs token-level access to a causal LM: backend "
            f"{getattr(backend, 'name', type(backend).__name__)!r} exposes no `model`/`tokenizer` "
            "(use the hf backend, or pass sentence_scores= directly)"
        )
    return model, tok


def unit_segments(book: Book, unit: Unit) -> list[str]:
    """Sentence texts with the whitespace before each (except the first) attached to it."""
    segs, prev_end = [], None
    for s in unit.sentences:
        a = s.start if prev_end is None else prev_end
        segs.append(book.text[a:s.end])
        prev_end = s.end
    return segs


def sentence_perplexities(book: Book, unit: Unit, backend: Any, max_context: int, block_tokens: int,
                          tag: UsageTag = UsageTag()) -> list[float]:
    """Per-sentence mean NLL given all preceding text of the unit (KV-cache windowed)."""
    from ..cache import StepCache

    model, tok = hf_parts(backend)
    segments = unit_segments(book, unit)
    cache = StepCache("ppl-sentence-scores",
                      config={"model": getattr(backend, "model_id", "?"), "max_context": max_context,
                              "block_tokens": block_tokens},
                      inputs={"segments": segments})
    if cache.exists():  # e.g. Perplexity+Merge reuses the scores of the Perplexity run
        return [float("nan") if v is None else v for v in cache.load()]
    ids, bounds = segment_token_ids(tok, segments)
    t0 = time.perf_counter()
    lp = KVWindowScorer(model, max_context, block_tokens).token_logprobs(ids)
    ledger = getattr(backend, "ledger", None)
    if ledger is not None:
        ledger.record(tag, Generation("", prompt_tokens=len(ids), completion_tokens=0,
                                      latency_s=time.perf_counter() - t0))
    scores = segment_nll(lp, bounds)
    cache.save([None if math.isnan(v) else v for v in scores])
    return scores


def perplexity_chunks(book: Book, unit: Unit, threshold: float, dynamic_overlap: bool = False,
                      backend: Any = None, max_context: int = 8192, block_tokens: int = 1024,
                      tag: UsageTag = UsageTag(), method: str = "perplexity",
                      sentence_scores: Callable[[Book, Unit], Sequence[float]] | None = None) -> list[Chunk]:
    """Meta-Chunking PPL chunks of one unit; ``sentence_scores`` overrides the model (tests)."""
    if unit.n_sentences == 0:
        return []
    if sentence_scores is not None:
        ppl = list(sentence_scores(book, unit))
    else:
        ppl = sentence_perplexities(book, unit, backend, max_context, block_tokens, tag)
    if len(ppl) != unit.n_sentences:
        raise ChunkerError(f"{method}: {len(ppl)} scores for {unit.n_sentences} sentences ({where(book, unit)})")
    minima = find_minima(ppl, threshold)
    starts = chunk_starts_from_minima(unit.n_sentences, minima)
    overlap = [False] + [dynamic_overlap] * (len(starts) - 1)
    chunks = chunks_from_boundaries(book, unit, method, starts, overlap_prev=overlap)
    for c in chunks:
        c.metadata["ppl"] = [round(float(v), 4) for v in ppl[c.from_idx - 1:c.to_idx]]
    return chunks
