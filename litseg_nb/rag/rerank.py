"""Reranking: ``none``, the LLM as a pointwise yes/no scorer (``log P("yes") - log P("no")`` after the
``rag/rerank_*`` prompt; offline profiles), or FlagEmbedding's BGE cross-encoder (``full``, as in the paper's
Table 12).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..llm.base import UsageTag
from ..core.prompts import load_prompt, render_prompt
from ..llm.embeddings import model_max_tokens
from ..llm.models import resolve_model_path

RERANKERS = ("none", "llm-pointwise", "flagembedding")


def reranker_label(kind: str, llm_model: str = "", flag_model: str = "") -> str:
    if kind == "none":
        return "no reranker"
    if kind == "llm-pointwise":
        return f"LLM pointwise yes/no reranker ({llm_model}; stand-in for a cross-encoder)"
    if kind == "flagembedding":
        return f"FlagEmbedding reranker ({flag_model})"
    raise ValueError(f"unknown reranker {kind!r}; expected one of {RERANKERS}")


class LLMPointwiseReranker:
    """Scores (question, chunk) pairs with ``next_token_logprobs`` on the candidates yes/no."""

    def __init__(self, backend: Any, max_chars: int = 0):
        self.backend = backend
        self.max_chars = max_chars

    def score(self, title: str, query: str, docs: Sequence[str], tag: UsageTag = UsageTag("rag-rerank", stage="rerank")) -> list[float]:
        if not docs:
            return []
        convs = [[{"role": "system", "content": load_prompt("rag/rerank_system")},
                  {"role": "user", "content": render_prompt("rag/rerank_user", title=title, query=query,
                                                            doc=d[: self.max_chars or None])}] for d in docs]
        out = self.backend.next_token_logprobs(convs, ["yes", "no"], tag)
        return [float(lp["yes"] - lp["no"]) for lp in out]


class FlagReranker:
    """FlagEmbedding's cross-encoder reranker; ``max_length`` is passed explicitly (its default 512 would cut
    long chunks; 0 = the model's maximum)."""

    def __init__(self, model: str, device: str = "auto", max_chars: int = 0, max_length: int = 0):
        import torch
        from FlagEmbedding import FlagReranker as _FR

        path = resolve_model_path(model)
        self.max_length = int(max_length or model_max_tokens(path))
        kwargs = {} if device == "auto" else {"devices": device}
        fp16 = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
        self.model = _FR(path, use_fp16=fp16, max_length=self.max_length, **kwargs)
        self.max_chars = max_chars

    def score(self, title: str, query: str, docs: Sequence[str], tag: UsageTag = UsageTag()) -> list[float]:
        if not docs:
            return []
        pairs = [[query, d[: self.max_chars or None]] for d in docs]
        s = self.model.compute_score(pairs, max_length=self.max_length)
        return [float(x) for x in (s if isinstance(s, list) else [s])]


def make_reranker(kind: str, backend: Any = None, flag_model: str = "", device: str = "auto", max_chars: int = 0,
                  max_length: int = 0):
    """``None`` for ``none``; otherwise an object with ``score(title, query, docs) -> list[float]``
    (``max_length``: the FlagEmbedding reranker's token limit, 0 = the model's own maximum)."""
    if kind == "none":
        return None
    if kind == "llm-pointwise":
        if backend is None:
            raise ValueError("the llm-pointwise reranker needs an LLM backend")
        return LLMPointwiseReranker(backend, max_chars=max_chars)
    if kind == "flagembedding":
        return FlagReranker(flag_model, device=device, max_chars=max_chars, max_length=max_length)
    raise ValueError(f"unknown reranker {kind!r}; expected one of {RERANKERS}")


def rerank(candidates: Sequence[tuple[int, float]], texts: Sequence[str], scorer: Any, title: str, query: str,
           n: int) -> list[tuple[int, float]]:
    """Rescore the top ``n`` candidates; the rest keep their order below them."""
    head, tail = list(candidates[:n]), list(candidates[n:])
    scores = scorer.score(title, query, [texts[i] for i, _ in head])
    order = sorted(range(len(head)), key=lambda j: (-scores[j], j))  # stable for equal scores
    return [(head[j][0], scores[j]) for j in order] + tail
