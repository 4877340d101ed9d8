"""The transformers backend (``backend="hf"``): CPU or CUDA, batched by length, left-padded.

Speed features that leave outputs unchanged: a shared prompt prefix has its key/value cache computed once
(:class:`PrefixStore`), decoding writes into a reserved buffer instead of concatenating the cache every
step, and forward-only batches stop before more than ``max_padding`` of their tokens would be padding."""
from __future__ import annotations

import functools
import json
import threading
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Sequence

from .base import (BackendBase, Conversation, Generation, LLMError, LocalTokenizerMixin, SamplingParams,
                   UsageLedger, UsageTag, reasoning_token_count, think_token_ids)
from .models import load_model_and_tokenizer, model_revision
from .threads import follow_thread_budget


@functools.lru_cache(maxsize=1)
def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class _GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` writing new keys/values into a reserved buffer (grown geometrically)."""

        def __init__(self, reserve: int = 0) -> None:
            super().__init__()
            self._reserve = int(reserve)
            self._kbuf = self._vbuf = None
            self._view = None  # the keys view last handed out (anything else: rebuild the buffer)

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, add = self.get_seq_length(), key_states.shape[-2]
            kb = self._kbuf
            if (kb is None or self.keys is not self._view or n + add > kb.shape[-2]
                    or kb.shape[0] != key_states.shape[0]):
                cap = max(n + add, self._reserve, 2 * n)
                shape = (key_states.shape[0], key_states.shape[1], cap, key_states.shape[-1])
                kb = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
                vb = torch.empty(shape[:-1] + (value_states.shape[-1],), dtype=value_states.dtype,
                                 device=value_states.device)
                if n:
                    kb[..., :n, :] = self.keys
                    vb[..., :n, :] = self.values
                self._kbuf, self._vbuf = kb, vb
            self._kbuf[..., n:n + add, :] = key_states
            self._vbuf[..., n:n + add, :] = value_states
            self.keys, self.values = self._kbuf[..., :n + add, :], self._vbuf[..., :n + add, :]
            self._view = self.keys
            return self.keys, self.values

    return _GrowingLayer


def padded_batches(order: Sequence[int], lengths: Sequence[int], batch_size: int,
                   max_padding: float = 1.0) -> list[list[int]]:
    """Batches of ``order`` (longest first), each ending before ``batch_size`` or ``max_padding`` is exceeded."""
    out: list[list[int]] = []
    cur: list[int] = []
    real = 0
    for i in order:
        if cur:
            width = lengths[cur[0]]
            full = len(cur) >= batch_size
            waste = 1.0 - (real + lengths[i]) / (width * (len(cur) + 1)) if width else 0.0
            if full or waste > max_padding:
                out.append(cur)
                cur, real = [], 0
        cur.append(i)
        real += lengths[i]
    if cur:
        out.append(cur)
    return out


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@dataclass(eq=False, slots=True)
class Prefix:
    """A stored prompt prefix: its token ids and per-layer key/value tensors (batch size 1)."""

    ids: tuple[int, ...]
    kv: list[tuple[Any, Any]]

    def __len__(self) -> int:
        return len(self.ids)


class PrefixStore:
    """One backend's stored prefixes (LRU) and recent prompts; the caller holds the backend's lock."""

    def __init__(self, owner: Any, min_prefix_tokens: int = 32, max_prefixes: int = 4) -> None:
        self.owner = weakref.proxy(owner)
        self.min_prefix_tokens = max(1, int(min_prefix_tokens))
        self.max_prefixes = max(1, int(max_prefixes))
        self.entries: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self.recent: deque[list[int]] = deque(maxlen=16)
        self.builds = 0  # prefixes computed (diagnostics, tests)
        self.computed_tokens = 0  # tokens computed while building them

    def cache_for(self, prefix: Prefix, batch: int, reserve: int = 0):
        """A fresh cache holding ``prefix`` for ``batch`` rows (the stored tensors are never written)."""
        cache = self.owner._new_cache(reserve)
        for layer, (k, v) in enumerate(prefix.kv):
            cache.update(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1), layer)
        return cache

    def stored(self, ids: Sequence[int], max_len: int) -> Prefix | None:
        """The longest stored prefix of ``ids`` with at most ``max_len`` tokens."""
        best = max((pre for pre in self.entries.values() if len(pre) <= max_len and tuple(ids[:len(pre)]) == pre.ids),
                   key=len, default=None)
        if best is not None:
            self.entries.move_to_end(best.ids)
        return best

    def build(self, ids: Sequence[int]) -> tuple[Prefix, int]:
        """Store the key/value cache of ``ids`` (computed past the longest stored prefix); with that length."""
        import torch
        from transformers import DynamicCache

        model, device = self.owner.model, self.owner.device
        ids = tuple(ids)
        base, m = None, 0
        for pre in self.entries.values():
            n = common_prefix_len(pre.ids, ids)
            if n > m:
                base, m = pre, n
        if base is not None:
            self.entries.move_to_end(base.ids)
            kv = [(k[..., :m, :], v[..., :m, :]) for k, v in base.kv]
        if m < len(ids):
            cache = (self.cache_for(Prefix(ids[:m], kv), 1) if base is not None
                     else DynamicCache(config=model.config))
            inp = torch.tensor([ids[m:]], dtype=torch.long, device=device)
            pos = torch.arange(m, len(ids), device=device)[None]
            mask = torch.ones((1, len(ids)), dtype=torch.long, device=device)
            with torch.inference_mode():
                out = model(input_ids=inp, attention_mask=mask, position_ids=pos,
                            past_key_values=cache, use_cache=True, logits_to_keep=1)
            kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        pre = Prefix(ids, [(k.detach().clone(), v.detach().clone()) for k, v in kv])
        self.entries[ids] = pre
        while len(self.entries) > self.max_prefixes:
            self.entries.popitem(last=False)
        self.builds += 1
        self.computed_tokens += len(ids) - m
        return pre, m

    def plan(self, prompts: Sequence[Sequence[int]]) -> tuple[list[Prefix | None], dict[tuple[int, ...], int]]:
        """Which stored prefix each of the (one or more) prompts uses, and per prefix built now its tokens
        already stored."""
        n = len(prompts)
        # common to all prompts (one prompt: to a recent one), leaving each >= 1 token to compute
        if n > 1:
            shared = min(common_prefix_len(prompts[0], p) for p in prompts[1:])
        else:
            shared = max((common_prefix_len(prompts[0], r) for r in self.recent), default=0)
        shared = min(shared, min(len(p) for p in prompts) - 1)
        self.recent.extend(list(p) for p in prompts)
        built: dict[tuple[int, ...], int] = {}
        if shared >= self.min_prefix_tokens:
            have = self.stored(prompts[0], shared)
            if have is None or shared - len(have) >= self.min_prefix_tokens:
                pre, already = self.build(prompts[0][:shared])
                built[pre.ids] = already
                # one prefix for all, its cost charged to the first prompt
                return [pre] * n, built
        return [self.stored(p, len(p) - 1) for p in prompts], built

    @staticmethod
    def cached_counts(batch: Sequence[int], plan: Sequence[Prefix | None],
                      built: dict[tuple[int, ...], int]) -> list[int]:
        """Prompt tokens served from a stored prefix, per item of ``batch``."""
        # the first user of a prefix built in this call pays for it
        return [0 if plan[i] is None else built.pop(plan[i].ids, len(plan[i])) for i in batch]


class HFBackend(LocalTokenizerMixin, BackendBase):
    name = "hf"

    def __init__(self, model: str = "tiny-random", *, dtype: str = "auto", device: str = "auto",
                 batch_size: int = 4, max_model_len: int = 8192, structured_output: bool = False,
                 ledger: UsageLedger | None = None, prefix_reuse: bool = True, enable_thinking: bool = False,
                 growing_cache: bool = True, max_padding: float = 0.25) -> None:
        if not 0.0 <= max_padding <= 1.0:
            raise LLMError(f"hf backend: max_padding must be in [0, 1], got {max_padding}")
        self.max_padding = float(max_padding)
        self.model_id = model
        self.revision = model_revision(model)
        self.batch_size = batch_size
        self.max_model_len = max_model_len
        self.structured_output = structured_output
        self.ledger = ledger if ledger is not None else UsageLedger()
        follow_thread_budget()  # $LITSEG_TORCH_THREADS, or the side-by-side runner's budget file
        self.model, self.tokenizer, self.device = load_model_and_tokenizer(model, dtype, device)
        self._lock = threading.Lock()
        self._grammar_compiler = None
        self._grammars: dict[str, Any] = {}
        cfg_eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos = {self.tokenizer.eos_token_id, *([cfg_eos] if isinstance(cfg_eos, int) else cfg_eos or ())}
        self.eos_token_ids = sorted(i for i in eos if i is not None)
        self.enable_thinking = bool(enable_thinking)
        self.think_ids = think_token_ids(self.tokenizer)
        self.growing_cache = bool(growing_cache)
        cfg = self.model.config  # a layer keeping only a sliding window of keys: no prefix reuse
        sliding = "sliding_attention" in (getattr(cfg, "layer_types", None) or ()) or (
            bool(getattr(cfg, "sliding_window", None)) and getattr(cfg, "use_sliding_window", True) is not False)
        self.prefix_reuse = bool(prefix_reuse) and not sliding
        self.prefixes = PrefixStore(self)

    def _batches(self, lengths: Sequence[int], groups: Sequence[Any] | None = None,
                 max_padding: float = 1.0, apart: Sequence[Any] | None = None) -> list[list[int]]:
        """Item indices in batches of similar length, never mixing ``groups`` or ``apart`` values."""
        tails = [n - (len(groups[i]) if groups is not None and groups[i] is not None else 0)
                 for i, n in enumerate(lengths)]
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        by_group: dict[Any, list[int]] = {}
        for i in order:
            by_group.setdefault((groups[i] if groups is not None else None,
                                 apart[i] if apart is not None else None), []).append(i)
        return [b for members in by_group.values()
                for b in padded_batches(members, tails, self.batch_size, max_padding)]

    def _left_pad(self, seqs: Sequence[Sequence[int]], prefix: Prefix | None = None):
        """``(ids, mask)``: rows ``[prefix][left padding][suffix]`` (``seqs`` all start with ``prefix``)."""
        import torch

        p = len(prefix) if prefix is not None else 0
        tails = [list(s[p:]) for s in seqs]
        width = max(len(t) for t in tails)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(seqs), p + width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), p + width), dtype=torch.long)
        if p:
            ids[:, :p] = torch.tensor(prefix.ids, dtype=torch.long)  # type: ignore[union-attr]
            mask[:, :p] = 1
        for row, t in enumerate(tails):
            if t:
                ids[row, p + width - len(t):] = torch.tensor(t, dtype=torch.long)
                mask[row, p + width - len(t):] = 1
        return ids.to(self.device), mask.to(self.device)

    def _forward_logits(self, seqs: Sequence[Sequence[int]], prefix: Prefix | None = None):
        """Logits of a left-padded batch; with ``prefix`` only the suffix positions."""
        follow_thread_budget()  # per batch: the side-by-side runner's budget may have changed
        import torch

        ids, mask = self._left_pad(seqs, prefix)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"use_cache": False}
        if prefix is not None:
            p = len(prefix)
            ids, position_ids = ids[:, p:], position_ids[:, p:]
            kwargs = {"past_key_values": self.prefixes.cache_for(prefix, ids.shape[0]), "use_cache": True}
        with torch.inference_mode():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids, **kwargs)
        return out.logits.float(), mask

    def clear_prefixes(self) -> None:
        with self._lock:
            self.prefixes = PrefixStore(self)

    def _plan_prefixes(self, prompts: Sequence[Sequence[int]]):
        """``(plan, built)`` of :meth:`PrefixStore.plan` (no prefixes without reuse) and the seconds that took
        per prompt."""
        t0 = time.perf_counter()
        plan, built = self.prefixes.plan(prompts) if self.prefix_reuse else ([None] * len(prompts), {})
        return plan, built, (time.perf_counter() - t0) / len(prompts)

    def _new_cache(self, reserve: int = 0):
        """An empty ``DynamicCache`` (with ``growing_cache``, growing full-attention layers)."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache(config=self.model.config)
        if self.growing_cache and reserve:
            growing = _growing_layer_class()
            cache.layers = [growing(reserve) if type(layer) is DynamicLayer else layer for layer in cache.layers]
        return cache

    def _json_logits_processor(self, schemas: Sequence[dict[str, Any]]):
        """xgrammar's logits processor: one schema for every row of the batch, or one per row."""
        from xgrammar.contrib.hf import LogitsProcessor

        grammars = [self._compiled_grammar(x) for x in schemas]
        # a fresh processor per generate() call (it keeps per-sequence matcher state)
        return LogitsProcessor(grammars[0] if len(grammars) == 1 else grammars)

    def _compiled_grammar(self, schema: dict[str, Any]):
        import xgrammar as xgr

        if self._grammar_compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.model.config.vocab_size,
                stop_token_ids=self.eos_token_ids)
            self._grammar_compiler = xgr.GrammarCompiler(info)
        # xgrammar emits properties in the schema's order: compiled as given, memoised by unsorted text
        key = json.dumps(schema)
        if key not in self._grammars:
            try:
                self._grammars[key] = self._grammar_compiler.compile_json_schema(
                    key, any_whitespace=False)
            except Exception as exc:  # xgrammar raises RuntimeError/ValueError for bad schemas
                raise LLMError(f"hf backend: cannot compile JSON schema for constrained decoding: "
                               f"{exc}") from exc
        return self._grammars[key]

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        if not conversations:
            return []
        prompts = [self.prompt_ids(c) for c in conversations]
        for i, p in enumerate(prompts):
            if len(p) + params.max_new_tokens > self.max_model_len:
                raise LLMError(
                    f"hf backend ({self.model_id}): conversation {i} has {len(p)} prompt tokens; "
                    f"with max_new_tokens={params.max_new_tokens} it exceeds "
                    f"max_model_len={self.max_model_len}")
        results: list[Generation | None] = [None] * len(prompts)
        with self._lock:
            plan, built, share = self._plan_prefixes(prompts)  # prefix building, spread evenly
            schemas = params.schemas(len(prompts))
            # constrained and unconstrained rows never share a batch (each constrained row has a grammar)
            for batch in self._batches([len(p) for p in prompts], [pr.ids if pr else None for pr in plan],
                                       apart=[x is not None for x in schemas] if self.structured_output else None):
                gens = self._generate_batch([prompts[i] for i in batch], params, plan[batch[0]],
                                            [schemas[i] for i in batch])
                for i, gen, cached in zip(batch, gens, self.prefixes.cached_counts(batch, plan, built)):
                    gen.cached_prompt_tokens = cached
                    gen.latency_s += share
                    results[i] = gen
                    self.ledger.record(tag, gen)
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams, prefix: Prefix | None,
                        schemas: Sequence[dict[str, Any] | None]) -> list[Generation]:
        follow_thread_budget()  # per batch: the side-by-side runner's budget may have changed
        import torch
        from transformers import GenerationConfig

        t0 = time.perf_counter()
        ids, mask = self._left_pad(prompts, prefix)
        sample = params.temperature > 0
        gen_cfg = GenerationConfig(
            max_new_tokens=params.max_new_tokens, do_sample=sample,
            temperature=params.temperature if sample else None,
            top_p=params.top_p if sample else None, top_k=None,
            pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.eos_token_ids,
            bos_token_id=self.tokenizer.bos_token_id,
            stop_strings=list(params.stop) or None)
        kwargs: dict[str, Any] = {}
        if params.stop:
            kwargs["tokenizer"] = self.tokenizer
        if self.structured_output and any(x is not None for x in schemas):
            kwargs["logits_processor"] = [self._json_logits_processor(
                schemas[:1] if all(json.dumps(x) == json.dumps(schemas[0]) for x in schemas) else list(schemas))]
        reserve = ids.shape[1] + params.max_new_tokens
        if prefix is not None:
            kwargs["past_key_values"] = self.prefixes.cache_for(prefix, len(prompts), reserve)
        elif self.growing_cache:
            kwargs["past_key_values"] = self._new_cache(reserve)
        with torch.inference_mode(), torch.random.fork_rng(devices=[] if self.device == "cpu"
                                                           else [torch.device(self.device)]):
            torch.manual_seed(params.seed)
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_cfg,
                                      **kwargs)
        latency = (time.perf_counter() - t0) / len(prompts)
        new = out[:, ids.shape[1]:].tolist()
        gens = []
        eos = set(self.eos_token_ids)
        for prompt, toks in zip(prompts, new):
            stop = next((j for j, t in enumerate(toks) if t in eos), None)
            n_gen, finish = (len(toks), "length") if stop is None else (stop + 1, "stop")
            body = toks[:n_gen - 1] if finish == "stop" else toks[:n_gen]
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            for s in params.stop:
                cut = text.find(s)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            gens.append(Generation(text=text, prompt_tokens=len(prompt), completion_tokens=n_gen,
                                   latency_s=latency, cached_prompt_tokens=0,
                                   finish_reason=finish,
                                   reasoning_tokens=reasoning_token_count(body, self.think_ids)))
        return gens

    def next_token_logprobs_ex(self, conversations: Sequence[Conversation],
                               candidates: Sequence[str],
                               tag: UsageTag = UsageTag()) -> list[tuple[dict[str, float], Generation]]:
        import torch

        if not conversations:
            return []
        cand_ids = self.candidate_token_ids(candidates)
        prompts = [self.prompt_ids(c) for c in conversations]
        results: list[Any] = [None] * len(prompts)
        with self._lock:
            plan, built, share = self._plan_prefixes(prompts)  # prefix building, spread evenly
            groups = [pr.ids if pr else None for pr in plan]
            for batch in self._batches([len(p) for p in prompts], groups, max_padding=self.max_padding):
                t0 = time.perf_counter()
                logits, _ = self._forward_logits([prompts[i] for i in batch], plan[batch[0]])
                logp = torch.log_softmax(logits[:, -1, :], dim=-1)[:, cand_ids].tolist()
                latency = (time.perf_counter() - t0) / len(batch) + share
                for row, (i, cached) in enumerate(zip(batch, self.prefixes.cached_counts(batch, plan, built))):
                    gen = Generation("", prompt_tokens=len(prompts[i]), completion_tokens=0,
                                     latency_s=latency, cached_prompt_tokens=cached)
                    self.ledger.record(tag, gen)
                    results[i] = ({c: float(v) for c, v in zip(candidates, logp[row])}, gen)
        return results

    def token_logprobs_ex(self, seqs: Sequence[Sequence[int]],
                          tag: UsageTag = UsageTag()) -> list[tuple[list[float], Generation]]:
        """Teacher-forced log-probs of every token after the first of each sequence."""
        import torch

        seqs = [list(s) for s in seqs]
        if any(len(s) < 1 for s in seqs):
            raise LLMError("hf backend: token_logprobs needs non-empty sequences")
        lps: list[list[float]] = [[] for _ in seqs]
        latency = [0.0] * len(seqs)
        with self._lock:
            for batch in self._batches([len(s) for s in seqs], max_padding=self.max_padding):
                t0 = time.perf_counter()
                logits, _ = self._forward_logits([seqs[i] for i in batch])
                width = logits.shape[1]
                for row, i in enumerate(batch):
                    ids = seqs[i]
                    if len(ids) > 1:  # left padding: the sequence ends at the last position
                        pred = logits[row, width - len(ids):width - 1]
                        tgt = torch.tensor(ids[1:], device=pred.device)
                        lps[i] = torch.log_softmax(pred, dim=-1).gather(-1, tgt[:, None])[:, 0].tolist()
                dt = (time.perf_counter() - t0) / len(batch)
                for i in batch:
                    latency[i] += dt
        results = []
        for i, s in enumerate(seqs):
            gen = Generation("", prompt_tokens=len(s), completion_tokens=0, latency_s=latency[i],
                             cached_prompt_tokens=0)
            self.ledger.record(tag, gen)
            results.append((lps[i], gen))
        return results
