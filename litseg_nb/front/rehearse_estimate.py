"""``python -m litseg_nb rehearse --estimate``: what pressing the button (``run --profile full``) costs.

From the rehearsal's own counts (``outputs/rehearsal/rehearsal_rows.json``: LLM calls, prompt and
completion tokens per notebook, on the rehearsal's data) scaled to ``full``'s data sizes, per notebook:

* the scale factors: units and words of text the notebook's LLM methods read (questions for notebook
  05), ``full``'s (stated below: GutenQA and LiteraryQA are not all held here, so their sizes come from
  the datasets' published book and question counts times mean book and unit lengths measured on the
  local copies) over the rehearsal's (measured: the units its configs select). Calls grow with units;
  a prompt keeps the rehearsal's tokens per call plus the longer unit text ``full`` puts in it
  (:data:`TOKENS_PER_WORD` per extra word); completions grow with words (segments, answers);
* the GPU memory of each engine on one card: weights (parameters x 2 bytes, bf16) plus the KV cache of
  one sequence at the configured context (2 x layers x KV heads x head dim x 2 bytes per token, from
  the models' published configs) and how many such sequences the rest of the card holds;
* GPU-hours at stated, assumed throughputs (aggregate tokens per second of a batched vLLM engine;
  not measured here: no GPU), prefill and decode separately.

Every number here is an estimate from stated inputs (:data:`FULL_SIZES`, :data:`MODELS`,
:data:`THROUGHPUT`), not a measurement; the table says so.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from ..config import config_sets
from ..corpus import load_corpus
from ..litseg.config import LitSegConfig
from ..rag.config import RagConfig
from .rehearse import notebook_sets
from ..core.schema import word_count
from ..corpus import select_units

# ---------------------------------------------------------------- full's data sizes (stated)
#: mean words per book measured on the local copies (raw Project Gutenberg texts, headers included)
GUTENQA_WORDS_PER_BOOK = 698_302 / 11  # the 11 GutenQA books in <data>/gutenberg
LITERARYQA_WORDS_PER_BOOK = 1_476_595 / 18  # the 18 LiteraryQA validation texts held locally
#: mean words per unit at full's max_unit_words=6000 (units with sentences), measured on the local books
#: with full's unit splitter: GutenQA's Emma (56 units, 157,317 words) and the 18 LiteraryQA validation
#: texts (470 units, 1,417,063 words)
FULL_WORDS_PER_UNIT = (157_317 + 1_417_063) / (56 + 470)  # 2,993 words
#: Qwen BPE tokens per whitespace word, measured on Emma and four LiteraryQA validation texts (first 400k
#: characters each: 339,925 tokens of the Qwen vocabulary Qwen3 shares for 251,765 words)
TOKENS_PER_WORD = 1.35
FULL_SIZES: dict[str, float] = {
    # GutenQA: 100 books, 30 questions each (Duarte et al., 2024)
    "gutenqa_books": 100, "gutenqa_questions": 3000,
    # LiteraryQA (literaryqa_urls.tsv): 138 test books, 465 train; questions per book as in validation
    # (1,417 QAs over 47 books)
    "literaryqa_test_books": 138, "literaryqa_train_books": 465, "literaryqa_questions_per_book": 1417 / 47,
}


def full_quantities(sizes: Mapping[str, float] = FULL_SIZES) -> dict[str, float]:
    """``full``'s evaluation words (GutenQA + LiteraryQA test), training words (LiteraryQA train) and
    questions (GutenQA + LiteraryQA test)."""
    eval_words = (sizes["gutenqa_books"] * GUTENQA_WORDS_PER_BOOK
                  + sizes["literaryqa_test_books"] * LITERARYQA_WORDS_PER_BOOK)
    train_words = sizes["literaryqa_train_books"] * LITERARYQA_WORDS_PER_BOOK
    return {"eval_words": eval_words, "train_words": train_words,
            "eval_units": eval_words / FULL_WORDS_PER_UNIT, "train_units": train_words / FULL_WORDS_PER_UNIT,
            "questions": sizes["gutenqa_questions"]
            + sizes["literaryqa_test_books"] * sizes["literaryqa_questions_per_book"]}


#: notebook -> (the data its LLM work grows with: "eval"/"train" units and words, or "questions"; the
#: engine model that does most of it)
DRIVERS: dict[str, tuple[tuple[str, ...], str]] = {
    "01": ((), ""),
    "02": (("eval", "train"), "Qwen/Qwen3-32B"),  # the teacher annotates both
    "03": (("train",), "Qwen/Qwen3-32B"),  # Lite's training; its judge (GRPO reward) is the 32B
    "04": (("eval",), "Qwen/Qwen3-8B"),
    "05": (("questions",), "Qwen/Qwen3-8B"),
    "06": (("eval",), "Qwen/Qwen3-8B"),
    "07": (("eval",), "Qwen/Qwen3-8B"),
    "08": ((), ""),
}


# ---------------------------------------------------------------- engines (published model configs)
@dataclass(frozen=True)
class ModelShape:
    params_b: float  # parameters, billions (model card)
    layers: int  # num_hidden_layers (config.json)
    kv_heads: int  # num_key_value_heads
    head_dim: int
    bytes_per_param: int = 2  # bf16 / fp16

    def weights_gb(self) -> float:
        return self.params_b * self.bytes_per_param

    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # K and V, bf16

    def kv_gb(self, tokens: int) -> float:
        return self.kv_bytes_per_token() * tokens / 1e9


#: Qwen3 model cards / config.json; BGE-M3 and bge-reranker-v2-m3 are XLM-RoBERTa-large sized (568M)
MODELS: dict[str, ModelShape] = {
    "Qwen/Qwen3-32B": ModelShape(32.8, 64, 8, 128),
    "Qwen/Qwen3-8B": ModelShape(8.2, 36, 8, 128),
    "BAAI/bge-m3": ModelShape(0.568, 24, 16, 64),
    "BAAI/bge-reranker-v2-m3": ModelShape(0.568, 24, 16, 64),
}
#: what vLLM keeps off the KV cache besides the weights (activations, CUDA graphs): assumed
ENGINE_OVERHEAD_GB = 2.0

#: assumed aggregate throughput (tokens/s) of one batched vLLM engine, bf16, per card size (GB):
#: (prefill, decode). Not measured (no GPU here): H100-class 80 GB and H200-class 141 GB; the H200 has
#: the same compute and ~1.4x the memory bandwidth, so decode is taken 1.4x faster, prefill alike.
THROUGHPUT: dict[int, dict[str, tuple[float, float]]] = {
    80: {"Qwen/Qwen3-8B": (15_000.0, 2_000.0), "Qwen/Qwen3-32B": (3_500.0, 500.0)},
    141: {"Qwen/Qwen3-8B": (15_000.0, 2_800.0), "Qwen/Qwen3-32B": (3_500.0, 700.0)},
}


def engine_memory(card_gb: float, max_model_len: int, utilization: float = 0.9,
                  models: Mapping[str, ModelShape] = MODELS) -> list[dict[str, Any]]:
    """Per engine: weights, KV cache per token and for one ``max_model_len`` sequence, and how many such
    sequences fit in ``utilization`` x ``card_gb`` after weights and :data:`ENGINE_OVERHEAD_GB`."""
    rows = []
    for name, m in models.items():
        llm = name.startswith("Qwen/")
        budget = utilization * card_gb - m.weights_gb() - (ENGINE_OVERHEAD_GB if llm else 0.0)
        seq = m.kv_gb(max_model_len) if llm else 0.0
        rows.append({"engine": name, "weights GB": round(m.weights_gb(), 1),
                     "KV MB/token": round(m.kv_bytes_per_token() / 1e6, 3) if llm else None,
                     f"KV GB/sequence @{max_model_len}": round(seq, 2) if llm else None,
                     "sequences that fit": (max(0, math.floor(budget / seq)) if llm else None),
                     "fits": budget > (seq if llm else 0.0)})
    return rows


# ---------------------------------------------------------------- the arithmetic
def scale_factors(rehearsal: Mapping[str, float], full: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """Per notebook (:data:`DRIVERS`): ``units`` and ``words`` = full's / the rehearsal's (the sums over
    its drivers; for questions both are the questions' ratio), ``extra_words_per_unit`` = how many more
    words a unit of ``full`` has than one of the rehearsal (0 for questions), and ``basis`` saying which."""
    out = {}
    for nb, (keys, _) in DRIVERS.items():
        if not keys:
            out[nb] = {"units": 0.0, "words": 0.0, "extra_words_per_unit": 0.0, "basis": "no LLM"}
            continue
        if keys == ("questions",):
            if rehearsal["questions"] <= 0:
                raise UsageError("rehearse --estimate: the rehearsal's questions is 0: nothing to scale from")
            f = full["questions"] / rehearsal["questions"]
            out[nb] = {"units": f, "words": f, "extra_words_per_unit": 0.0,
                       "basis": f"questions: full {full['questions']:,.0f} / rehearsal {rehearsal['questions']:,.0f}"}
            continue
        ru, rw = (sum(rehearsal[f"{k}_{m}"] for k in keys) for m in ("units", "words"))
        fu, fw = (sum(full[f"{k}_{m}"] for k in keys) for m in ("units", "words"))
        if ru <= 0 or rw <= 0:
            raise UsageError(f"rehearse --estimate: the rehearsal's {'+'.join(keys)} units/words are {ru}/{rw}: "
                             f"nothing to scale from")
        out[nb] = {"units": fu / ru, "words": fw / rw, "extra_words_per_unit": max(0.0, fw / fu - rw / ru),
                   "basis": f"{'+'.join(keys)} units: full {fu:,.0f} / rehearsal {ru:,.0f}; words: full {fw:,.0f} "
                            f"/ rehearsal {rw:,.0f}"}
    return out


def estimate(rows: Sequence[Mapping[str, Any]], scales: Mapping[str, Mapping[str, Any]], card_gb: int,
             throughput: Mapping[int, Mapping[str, tuple[float, float]]] = THROUGHPUT,
             tokens_per_word: float = TOKENS_PER_WORD) -> list[dict[str, Any]]:
    """The rehearsal's per-notebook counts (``rows``: ``notebook / piece``, ``LLM calls``,
    ``prompt tokens``, ``completion tokens``) scaled to ``full`` (:func:`scale_factors`): calls x units;
    prompt tokens = full's calls x (the rehearsal's prompt tokens per call + ``tokens_per_word`` x the
    extra words per unit); completion tokens x words. GPU-hours on one ``card_gb`` card: prompt tokens /
    prefill rate + completion tokens / decode rate of the notebook's engine."""
    if card_gb not in throughput:
        raise UsageError(f"rehearse --estimate: no stated throughput for a {card_gb} GB card "
                         f"(stated: {', '.join(map(str, sorted(throughput)))} GB)")
    gpu = f"GPU-h ({card_gb} GB)"
    out = []
    for r in rows:
        nb = str(r["notebook / piece"])
        if nb not in DRIVERS:
            continue  # the engine pieces
        s, model = scales[nb], DRIVERS[nb][1]
        c0, p0, k0 = (float(r.get(k) or 0) for k in ("LLM calls", "prompt tokens", "completion tokens"))
        calls = c0 * s["units"]
        pt = calls * ((p0 / c0 if c0 else 0.0) + tokens_per_word * s["extra_words_per_unit"])
        ct = k0 * s["words"]
        hours = 0.0
        if model and (pt or ct):
            prefill, decode = throughput[card_gb][model]
            hours = (pt / prefill + ct / decode) / 3600
        out.append({"notebook": nb, "engine": model or "-", "units x": round(s["units"], 1),
                    "words x": round(s["words"], 1), "scale basis": s["basis"], "rehearsal calls": int(c0),
                    "LLM calls": int(round(calls)), "prompt tokens": int(round(pt)), "completion tokens": int(round(ct)),
                    gpu: round(hours, 2)})
    total = {"notebook": "total", "engine": "", "units x": None, "words x": None, "scale basis": "",
             **{k: sum(x[k] for x in out) for k in ("rehearsal calls", "LLM calls", "prompt tokens", "completion tokens")},
             gpu: round(sum(x[gpu] for x in out), 2)}
    return [*out, total]


# ---------------------------------------------------------------- the rehearsal's side, measured
def rehearsal_quantities() -> dict[str, float]:
    """The rehearsal's evaluation units and words (the units its LitSeg config selects), training units
    and words (the units of its training corpus) and questions (per-dataset caps of its RagConfig over the datasets it
    evaluates), from the configs the rehearsal passes (profile ``full`` with its overrides)."""

    with config_sets(notebook_sets("02", "m3", "reranker")):
        lcfg = LitSegConfig.for_profile("full")
        rcfg = RagConfig.for_profile("full")
    books = load_corpus(lcfg.corpus)
    ev = [word_count(u.text(b.text)) for b, u in select_units(books, lcfg.selection)]
    train = load_corpus(lcfg.train_corpus)
    tr = [word_count(u.text(b.text)) for b in train for u in b.units if u.n_sentences]
    q = rcfg.generation_max_questions * len(rcfg.corpus.datasets)
    return {"eval_units": float(len(ev)), "eval_words": float(sum(ev)), "train_units": float(len(tr)),
            "train_words": float(sum(tr)), "questions": float(q)}


def format_estimate(rows_path: Path, cards: Sequence[int] = (80, 141), max_model_len: int = 32768,
                    rehearsal: Mapping[str, float] | None = None) -> str:
    """The Markdown the command prints: the scaled table per card, the engines' memory per card, and
    the stated inputs."""
    import pandas as pd

    if not Path(rows_path).is_file():
        raise UsageError(f"rehearse --estimate: {rows_path} not found; run `python -m litseg_nb rehearse` first "
                         f"(its per-notebook counts are what the estimate scales)")
    rows = json.loads(Path(rows_path).read_text(encoding="utf-8"))
    reh = dict(rehearsal) if rehearsal is not None else rehearsal_quantities()
    full = full_quantities()
    scales = scale_factors(reh, full)
    parts = ["Estimate, not a measurement: the rehearsal's LLM counts x scale factors (full's data sizes / "
             "the rehearsal's), GPU time at assumed throughputs (litseg_nb.front.rehearse_estimate.THROUGHPUT). "
             "Prompt tokens counted without prefix-cache savings; LoRA training time (notebook 03) not included; "
             "notebook 02's calibration and comparison subsets scale with the rest (full fixes them at 50 units: "
             "an overestimate). "
             f"Calls x units, prompts + {TOKENS_PER_WORD} tokens per extra unit word, completions x words.",
             f"rehearsal sizes: {', '.join(f'{k} {v:,.0f}' for k, v in reh.items())}; full sizes: "
             + ", ".join(f"{k} {v:,.0f}" for k, v in full.items())]
    for card in cards:
        parts.append(f"\n### one {card} GB GPU\n")
        parts.append(pd.DataFrame(estimate(rows, scales, card)).astype(object).fillna("").to_markdown(index=False))
        parts.append("")
        parts.append(pd.DataFrame(engine_memory(card, max_model_len)).astype(object).fillna("").to_markdown(index=False))
    return "\n".join(parts)
