"""The LLM layer: one interface (:mod:`~litseg_nb.llm.base`), three backends (``hf``, ``vllm``, ``openai``), a persistent
request cache, and :func:`make_backend`, the one way stages get an LLM from an :class:`LLMConfig`."""
from __future__ import annotations

import os
from pathlib import Path

from ..config import LLM_BACKENDS, LLMConfig
from .base import (BackendUnavailableError, Conversation, Generation, LLMBackend, LLMError, Message,
                   SamplingParams, Usage, UsageLedger, UsageTag)
from . import vllm_backend  # read at call time: the rehearsal audit stands in for VLLMBackend
from .hf import HFBackend
from .openai_backend import OpenAIBackend
from .request_cache import CachedBackend, RequestCache, cache_report

__all__ = ["BackendUnavailableError", "Conversation", "Generation", "LLMBackend", "LLMError", "Message",
           "SamplingParams", "Usage", "UsageLedger", "UsageTag", "cache_report",
           "make_backend", "release_backend"]


def make_backend(llm_cfg: LLMConfig, ledger: UsageLedger | None = None, *,
                 cache_path: str | Path | None = None) -> LLMBackend:
    """The backend ``llm_cfg`` names, behind the request cache when ``llm_cfg.use_cache``."""
    ledger = ledger if ledger is not None else UsageLedger()
    kind = llm_cfg.backend
    if llm_cfg.lora_adapter and kind != "vllm":
        raise LLMError(f"LLMConfig.lora_adapter ({llm_cfg.lora_adapter}) is served by the vllm backend only; with "
                       f"{kind!r} load a merged model folder (litseg_nb.lite.train.student_backend does either)")
    if kind == "hf":
        backend = HFBackend(llm_cfg.model, dtype=llm_cfg.dtype, device=llm_cfg.device,
                            batch_size=llm_cfg.batch_size, max_model_len=llm_cfg.max_model_len,
                            structured_output=llm_cfg.structured_output, ledger=ledger,
                            prefix_reuse=llm_cfg.prefix_reuse, enable_thinking=llm_cfg.enable_thinking,
                            max_padding=llm_cfg.max_padding)
    elif kind == "vllm":
        backend = vllm_backend.VLLMBackend(llm_cfg.model, dtype=llm_cfg.dtype, max_model_len=llm_cfg.max_model_len,
                                           structured_output=llm_cfg.structured_output, ledger=ledger,
                                           enable_thinking=llm_cfg.enable_thinking,
                                           lora_adapter=llm_cfg.lora_adapter, **llm_cfg.engine)
    elif kind == "openai":
        # the key comes only from the environment variable the config names (never from the config)
        api_key = os.environ.get(llm_cfg.api_key_env, "") or "EMPTY"
        backend = OpenAIBackend(llm_cfg.model, base_urls=llm_cfg.base_urls, api_key=api_key,
                                timeout_s=llm_cfg.request_timeout_s,
                                max_concurrency=llm_cfg.max_concurrency,
                                max_retries=llm_cfg.max_retries, max_wait_s=llm_cfg.max_wait_s,
                                wait_report_s=llm_cfg.wait_report_s,
                                structured_output=llm_cfg.structured_output, ledger=ledger,
                                enable_thinking=llm_cfg.enable_thinking)
    else:
        raise LLMError(f"unknown LLM backend {kind!r}; expected one of {', '.join(LLM_BACKENDS)}")
    if llm_cfg.use_cache:
        chunk = llm_cfg.batch_size if kind != "openai" else max(llm_cfg.batch_size,
                                                                llm_cfg.max_concurrency)
        return CachedBackend(backend, RequestCache(cache_path), chunk_size=chunk,  # type: ignore[return-value]
                             keep_invalid=kind != "openai")
    return backend


def release_backend(backend: LLMBackend | None) -> None:
    """Close ``backend`` (through the request cache) when it is a vLLM one, whose engine holds the GPU."""
    inner = getattr(backend, "inner", backend)
    close = getattr(inner, "close", None)
    if callable(close) and getattr(inner, "name", "") == "vllm":
        close()
