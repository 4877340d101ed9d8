"""Shared-prefix key/value reuse for the transformers backend (:class:`~litseg_nb.llm.hf.HFBackend`,
``prefix_reuse=True``, the default).

Prompts of one call that share a long token prefix (the LitSeg/Lite/LumberChunker/judge system
prompts, up to the first differing token) have that prefix's key/value cache computed once and kept
in a :class:`PrefixStore` (at most ``max_prefixes`` entries, least recently used dropped); every later
batch whose prompts start with a stored prefix feeds only the rest. A prefix is created when the
prompts of a call (or a single prompt and a recent one) agree on at least ``min_prefix_tokens``
tokens; a longer prefix is built on top of a stored shorter one. The backend lays the batch out
``[prefix][left padding][suffix]``: the attention mask hides the padding and position ids follow the
mask, so every row sees exactly the positions of an unpadded run; sampling is unchanged (same
batches, same seed). ``Generation.cached_prompt_tokens`` is the number of prompt tokens served from
a stored prefix; the first request that needs a freshly built prefix is charged for computing it
(:meth:`PrefixStore.cached_counts`), so ``prompt_tokens - cached_prompt_tokens`` summed over a run is
exactly the number of prompt tokens the model computed. Models with sliding-window attention layers
keep prefix reuse off (:func:`has_sliding_window`: a stored prefix longer than the window would be
cut).
"""
from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from typing import Any, Sequence


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Prefix:
    """A stored prompt prefix: its token ids and per-layer key/value tensors (batch size 1)."""

    __slots__ = ("ids", "kv")

    def __init__(self, ids: tuple[int, ...], kv: list[tuple[Any, Any]]) -> None:
        self.ids, self.kv = ids, kv

    def __len__(self) -> int:
        return len(self.ids)


def has_sliding_window(model_config: Any) -> bool:
    """Whether some attention layer keeps only a sliding window of keys (a stored prefix longer
    than the window would be cut): prefix reuse is then left off."""
    cfg = model_config
    if "sliding_attention" in (getattr(cfg, "layer_types", None) or ()):
        return True
    return bool(getattr(cfg, "sliding_window", None)) and getattr(cfg, "use_sliding_window", True) is not False


class PrefixStore:
    """The stored prefixes of one backend, the memory of its recent prompts, and the build counters.

    ``owner`` is the backend: its ``model``, ``device`` and ``_new_cache(reserve)`` (the decoding
    cache, growing or plain) are read at each call, so a backend whose model or cache setting is
    changed after construction stays consistent (a weak proxy: the store keeps no backend, and its
    model, alive). The caller holds the backend's lock.
    """

    def __init__(self, owner: Any, min_prefix_tokens: int = 32, max_prefixes: int = 4) -> None:
        self.owner = weakref.proxy(owner)
        self.min_prefix_tokens = max(1, int(min_prefix_tokens))
        self.max_prefixes = max(1, int(max_prefixes))
        self.entries: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self.recent: deque[list[int]] = deque(maxlen=16)
        self.builds = 0  # prefixes computed (diagnostics, tests)
        self.computed_tokens = 0  # tokens computed while building them

    def clear(self) -> None:
        """Drop every stored prefix and the memory of recent prompts; zero the build counters."""
        self.entries.clear()
        self.recent.clear()
        self.builds = self.computed_tokens = 0

    def cache_for(self, prefix: Prefix, batch: int, reserve: int = 0):
        """A fresh cache holding ``prefix`` for ``batch`` rows. The stored tensors are never written:
        a plain ``DynamicCache`` concatenates onto the expanded views, a growing one copies them
        into its buffer."""
        cache = self.owner._new_cache(reserve)
        for layer, (k, v) in enumerate(prefix.kv):
            cache.update(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1), layer)
        return cache

    def stored(self, ids: Sequence[int], max_len: int) -> Prefix | None:
        """The longest stored prefix of ``ids`` with at most ``max_len`` tokens."""
        best = None
        for pre in self.entries.values():
            if len(pre) <= max_len and (best is None or len(pre) > len(best)) \
                    and tuple(ids[:len(pre)]) == pre.ids:
                best = pre
        if best is not None:
            self.entries.move_to_end(best.ids)
        return best

    def build(self, ids: Sequence[int]) -> tuple[Prefix, int]:
        """Compute and store the key/value cache of ``ids``; returns the prefix and the number of its
        tokens that were not computed now.

        The stored prefix sharing the most leading tokens with ``ids`` is reused: keys and values
        of a causal model at position ``t`` depend on tokens ``<= t`` only, so its first ``m``
        positions are exactly those of ``ids[:m]``; only ``ids[m:]`` is computed.
        """
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
        """Which stored prefix each prompt uses, building the call's shared prefix when worth it.

        Returns the per-prompt prefixes and, for a prefix built in this call, the number of its
        tokens that were already stored (the first prompt using it pays for the rest).
        """
        n = len(prompts)
        if n == 0:
            return [], {}
        # the call's shared prefix: common to all its prompts, or (one prompt) to a recent one;
        # at least one token of each prompt is left to compute (its logits are needed)
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
                # every prompt of the call starts with it: one prefix for all, and its cost is
                # charged to the first of them
                return [pre] * n, built
        return [self.stored(p, len(p) - 1) for p in prompts], built

    @staticmethod
    def cached_counts(batch: Sequence[int], plan: Sequence[Prefix | None],
                      built: dict[tuple[int, ...], int]) -> list[int]:
        """Prompt tokens served from a stored prefix, per item of ``batch`` (see module docstring)."""
        out = []
        for i in batch:
            pre = plan[i]
            if pre is None:
                out.append(0)
            elif pre.ids in built:  # first user of a prefix built in this call pays for it
                out.append(built.pop(pre.ids))
            else:
                out.append(len(pre))
        return out
