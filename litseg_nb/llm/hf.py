"""The transformers backend (``backend="hf"``): CPU or CUDA, batched, left-padded.

* :meth:`HFBackend.chat` renders each conversation with the tokenizer's chat template, sorts the
  prompts by length, and generates in left-padded batches of ``batch_size``. Greedy when
  ``temperature == 0``; otherwise seeded sampling (``torch.manual_seed(params.seed)`` per batch, so
  a sampled reply depends on the seed and on the batch it ran in).
* :meth:`HFBackend.next_token_logprobs` scores candidate strings as the next token after the chat
  prompt. **Only the first token of each candidate is scored** (the candidate's tokenization
  without special tokens); candidates sharing a first token get the same value. Choose candidates
  that are single tokens (e.g. ``"1"``/``"2"``, ``"yes"``/``"no"``).
* :meth:`HFBackend.text_logprobs` gives teacher-forced per-token log-probabilities of raw texts:
  one value per text token (``len == count_tokens(text)``), each conditioned on the BOS token and
  all preceding text tokens (a tokenizer without BOS: the first text token is not scored). With ``max_length`` the context is bounded: the text is scored in
  windows of ``max_length`` tokens advancing by ``max_length // 2`` (the usual strided-perplexity
  scheme), so each token sees at least ``max_length // 2`` tokens of context.
* Structured output: when ``structured_output`` is on and ``SamplingParams.json_schema`` is set,
  decoding is constrained to the schema by xgrammar's transformers logits processor (compact JSON,
  no free whitespace). With the flag off the schema is ignored, as in the paper.

CPU threads: ``$LITSEG_TORCH_THREADS`` (when set) is passed to ``torch.set_num_threads`` when a
backend is created. On a machine whose cores are shared with other jobs, 1 thread is several
times faster than torch's default (measured 6.4 vs 1.2 tok/s for SmolLM2 on 2 oversubscribed cores).

Every call records prompt/completion tokens and latency in :attr:`ledger`. Latency of a batch is
split evenly over its items, so the ledger's total latency equals the wall time spent.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Sequence

from .base import Conversation, Generation, LLMError, SamplingParams, UsageLedger, UsageTag
from .models import load_model_and_tokenizer, model_revision


class HFBackend:
    """Batched chat generation and log-probs with a transformers causal LM."""

    name = "hf"

    def __init__(self, model: str = "tiny-random", *, dtype: str = "auto", device: str = "auto",
                 batch_size: int = 4, max_model_len: int = 8192, structured_output: bool = False,
                 ledger: UsageLedger | None = None) -> None:
        if batch_size < 1:
            raise LLMError(f"hf backend: batch_size must be >= 1, got {batch_size}")
        self.model_id = model
        self.revision = model_revision(model)
        self.batch_size = batch_size
        self.max_model_len = max_model_len
        self.structured_output = structured_output
        self.ledger = ledger if ledger is not None else UsageLedger()
        threads = os.environ.get("LITSEG_TORCH_THREADS")
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        self.model, self.tokenizer, self.device = load_model_and_tokenizer(model, dtype, device)
        self._lock = threading.Lock()
        self._grammar_compiler = None
        self._grammars: dict[str, Any] = {}
        eos = {self.tokenizer.eos_token_id}
        cfg_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(cfg_eos, int):
            eos.add(cfg_eos)
        elif cfg_eos:
            eos.update(cfg_eos)
        self.eos_token_ids = sorted(i for i in eos if i is not None)

    # ------------------------------------------------------------------ tokens
    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def render_prompt(self, conversation: Conversation) -> str:
        """The chat-template rendering of ``conversation`` with the assistant turn opened."""
        return self.tokenizer.apply_chat_template(list(conversation), tokenize=False,
                                                  add_generation_prompt=True)

    def _encode_prompts(self, conversations: Sequence[Conversation]) -> list[list[int]]:
        return [self.tokenizer(self.render_prompt(c), add_special_tokens=False).input_ids
                for c in conversations]

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Item indices grouped into batches of similar length (longest first)."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def _left_pad(self, seqs: Sequence[Sequence[int]]):
        import torch

        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            if s:
                ids[row, width - len(s):] = torch.tensor(list(s), dtype=torch.long)
                mask[row, width - len(s):] = 1
        return ids.to(self.device), mask.to(self.device)

    def _forward_logits(self, seqs: Sequence[Sequence[int]]):
        """Logits of a left-padded batch (position ids follow the attention mask)."""
        import torch

        ids, mask = self._left_pad(seqs)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                             use_cache=False)
        return out.logits.float(), mask

    # --------------------------------------------------------------- structured
    def _json_logits_processor(self, schema: dict[str, Any]):
        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor

        if self._grammar_compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.model.config.vocab_size,
                stop_token_ids=self.eos_token_ids)
            self._grammar_compiler = xgr.GrammarCompiler(info)
        # property order matters: xgrammar emits properties in the schema's order, so the schema
        # is compiled as given (never key-sorted) and the unsorted text is the memo key
        key = json.dumps(schema)
        if key not in self._grammars:
            try:
                self._grammars[key] = self._grammar_compiler.compile_json_schema(
                    key, any_whitespace=False)
            except Exception as exc:  # xgrammar raises RuntimeError/ValueError for bad schemas
                raise LLMError(f"hf backend: cannot compile JSON schema for constrained decoding: "
                               f"{exc}") from exc
        # a fresh processor per generate() call (it keeps per-sequence matcher state)
        return LogitsProcessor(self._grammars[key])

    # --------------------------------------------------------------------- chat
    def chat(self, conversations: Sequence[Conversation], params: SamplingParams = SamplingParams(),
             tag: UsageTag = UsageTag()) -> list[Generation]:
        """Generate one reply per conversation (batched, left-padded)."""
        if not conversations:
            return []
        prompts = self._encode_prompts(conversations)
        for i, p in enumerate(prompts):
            if len(p) + params.max_new_tokens > self.max_model_len:
                raise LLMError(
                    f"hf backend ({self.model_id}): conversation {i} has {len(p)} prompt tokens; "
                    f"with max_new_tokens={params.max_new_tokens} it exceeds "
                    f"max_model_len={self.max_model_len}")
        results: list[Generation | None] = [None] * len(prompts)
        with self._lock:
            for batch in self._batches([len(p) for p in prompts]):
                for i, gen in zip(batch, self._generate_batch([prompts[i] for i in batch], params)):
                    results[i] = gen
                    self.ledger.record(tag, gen)
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        import torch
        from transformers import GenerationConfig

        ids, mask = self._left_pad(prompts)
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
        if params.json_schema is not None and self.structured_output:
            kwargs["logits_processor"] = [self._json_logits_processor(params.json_schema)]
        t0 = time.perf_counter()
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
            n_gen, finish = len(toks), "length"
            for j, t in enumerate(toks):
                if t in eos:
                    n_gen, finish = j + 1, "stop"
                    break
            body = toks[:n_gen - 1] if finish == "stop" else toks[:n_gen]
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            for s in params.stop:
                cut = text.find(s)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            gens.append(Generation(text=text, prompt_tokens=len(prompt), completion_tokens=n_gen,
                                   latency_s=latency, cached_prompt_tokens=None,
                                   finish_reason=finish))
        return gens

    # ----------------------------------------------------------------- logprobs
    def candidate_token_ids(self, candidates: Sequence[str]) -> list[int]:
        """First token id of each candidate (see the module docstring)."""
        ids = []
        for c in candidates:
            toks = self.tokenizer(c, add_special_tokens=False).input_ids
            if not toks:
                raise LLMError(f"hf backend: candidate {c!r} tokenizes to nothing")
            ids.append(toks[0])
        return ids

    def next_token_logprobs_ex(self, conversations: Sequence[Conversation],
                               candidates: Sequence[str],
                               tag: UsageTag = UsageTag()) -> list[tuple[dict[str, float], Generation]]:
        """Like :meth:`next_token_logprobs`, each result paired with its usage record."""
        import torch

        if not conversations:
            return []
        cand_ids = self.candidate_token_ids(candidates)
        prompts = self._encode_prompts(conversations)
        results: list[Any] = [None] * len(prompts)
        with self._lock:
            for batch in self._batches([len(p) for p in prompts]):
                t0 = time.perf_counter()
                logits, _ = self._forward_logits([prompts[i] for i in batch])
                logp = torch.log_softmax(logits[:, -1, :], dim=-1)[:, cand_ids].tolist()
                latency = (time.perf_counter() - t0) / len(batch)
                for row, i in enumerate(batch):
                    gen = Generation("", prompt_tokens=len(prompts[i]), completion_tokens=0,
                                     latency_s=latency)
                    self.ledger.record(tag, gen)
                    results[i] = ({c: float(v) for c, v in zip(candidates, logp[row])}, gen)
        return results

    def next_token_logprobs(self, conversations: Sequence[Conversation], candidates: Sequence[str],
                            tag: UsageTag = UsageTag()) -> list[dict[str, float]]:
        """Log-probability of each candidate's first token as the reply's first token."""
        return [r for r, _ in self.next_token_logprobs_ex(conversations, candidates, tag)]

    def _scoring_ids(self, text: str) -> tuple[list[int], int]:
        """Token ids to run (BOS + text) and the number of prefix tokens not scored."""
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        bos = self.tokenizer.bos_token_id
        return ([bos] + ids, 1) if bos is not None else (ids, 1)

    def text_logprobs_ex(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                         max_length: int | None = None) -> list[tuple[list[float], Generation]]:
        """Like :meth:`text_logprobs`, each result paired with its usage record."""
        import torch

        if max_length is not None and max_length < 2:
            raise LLMError(f"hf backend: max_length must be >= 2, got {max_length}")
        seqs = [self._scoring_ids(t)[0] for t in texts]
        results: list[Any] = [None] * len(seqs)
        # split every sequence into windows; each window scores targets[start:end]
        windows: list[tuple[int, list[int], int]] = []  # (item, window ids, n targets scored at end)
        for i, s in enumerate(seqs):
            if max_length is None or len(s) <= max_length:
                windows.append((i, s, len(s) - 1))
                continue
            stride, prev_end, begin = max_length // 2, 1, 0
            while True:
                end = min(begin + max_length, len(s))
                windows.append((i, s[begin:end], end - prev_end))
                prev_end = end
                if end == len(s):
                    break
                begin += stride
        per_window: list[list[float]] = [[] for _ in windows]
        latency = [0.0] * len(seqs)
        with self._lock:
            for batch in self._batches([len(w[1]) for w in windows]):
                t0 = time.perf_counter()
                logits, _ = self._forward_logits([windows[k][1] for k in batch])
                width = logits.shape[1]
                for row, k in enumerate(batch):
                    item, ids, n_target = windows[k]
                    if n_target <= 0:
                        continue
                    off = width - len(ids)  # left padding
                    pred = logits[row, off + len(ids) - 1 - n_target: off + len(ids) - 1]
                    tgt = torch.tensor(ids[len(ids) - n_target:], device=pred.device)
                    lp = torch.log_softmax(pred, dim=-1).gather(-1, tgt[:, None])[:, 0]
                    per_window[k] = lp.tolist()
                dt = (time.perf_counter() - t0) / len(batch)
                for k in batch:
                    latency[windows[k][0]] += dt
        per_item: list[list[float]] = [[] for _ in seqs]
        for k, (item, _, _) in enumerate(windows):  # windows are listed in text order
            per_item[item].extend(per_window[k])
        for i, s in enumerate(seqs):
            gen = Generation("", prompt_tokens=len(s), completion_tokens=0, latency_s=latency[i])
            self.ledger.record(tag, gen)
            results[i] = (per_item[i], gen)
        return results

    def text_logprobs(self, texts: Sequence[str], tag: UsageTag = UsageTag(),
                      max_length: int | None = None) -> list[list[float]]:
        """Teacher-forced log-probability of every token of each text (see module docstring)."""
        return [r for r, _ in self.text_logprobs_ex(texts, tag, max_length=max_length)]
