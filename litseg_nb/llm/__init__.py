"""The LLM layer: one interface (:mod:`.base`), three backends (``hf``, ``vllm``, ``openai``),
a persistent request cache, and :func:`make_backend` to build them from an :class:`LLMConfig`."""
from .base import (Conversation, Generation, LLMBackend, LLMError, Message, SamplingParams,
                   ScriptedBackend, Usage, UsageLedger, UsageTag)
from .factory import make_backend

__all__ = ["Conversation", "Generation", "LLMBackend", "LLMError", "Message", "SamplingParams",
           "ScriptedBackend", "Usage", "UsageLedger", "UsageTag", "make_backend"]
