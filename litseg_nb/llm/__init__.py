"""The LLM layer: one interface (:mod:`.base`), three backends (``hf``, ``vllm``, ``openai``),
a persistent request cache, and :func:`make_backend` to build them from an :class:`LLMConfig`."""
from .base import (BackendUnavailableError, Conversation, Generation, LLMBackend, LLMError, Message,
                   SamplingParams, ScriptedBackend, Usage, UsageLedger, UsageTag)
from .factory import make_backend
from .request_cache import cache_report

__all__ = ["BackendUnavailableError", "Conversation", "Generation", "LLMBackend", "LLMError", "Message",
           "SamplingParams", "ScriptedBackend", "Usage", "UsageLedger", "UsageTag", "cache_report",
           "make_backend"]
