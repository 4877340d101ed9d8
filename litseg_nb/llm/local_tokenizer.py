"""Token counting and chat-prompt rendering with a local tokenizer, shared by the backends that hold
one (``hf``, ``vllm``).

:class:`LocalTokenizerMixin` needs ``self.tokenizer`` (a transformers tokenizer), ``self.name``
(the backend's name, for messages) and ``self.enable_thinking`` (passed to the chat template:
Qwen3-style templates switch their ``<think>`` block with it, others ignore it).
"""
from __future__ import annotations

from typing import Any, Sequence

from .base import Conversation, LLMError


class LocalTokenizerMixin:
    """``count_tokens``, ``render_prompt``, ``prompt_ids`` and ``candidate_token_ids`` from
    ``self.tokenizer``."""

    name: str
    tokenizer: Any
    enable_thinking: bool

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def render_prompt(self, conversation: Conversation) -> str:
        """The chat-template rendering of ``conversation`` with the assistant turn opened."""
        return self.tokenizer.apply_chat_template(list(conversation), tokenize=False,
                                                  add_generation_prompt=True,
                                                  enable_thinking=self.enable_thinking)

    def prompt_ids(self, conversation: Conversation) -> list[int]:
        """Token ids of :meth:`render_prompt` (the template writes the special tokens itself)."""
        return self.tokenizer(self.render_prompt(conversation), add_special_tokens=False).input_ids

    def candidate_token_ids(self, candidates: Sequence[str]) -> list[int]:
        """First token id of each candidate (next-token log-probs score only the first token)."""
        ids = []
        for c in candidates:
            toks = self.tokenizer(c, add_special_tokens=False).input_ids
            if not toks:
                raise LLMError(f"{self.name} backend: candidate {c!r} tokenizes to nothing")
            ids.append(toks[0])
        return ids
