"""Benchmark: LitSeg annotation with and without shared-prefix KV reuse (hf backend).

Runs the real LitSeg pipeline (three stages per unit, the smoke profile's sizes and model,
SmolLM2-135M-Instruct) on the smoke profile's units twice -- ``prefix_reuse`` off, then on -- with
the persistent request cache off, and prints per run: wall time, prompt tokens, prompt tokens
served from the prefix cache, computed prefill tokens (prompt - cached), completion tokens, and
whether every stage reply is identical between the two runs (greedy decoding: it must be).

Not a test: the numbers depend on the machine and on what else runs on it (on a shared machine
report the load average printed at start and end). Threads: ``--threads`` (default
``$LITSEG_TORCH_THREADS`` or 1).

    .venv/bin/python benchmarks/llm_prefix_reuse.py [--units 8] [--threads 1] [--growing-cache off] [--json out.json]

``--growing-cache off`` decodes with transformers' concatenating ``DynamicCache`` (the backend's
default is an in-place buffer, see :mod:`litseg_nb.llm.hf`): run once with each to see what it saves.
"""
from __future__ import annotations

import argparse
import json
import os
import time


def run(reuse: bool, items, cfg, growing_cache: bool = True) -> dict:
    from litseg_nb.litseg.pipeline import annotate_units
    from litseg_nb.llm import make_backend

    backend = make_backend(cfg.llm.replace(prefix_reuse=reuse, use_cache=False))
    backend.growing_cache = growing_cache  # the hf backend's decoding cache (module docstring)
    t0 = time.perf_counter()
    res = annotate_units(items, backend, cfg, progress=False)
    wall = time.perf_counter() - t0
    rows = backend.ledger.rows()
    tot = {k: sum(r[k] for r in rows) for k in ("calls", "prompt_tokens", "cached_prompt_tokens",
                                                "completion_tokens", "latency_s")}
    replies = [[a["text"] for s in ("stage1", "stage2", "stage3") for a in r["stages"][s]["attempts"]]
               for r in res.records]
    return {"prefix_reuse": reuse, "growing_cache": growing_cache, "wall_s": round(wall, 1), **tot,
            "computed_prefill_tokens": tot["prompt_tokens"] - tot["cached_prompt_tokens"],
            "prefix_builds": backend.prefixes.builds, "replies": replies}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=0, help="first N of the smoke units (0 = all)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("LITSEG_TORCH_THREADS") or 1))
    ap.add_argument("--json", default="", help="also write the results here")
    ap.add_argument("--growing-cache", choices=("on", "off"), default="on",
                    help="the hf backend's decoding cache: in-place buffer (on, the default) or "
                         "transformers' concatenating DynamicCache (off), for both runs")
    ap.add_argument("--reuse-first", action="store_true",
                    help="run with reuse first (to counterbalance load drift on a shared machine)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from litseg_nb.corpus import load_corpus
    from litseg_nb.litseg.config import LitSegConfig
    from litseg_nb.corpus import select_units

    cfg = LitSegConfig.for_profile("smoke")
    items = select_units(load_corpus(cfg.corpus), cfg.selection)
    if args.units:
        items = items[:args.units]
    n_sent = sum(u.n_sentences for _, u in items)
    load0 = os.getloadavg()
    print(f"LitSeg smoke annotation: {len(items)} units, {n_sent} sentences, model {cfg.llm.model} "
          f"(hf, {cfg.llm.device}), batch {cfg.llm.batch_size}, {args.threads} torch thread(s), "
          f"growing decoding cache {args.growing_cache}; "
          f"load average at start {load0[0]:.2f}", flush=True)
    order = (True, False) if args.reuse_first else (False, True)
    results = []
    for reuse in order:
        results.append(run(reuse, items, cfg, growing_cache=args.growing_cache == "on"))
        r = results[-1]
        print(f"  done: prefix_reuse={reuse} wall {r['wall_s']:.1f}s, load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)
    off, on = sorted(results, key=lambda r: r["prefix_reuse"])
    same = off["replies"] == on["replies"]
    print(f"{'prefix_reuse':>12} {'wall_s':>8} {'calls':>6} {'prompt':>8} {'cached':>8} "
          f"{'computed':>9} {'completion':>10}")
    for r in results:
        print(f"{str(r['prefix_reuse']):>12} {r['wall_s']:>8.1f} {r['calls']:>6} {r['prompt_tokens']:>8} "
              f"{r['cached_prompt_tokens']:>8} {r['computed_prefill_tokens']:>9} {r['completion_tokens']:>10}")
    speedup = off["wall_s"] / on["wall_s"] if on["wall_s"] else float("nan")
    print(f"speed-up (wall) {speedup:.2f}x; computed prefill tokens "
          f"{off['computed_prefill_tokens']} -> {on['computed_prefill_tokens']} "
          f"({off['computed_prefill_tokens'] / max(1, on['computed_prefill_tokens']):.1f}x fewer); "
          f"identical replies: {same}; load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"units": len(items), "sentences": n_sent, "threads": args.threads,
                       "load_start": load0, "load_end": os.getloadavg(), "speedup": speedup,
                       "identical_replies": same,
                       "runs": [{k: v for k, v in r.items() if k != "replies"} for r in results]},
                      fh, indent=2)
    if not same:
        raise SystemExit("replies differ between the runs with and without prefix reuse")


if __name__ == "__main__":
    main()
