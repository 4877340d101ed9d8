"""The offline vLLM engine backend (``backend="vllm"``), for GPU machines (the ``gpu`` extra; imported lazily).

One prefix-caching engine per process (:func:`acquire_engine`), shared by a model's backends and LoRA
adapters; the last backend's :meth:`VLLMBackend.close` shuts it down and checks its memory was released."""
from __future__ import annotations

import gc
import json
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .base import (BackendBase, Conversation, Generation, LLMError, LocalTokenizerMixin, SamplingParams,
                   UsageLedger, UsageTag, reasoning_token_count, think_token_ids)
from .models import model_revision, resolve_model_path
from ..core.cache import hash_file


# top log-probs returned for the first generated token (vLLM's default ``max_logprobs`` is 20)
CANDIDATE_TOPK = 20


@dataclass
class _Engine:
    model: str  # the resolved model path / hub id the engine serves
    settings: dict[str, Any]  # every argument given to vllm.LLM
    engine: Any
    users: int = 0
    lora_ids: dict[str, int] = field(default_factory=dict)  # adapter folder -> LoRARequest id
    backends: Any = field(default_factory=weakref.WeakSet)  # the VLLMBackends using it
    workers: tuple[int, ...] = ()  # child processes the engine started (vLLM's engine core holds the memory)


def _children() -> set[int]:
    """Live child processes (not zombies, not multiprocessing's resource tracker, which stays)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with vLLM
        return set()
    out = set()
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(c.cmdline()):
                out.add(c.pid)
        except psutil.Error:  # exited meanwhile
            continue
    return out


# the engines alive in this process, by model (at most one: see acquire_engine)
_ENGINES: dict[str, _Engine] = {}


def live_engines() -> dict[str, dict[str, Any]]:
    """``{model: settings}`` of the vLLM engines alive in this process."""
    return {m: dict(e.settings) for m, e in _ENGINES.items()}


def acquire_engine(model: str, settings: dict[str, Any]) -> _Engine:
    """The live engine serving ``model`` with ``settings``, or a new ``vllm.LLM`` when none is alive."""
    entry = _ENGINES.get(model)
    if entry is not None:
        if entry.settings != settings:
            raise LLMError(f"vllm backend: an engine for {model} is alive with settings {entry.settings}; "
                           f"another with {settings} would be a second engine in this process (one GPU holds "
                           "one): use the same LLMConfig.engine for every role of this model, or close the "
                           "first backend (backend.close())")
        return entry
    if _ENGINES:
        other = ", ".join(_ENGINES)
        raise LLMError(f"vllm backend: an engine for {other} is alive in this process; starting one for {model} "
                       "would be a second engine on the GPU: close the first model's backends (backend.close() / "
                       "litseg_nb.llm.vllm_backend.shutdown_engines()) before loading another model")
    try:
        import vllm
    except ImportError as exc:
        raise LLMError("backend 'vllm' needs the vllm package (pip install 'litseg_nb[gpu]'; on CPU "
                       "use scripts/setup_vllm_cpu.sh and the 'openai' backend against vllm serve)"
                       ) from exc
    before = _children()
    entry = _Engine(model, dict(settings), vllm.LLM(**settings))
    entry.workers = tuple(sorted(_children() - before))
    _ENGINES[model] = entry
    return entry


def _release(entry: _Engine) -> None:
    """Shut ``entry``'s engine down, drop every reference, and check the memory was released."""
    _ENGINES.pop(entry.model, None)
    for b in list(entry.backends):  # a backend of a shut-down engine says so when used
        b.llm, b._entry = None, None
    release_engine(entry, "engine", entry.model, entry.workers)


def release_engine(holder: Any, attr: str, what: str, workers: Sequence[int] = (), wait_s: float = 60.0) -> None:
    """Shut down the ``vllm.LLM`` at ``holder.<attr>`` (also trl's) and check its memory was released."""
    engine = getattr(holder, attr)
    setattr(holder, attr, None)
    if engine is None:
        return
    shutdown = getattr(engine, "shutdown", None)
    if callable(shutdown):
        shutdown()
    else:  # older vLLM: the engine core owns the worker processes and the GPU memory
        core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
        if core is not None and callable(getattr(core, "shutdown", None)):
            core.shutdown()
        del core
    del shutdown  # a bound method holds the engine
    try:
        ref = weakref.ref(engine)
    except TypeError:
        ref = None
    del engine
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if workers:  # the processes holding the weights and the KV cache must be gone
        deadline = time.time() + wait_s
        while (alive := sorted(set(workers) & _children())) and time.time() < deadline:
            time.sleep(0.5)
        if alive:
            raise LLMError(f"vllm backend: the engine for {what} was shut down but its worker process(es) "
                           f"{alive} still run (their memory is not released)")
    elif ref is not None and ref() is not None:
        raise LLMError(f"vllm backend: the engine for {what} is still referenced after shutdown "
                       "(its memory is not released): drop every object holding it before loading another model")


def shutdown_engines() -> list[str]:
    """Shut every live engine down (whatever its users); returns the models that were served."""
    models = list(_ENGINES)
    for m in models:
        _release(_ENGINES[m])
    return models


class VLLMBackend(LocalTokenizerMixin, BackendBase):
    name = "vllm"

    def __init__(self, model: str, *, dtype: str = "auto", max_model_len: int = 8192,
                 structured_output: bool = False, ledger: UsageLedger | None = None,
                 seed: int = 0, enable_thinking: bool = False, engine: Any = None,
                 lora_adapter: str = "", **engine_kwargs: Any) -> None:
        self.model_id = lora_adapter or model
        self.base_model = model
        self.revision = model_revision(model)
        if engine_kwargs.get("quantization"):  # other weights: other replies (part of cache keys)
            self.revision += f"|quantization={engine_kwargs['quantization']}"
        self.structured_output = structured_output
        self.enable_thinking = bool(enable_thinking)
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.lora_request = None
        self.extra_logprob_requests = 0  # next_token_logprobs: candidates scored outside the top-k
        self._entry: _Engine | None = None
        self.engine_settings: dict[str, Any] = dict(
            model=resolve_model_path(model), dtype=dtype, max_model_len=max_model_len,
            enable_prefix_caching=True, seed=seed, **engine_kwargs)
        if engine is None:  # ``engine``: an already built ``vllm.LLM`` (or a stand-in in tests)
            self._entry = acquire_engine(self.engine_settings["model"], self.engine_settings)
            self._entry.users += 1
            self._entry.backends.add(self)
            engine = self._entry.engine
        self.llm = engine
        if lora_adapter:
            self._set_lora(lora_adapter)
        self.tokenizer = self.llm.get_tokenizer()
        self.think_ids = think_token_ids(self.tokenizer)

    def _set_lora(self, adapter: str) -> None:
        """Serve LoRA adapter folder ``adapter`` on the base engine (a ``LoRARequest`` per call)."""
        path = Path(adapter)
        weights = sorted(path.glob("adapter_model.*"))
        if not weights:
            raise LLMError(f"vllm backend: no adapter_model.* in LoRA adapter folder {path}")
        if not self.engine_settings.get("enable_lora"):
            raise LLMError(f"vllm backend: LoRA adapter {path} needs an engine with enable_lora "
                           "(LLMConfig.engine={'enable_lora': True, 'max_lora_rank': ...})")
        ids = self._entry.lora_ids if self._entry is not None else {}
        lora_id = ids.setdefault(str(path.resolve()), len(ids) + 1)
        from vllm.lora.request import LoRARequest

        self.lora_request = LoRARequest(path.name or "adapter", lora_id, str(path.resolve()))
        self.revision += f"+lora:{hash_file(weights[0])[:12]}"

    def close(self) -> None:
        """Release this backend's share of the engine; the last user's close shuts it down."""
        entry, self._entry = self._entry, None
        self.llm = None
        if entry is not None and entry.model in _ENGINES:
            entry.users -= 1
            if entry.users <= 0:
                _release(entry)

    def _sampling(self, **kw: Any):
        from vllm import SamplingParams as VSP

        return VSP(**kw)

    def token_logprobs_ex(self, seqs: Sequence[Sequence[int]],
                          tag: UsageTag = UsageTag()) -> list[tuple[list[float], Generation]]:
        """``prompt_logprobs`` of each token-id sequence (its first token is not scored)."""
        seqs = [list(s) for s in seqs]
        if not seqs:
            return []
        if any(len(s) < 1 for s in seqs):
            raise LLMError("vllm backend: token_logprobs needs non-empty sequences")
        outs, latency = self._run(seqs, self._sampling(max_tokens=1, temperature=0.0, prompt_logprobs=0),
                                  scores_prompt=True)
        results = []
        for s, o in zip(seqs, outs):
            vals = [self._prompt_logprob(e, t) for e, t in zip(o.prompt_logprobs[1:], s[1:])]
            gen = Generation("", prompt_tokens=len(s), completion_tokens=0, latency_s=latency,
                             cached_prompt_tokens=getattr(o, "num_cached_tokens", None))
            self.ledger.record(tag, gen)
            results.append((vals, gen))
        return results

    def _guided(self, schema: dict[str, Any]) -> dict[str, Any]:
        import vllm.sampling_params as sp

        return {"structured_outputs": sp.StructuredOutputsParams(json=schema)}

    def _run(self, prompts: list[list[int]], sampling, scores_prompt: bool = False) -> tuple[list[Any], float]:
        """``(outputs, seconds per prompt)``; ``scores_prompt``: the sampling asks for prompt log-probs."""
        if self.llm is None:
            raise LLMError(f"vllm backend for {self.model_id} was closed")
        t0 = time.perf_counter()
        kw = {"lora_request": self.lora_request} if self.lora_request is not None else {}
        # an engine with enable_lora maps one LoRA row per request, not per prompt token, when it computes
        # prompt log-probs: a batch of several fails inside the engine, so each prompt goes alone
        groups = [[p] for p in prompts] if scores_prompt and self.engine_settings.get("enable_lora") else [prompts]
        outs = [o for g in groups if g
                for o in self.llm.generate([{"prompt_token_ids": p} for p in g], sampling, use_tqdm=False, **kw)]
        return outs, (time.perf_counter() - t0) / max(1, len(prompts))

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        if not conversations:
            return []
        kw: dict[str, Any] = dict(max_tokens=params.max_new_tokens, temperature=params.temperature,
                                  top_p=params.top_p, seed=params.seed, stop=list(params.stop) or None)
        schemas = params.schemas(len(conversations)) if self.structured_output else [None] * len(conversations)
        if len({json.dumps(x, sort_keys=True) for x in schemas}) <= 1:  # one SamplingParams for the call
            sampling = self._sampling(**kw, **(self._guided(schemas[0]) if schemas[0] is not None else {}))
        else:  # a schema per request (vLLM takes one SamplingParams per prompt)
            sampling = [self._sampling(**kw, **(self._guided(x) if x is not None else {})) for x in schemas]
        outs, latency = self._run([self.prompt_ids(c) for c in conversations], sampling)
        gens = []
        for o in outs:
            comp = o.outputs[0]
            gen = Generation(text=comp.text, prompt_tokens=len(o.prompt_token_ids),
                             completion_tokens=len(comp.token_ids), latency_s=latency,
                             cached_prompt_tokens=getattr(o, "num_cached_tokens", None),
                             finish_reason=str(comp.finish_reason or ""),
                             reasoning_tokens=reasoning_token_count(comp.token_ids, self.think_ids))
            self.ledger.record(tag, gen)
            gens.append(gen)
        return gens

    @staticmethod
    def _prompt_logprob(entry: dict[int, Any] | None, token_id: int) -> float:
        if entry is None or token_id not in entry:
            raise LLMError(f"vllm backend: no prompt log-prob returned for token {token_id}")
        return float(entry[token_id].logprob)

    def next_token_logprobs_ex(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                               tag: UsageTag = UsageTag()) -> list[tuple[dict[str, float], Generation]]:
        """Top-k next-token log-probs per conversation; a candidate outside the top-k costs one more request."""
        if not conversations:
            return []
        cand_ids = self.candidate_token_ids(candidates)
        prompts = [self.prompt_ids(c) for c in conversations]
        k = max(len(set(cand_ids)), CANDIDATE_TOPK)
        k = min(k, self.engine_settings.get("max_logprobs") or CANDIDATE_TOPK)
        outs, latency = self._run(prompts, self._sampling(max_tokens=1, temperature=0.0, logprobs=k))
        found: list[dict[int, float]] = []
        missing: list[tuple[int, int]] = []  # (conversation, candidate token) outside the top-k
        for i, o in enumerate(outs):
            entry = o.outputs[0].logprobs[0] if o.outputs and o.outputs[0].logprobs else None
            if entry is None:
                raise LLMError("vllm backend: no log-probs returned for the next token")
            found.append({t: float(lp.logprob) for t, lp in entry.items()})
            missing.extend((i, t) for t in dict.fromkeys(cand_ids) if t not in found[-1])
        computed = [len(p) for p in prompts]
        cached = [getattr(o, "num_cached_tokens", None) or 0 for o in outs]
        extra_latency = [0.0] * len(prompts)
        if missing:  # exact value of a candidate the model ranks below the top-k
            seqs = [prompts[i] + [t] for i, t in missing]
            more, lat2 = self._run(seqs, self._sampling(max_tokens=1, temperature=0.0, prompt_logprobs=0),
                                   scores_prompt=True)
            for (i, t), seq, o in zip(missing, seqs, more):
                found[i][t] = self._prompt_logprob(o.prompt_logprobs[-1], t)
                computed[i] += len(seq)
                cached[i] += getattr(o, "num_cached_tokens", None) or 0
                extra_latency[i] += lat2
        self.extra_logprob_requests += len(missing)
        results = []
        for i in range(len(prompts)):
            scores = {c: found[i][t] for c, t in zip(candidates, cand_ids)}
            gen = Generation("", prompt_tokens=computed[i], completion_tokens=0,
                             latency_s=latency + extra_latency[i], cached_prompt_tokens=cached[i])
            self.ledger.record(tag, gen)
            results.append((scores, gen))
        return results
