#!/usr/bin/env python3
"""GPU check of the LitSeg-Lite training code: a few SFT and GRPO steps in bf16 on CUDA.

Self-contained (no downloads, no weights): a RANDOM-initialised Qwen2-shaped model of realistic size
(``--size 1.5b``: Qwen2-1.5B's shape with a 49k vocabulary, ~1.4B parameters; ``--size 0.5b``) is
trained with exactly the code notebook 03 uses (:func:`litseg_nb.lite.train.train_sft` and
:func:`~litseg_nb.lite.train.train_grpo`, the real format reward, the narratological reward wired to
a scripted judge) on synthetic sentence-indexed units with the verbatim Appendix E.2 prompt. It
records tokens per second and peak GPU memory per stage and writes them as JSON to
``$OUT/gpu_lite_check.json`` (``--out`` overrides; default ``outputs/gpu_lite_check.json``).

A random model emits noise, so the real rewards are all 0; a stand-in reward (distinct characters
per rollout, clearly named ``standin_variance_reward``) gives GRPO groups non-zero variance, so the
policy loss, its backward pass and the optimizer step really run. Throughput, not quality, is measured.

The tokenizer is SmolLM2's (the folder the LLM layer derives once from the packaged GGUF,
``.cache/models/smollm2-tokenizer-v1``, or ``--tokenizer``); carry it to the GPU machine.

CPU test of the same script (tiny model, 2 units, 2 SFT + 1 GRPO step; a few minutes on a busy CPU)::

    .venv/bin/python scripts/gpu_lite_check.py --size tiny --out /tmp/gpu_lite_check.json

GPU machine (Python 3.12 image without trl/datasets: carry them as wheels in ``.whl``)::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \
    PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 python3 scripts/gpu_lite_check.py --size 1.5b
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SIZES = {
    # Qwen2-1.5B's shape (hidden 1536, 28 layers, GQA 12/2 heads, MLP 8960), vocabulary of the tokenizer
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2),
    # Qwen2-0.5B's shape
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2),
}
WORDS = ("the old man walked toward the harbour while his daughter watched from the window and "
         "the storm gathered over the hills as the letter arrived too late to change anything "
         "she said nothing but her hands trembled when the door opened").split()


def synthetic_units(n_units: int, n_sentences: int, seed: int):
    """Sentence-indexed units of random English-like sentences (book, unit pairs of the shared schema)."""
    from litseg_nb.core.schema import Book, Sentence, Unit

    rng = random.Random(seed)
    text, units = "", []
    for u in range(n_units):
        start, sents = len(text), []
        for i in range(1, n_sentences + 1):
            s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))).capitalize() + ". "
            sents.append(Sentence(i, len(text), len(text) + len(s) - 1))
            text += s
        units.append(Unit("synthetic:1", f"u{u:04d}", u, f"Chapter {u + 1}", start, len(text), tuple(sents)))
    return Book("synthetic:1", "Synthetic", "synthetic", text, units=units)


def examples_for(book):
    from litseg_nb.lite.data import LiteExample, lite_conversation, target_text

    out = []
    for u in book.units:
        n, cuts = u.n_sentences, sorted({1, *range(1, u.n_sentences, max(2, u.n_sentences // 6))})
        segs = [{"subtitle": f"Event {k + 1}", "from_idx": a, "to_idx": (cuts[k + 1] - 1 if k + 1 < len(cuts) else n),
                 "context_idx": []} for k, a in enumerate(cuts)]
        target = {"step1": {"step_1_events": "A storm; a letter; a door opens."},
                  "step2": {"step_2_threads": "One intradiegetic thread."},
                  "step3": {"chapter_title": u.title, "step_3_turning_points": [
                      {"type": "Opportunity", "description": "The letter arrives."}], "segments": segs}}
        conv = lite_conversation(book, u)
        out.append(LiteExample(book.book_id, u.unit_id, n, conv[0]["content"], conv[1]["content"],
                               target_text(target), segs))
    return out


def standin_variance_reward(completions, **_):
    """Stand-in reward with variance across a random model's rollouts (throughput check only)."""
    from litseg_nb.lite.train import completion_text

    return [len(set(completion_text(c))) / 100.0 for c in completions]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="1.5b")
    ap.add_argument("--units", type=int, default=4)
    ap.add_argument("--sentences", type=int, default=0, help="sentences per unit (0 = 120 on GPU, 8 tiny)")
    ap.add_argument("--sft-steps", type=int, default=0, help="0 = 4 (GPU) / 2 (tiny)")
    ap.add_argument("--grpo-steps", type=int, default=0, help="0 = 2 (GPU) / 1 (tiny)")
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--completion-tokens", type=int, default=0, help="0 = 256 (GPU) / 16 (tiny)")
    ap.add_argument("--tokenizer", default=str(REPO / ".cache" / "models" / "smollm2-tokenizer-v1"))
    ap.add_argument("--out", default="")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tiny = args.size == "tiny"
    args.sft_steps = args.sft_steps or (2 if tiny else 4)
    args.grpo_steps = args.grpo_steps or (1 if tiny else 2)
    args.completion_tokens = args.completion_tokens or (16 if tiny else 256)
    if tiny:
        args.generations = min(args.generations, 2)
        args.units = min(args.units, 2)

    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from litseg_nb.lite import train as T
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.lite.train import build_reward_funcs

    sys.path.insert(0, str(REPO / "tests"))
    from fakes import ScriptedBackend

    cuda = torch.cuda.is_available()
    if args.size != "tiny" and not cuda:
        print("no CUDA device: use --size tiny on a CPU", file=sys.stderr)
        return 2
    out_path = Path(args.out or (Path(os.environ["OUT"]) / "gpu_lite_check.json" if os.environ.get("OUT")
                                 else REPO / "outputs" / "gpu_lite_check.json"))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_lite_check_{os.getpid()}"
    report: dict = {"size": args.size, "python": sys.version.split()[0], "platform": platform.platform(),
                    "torch": torch.__version__, "cuda": cuda,
                    "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    try:
        import peft
        import transformers
        import trl

        report["versions"] = {"transformers": transformers.__version__, "trl": trl.__version__,
                              "peft": peft.__version__}
        tok = AutoTokenizer.from_pretrained(args.tokenizer)
        tok.pad_token = tok.pad_token or tok.eos_token
        torch.manual_seed(args.seed)
        config = Qwen2Config(vocab_size=len(tok), max_position_embeddings=32768, rope_theta=1e6,
                             tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                             **SIZES[args.size])
        dtype = torch.bfloat16 if cuda else torch.float32
        t0 = time.perf_counter()
        prev = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:  # initialise directly on the device in the training precision
            with torch.device("cuda" if cuda else "cpu"):
                model = Qwen2ForCausalLM(config)
        finally:
            torch.set_default_dtype(prev)
        report["model"] = {"shape": "Qwen2", **SIZES[args.size], "vocab": len(tok),
                           "parameters": sum(p.numel() for p in model.parameters()), "dtype": str(dtype),
                           "init_s": round(time.perf_counter() - t0, 1)}
        n_sent = args.sentences or (120 if args.size != "tiny" else 8)
        book = synthetic_units(args.units, n_sent, args.seed)
        examples = examples_for(book)
        lens = [len(tok(tok.apply_chat_template(e.sft_record()["prompt"] + e.sft_record()["completion"],
                                                tokenize=False), add_special_tokens=False).input_ids)
                for e in examples]
        report["data"] = {"units": len(examples), "sentences/unit": n_sent, "tokens/example": lens}
        cfg = LiteConfig.for_profile(
            "full", seed=args.seed, max_seq_tokens=max(lens) + 64, sft_max_steps=args.sft_steps,
            sft_grad_accum=1, sft_batch_size=1, sft_warmup_ratio=0.0,
            grpo_max_steps=args.grpo_steps, grpo_num_generations=args.generations, grpo_prompts_per_step=1,
            grpo_max_completion_length=args.completion_tokens, grpo_mask_truncated_completions=False,
            gradient_checkpointing=not tiny, lora_r=4 if tiny else 16, lora_alpha=8 if tiny else 32)
        report["lite_config"] = {k: v for k, v in cfg.to_dict().items() if k.startswith(("sft_", "grpo_", "lora_"))}

        if cuda:
            torch.cuda.reset_peak_memory_stats()
        sft_model, sft = T.train_sft(model, tok, examples, cfg, work / "sft")
        report["sft"] = sft.summary() | {"tokens_per_s": sft.tokens_per_s, "peak_memory_gib": sft.peak_memory_gib}
        print("SFT", json.dumps(report["sft"], default=str), flush=True)

        merged = sft_model.merge_and_unload()
        judge = ScriptedBackend(reply_fn=lambda conv: "{}")  # never called: random rollouts are unscorable
        funcs, narr = build_reward_funcs(judge, retries=0)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        _, grpo = T.train_grpo(merged, tok, examples, cfg, funcs + [standin_variance_reward], work / "grpo",
                               reward_weights=[0.5, 0.5, 1.0])
        log = grpo.log_frame()
        report["grpo"] = grpo.summary() | {
            "tokens_per_s": grpo.tokens_per_s, "peak_memory_gib": grpo.peak_memory_gib,
            "step_time_s": [round(x, 2) for x in log.get("step_time", [])],
            "completion_mean_length": [float(x) for x in log.get("completions/mean_length", [])],
            "kl": [float(x) for x in log.get("kl", [])], "judge_stats": narr.stats.as_dict()}
        print("GRPO", json.dumps(report["grpo"], default=str), flush=True)
        report["ok"] = True
    except Exception as exc:  # the JSON must come back even when a stage fails
        import traceback

        report["ok"] = False
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()[-4000:]
        print(report["traceback"], file=sys.stderr)
    out_path.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    print(f"wrote {out_path}")
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
