"""The offline vLLM engine backend (``backend="vllm"``), for GPU machines (the ``gpu`` extra).

``vllm`` is imported lazily: the main environment does not have it. The engine is created with
``enable_prefix_caching=True``, so the shared system prompt and stage prompts of LitSeg are
computed once per batch; ``Generation.cached_prompt_tokens`` reports vLLM's
``RequestOutput.num_cached_tokens``.

* ``chat``: conversations are rendered with the tokenizer's chat template and submitted as token
  ids in one ``LLM.generate`` call (vLLM schedules the batch itself). Guided JSON decoding when
  ``structured_output`` is on and ``SamplingParams.json_schema`` is set.
* ``next_token_logprobs``: exact log-probs of each candidate's **first token** after the chat prompt:
  the prompt + candidate token is scored with ``prompt_logprobs`` (one sequence per candidate; the
  prompt prefix is served from the prefix cache).
* ``text_logprobs``: ``prompt_logprobs`` of BOS + text, one value per text token;
  ``token_logprobs``: ``prompt_logprobs`` of given token-id sequences (perplexity chunking).
* ``enable_thinking`` goes to the chat template (Qwen3-style thinking switch); the tokens of a
  ``<think>...</think>`` block in a reply are counted in ``Generation.reasoning_tokens``.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from .base import (BackendBase, Conversation, Generation, LLMError, SamplingParams, UsageLedger,
                   UsageTag, reasoning_token_count, think_token_ids)
from .models import model_revision, resolve_model_path


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise LLMError("backend 'vllm' needs the vllm package (pip install 'litseg_nb[gpu]'; on CPU "
                       "use scripts/setup_vllm_cpu.sh and the 'openai' backend against vllm serve)"
                       ) from exc
    return vllm


class VLLMBackend(BackendBase):
    """Batched generation and log-probs with ``vllm.LLM``."""

    name = "vllm"

    def __init__(self, model: str, *, dtype: str = "auto", max_model_len: int = 8192,
                 structured_output: bool = False, ledger: UsageLedger | None = None,
                 seed: int = 0, enable_thinking: bool = False, engine: Any = None,
                 **engine_kwargs: Any) -> None:
        self.model_id = model
        self.revision = model_revision(model)
        self.structured_output = structured_output
        self.enable_thinking = bool(enable_thinking)
        self.ledger = ledger if ledger is not None else UsageLedger()
        if engine is None:  # ``engine``: an already built ``vllm.LLM`` (or a stand-in in tests)
            vllm = _import_vllm()
            engine = vllm.LLM(model=resolve_model_path(model), dtype=dtype,
                              max_model_len=max_model_len, enable_prefix_caching=True, seed=seed,
                              **engine_kwargs)
        self.llm = engine
        self.tokenizer = self.llm.get_tokenizer()
        self.think_ids = think_token_ids(self.tokenizer)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def render_prompt(self, conversation: Conversation) -> str:
        return self.tokenizer.apply_chat_template(list(conversation), tokenize=False,
                                                  add_generation_prompt=True,
                                                  enable_thinking=self.enable_thinking)

    def _prompt_ids(self, conversation: Conversation) -> list[int]:
        return self.tokenizer(self.render_prompt(conversation), add_special_tokens=False).input_ids

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
        outs, latency = self._run(seqs, self._sampling(max_tokens=1, temperature=0.0,
                                                       prompt_logprobs=0))
        results = []
        for s, o in zip(seqs, outs):
            vals = [self._prompt_logprob(e, t) for e, t in zip(o.prompt_logprobs[1:], s[1:])]
            gen = Generation("", prompt_tokens=len(s), completion_tokens=0, latency_s=latency,
                             cached_prompt_tokens=getattr(o, "num_cached_tokens", None))
            self.ledger.record(tag, gen)
            results.append((vals, gen))
        return results

    def _guided(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The SamplingParams keyword for guided JSON (API differs between vLLM versions)."""
        import vllm.sampling_params as sp

        if hasattr(sp, "StructuredOutputsParams"):
            return {"structured_outputs": sp.StructuredOutputsParams(json=schema)}
        return {"guided_decoding": sp.GuidedDecodingParams(json=schema)}  # vLLM < 0.11

    def _run(self, prompts: list[list[int]], sampling) -> tuple[list[Any], float]:
        t0 = time.perf_counter()
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], sampling, use_tqdm=False)
        return outs, (time.perf_counter() - t0) / max(1, len(prompts))

    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        if not conversations:
            return []
        kw: dict[str, Any] = dict(max_tokens=params.max_new_tokens, temperature=params.temperature,
                                  top_p=params.top_p, seed=params.seed, stop=list(params.stop) or None)
        if params.json_schema is not None and self.structured_output:
            kw.update(self._guided(params.json_schema))
        outs, latency = self._run([self._prompt_ids(c) for c in conversations], self._sampling(**kw))
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
        if not conversations:
            return []
        cand_ids = []
        for c in candidates:
            toks = self.tokenizer(c, add_special_tokens=False).input_ids
            if not toks:
                raise LLMError(f"vllm backend: candidate {c!r} tokenizes to nothing")
            cand_ids.append(toks[0])
        prompts = [self._prompt_ids(c) for c in conversations]
        seqs = [p + [t] for p in prompts for t in cand_ids]
        outs, latency = self._run(seqs, self._sampling(max_tokens=1, temperature=0.0,
                                                       prompt_logprobs=0))
        results = []
        for i, p in enumerate(prompts):
            row = outs[i * len(cand_ids):(i + 1) * len(cand_ids)]
            scores = {c: self._prompt_logprob(o.prompt_logprobs[-1], t)
                      for c, t, o in zip(candidates, cand_ids, row)}
            cached = [getattr(o, "num_cached_tokens", None) for o in row]
            gen = Generation("", prompt_tokens=len(p), completion_tokens=0,
                             latency_s=latency * len(cand_ids),
                             cached_prompt_tokens=cached[0])
            self.ledger.record(tag, gen)
            results.append((scores, gen))
        return results

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        return [r for r, _ in self.next_token_logprobs_ex(conversations, candidates, tag)]

    def text_logprobs_ex(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                         max_length: int | None = None) -> list[tuple[list[float], Generation]]:
        if max_length is not None:
            raise LLMError("vllm backend: text_logprobs does not support max_length "
                           "(window the text on the caller's side)")
        if not texts:
            return []
        bos = self.tokenizer.bos_token_id
        seqs = []
        for t in texts:
            ids = self.tokenizer(t, add_special_tokens=False).input_ids
            seqs.append(([bos] if bos is not None else []) + ids)
        return self.token_logprobs_ex(seqs, tag)

    def text_logprobs(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                      max_length: int | None = None) -> list[list[float]]:
        return [r for r, _ in self.text_logprobs_ex(texts, tag, max_length=max_length)]
