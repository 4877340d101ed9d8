"""LitSeg's fallbacks per unit on a profile's evaluated units, without running the notebooks.

Loads the profile's LitSeg config and units exactly as notebook 02 does (``notebook_config``,
``load_corpus(cfg.corpus)``, ``select_units(books, cfg.selection)``; smoke: the 8 Emma units), builds
the profile's backend (smoke: SmolLM2-135M on the CPU via transformers) and annotates the units with
the three prompts, printing one row per unit (sentences, segments, fallback and fallback types, the
stage-3 errors, tokens, seconds) and the share of units that fell back to the whole unit.

    python benchmarks/smoke_litseg_fallbacks.py --profile smoke                 # the profile's setting (on)
    python benchmarks/smoke_litseg_fallbacks.py --profile smoke --structured off  # without constrained decoding
    python benchmarks/smoke_litseg_fallbacks.py --profile smoke --method litseg-lite

The length reference is the paper's 100 unless ``--calibrate`` (notebook 02 calibrates it first on
``calibration_units`` units; in the smoke run at f1ca1bc that unit fell back, so 100 was kept).
Nothing is written but the LLM request cache and ``--annotations`` (a rerun of the same requests is free and says so in
``cache_hits``). Costly on a shared 2-core CPU (~2-5 min per unit for SmolLM2-135M): run it once.

Measured (2 cores at load ~18, ``--profile smoke --group 1``): whole-unit fallback 0/8 with
constrained decoding (1 none, 6 index_repair, 1 coverage_repair; 1481 s), against 8/8 without it in
the smoke run at f1ca1bc; every unit still ends as one segment 1..N (SmolLM2-135M copies the prompt's
placeholders and writes "from 1 to N", often twice). With smoke's segment floor (``LitSegConfig.min_segments=2``,
364071c, load 11-23): 0/8 whole-unit fallbacks, 8/8 units with 2 segments (3 none, 5 coverage_repair; 3023 s), every cut
next to an edge of the unit (after sentence 1 or 2, or before the last). ``--method litseg-lite`` (the untrained SmolLM2
with the E.2 prompt, constrained): 0/8 (6 none, 2 coverage_repair; one segment each; 802 s).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="smoke", choices=("test", "smoke", "full"))
    ap.add_argument("--structured", choices=("profile", "on", "off"), default="profile",
                    help="constrained decoding (llm.structured_output): the profile's setting, or forced")
    ap.add_argument("--method", choices=("litseg", "litseg-lite"), default="litseg")
    ap.add_argument("--max-units", type=int, default=0, help="the first N units (0 = all)")
    ap.add_argument("--calibrate", action="store_true", help="calibrate the length reference first (notebook 02)")
    ap.add_argument("--group", type=int, default=0,
                    help="LitSeg: units per group (unit_group_size; 0 = the profile's): a finished group's records "
                         "are in --annotations at once")
    ap.add_argument("--annotations", default=None, help="LitSeg: annotations file (resumable; default: none)")
    args = ap.parse_args()
    if args.max_units < 0 or args.group < 0:
        print("smoke_litseg_fallbacks: --max-units and --group must be >= 0", file=sys.stderr)
        return 2

    import pandas as pd

    from litseg_nb.corpus import load_corpus
    from litseg_nb.llm import UsageLedger, make_backend
    from litseg_nb.front.params import notebook_config
    from litseg_nb.corpus import select_units

    cfg = notebook_config("02_litseg_annotation", profile=args.profile, seed=0, max_units=None, max_retries=None,
                          calibrate=None, compare_structured=None)
    if args.structured != "profile":
        cfg = cfg.replace(llm=cfg.llm.replace(structured_output=args.structured == "on"))
    if args.group:
        cfg = cfg.replace(unit_group_size=args.group)
    books = load_corpus(cfg.corpus)
    items = select_units(books, cfg.selection)
    if args.max_units:
        items = items[:args.max_units]
    t0 = time.perf_counter()
    rows = []
    if args.method == "litseg":
        from litseg_nb.litseg import segmenter as cal
        from litseg_nb.litseg.pipeline import annotate_units

        backend = make_backend(cfg.llm, UsageLedger())
        ref = cal.calibrate_length_reference(items, backend, cfg)["length_reference"] if args.calibrate else 100
        run = annotate_units(items, backend, cfg, length_reference=ref, annotations_path=Path(args.annotations) if args.annotations else None)
        for r in run.records:
            rows.append({"unit": f"{r['book_id'].split(':')[-1][:12]}/{r['unit_id']}", "n_sentences": r["n_sentences"],
                         "floor": r.get("segment_floor", 0), "segments": len(r["segments"]), "fallback": r["fallback"],
                         "fallback_types": ",".join(r["fallback_types"]),
                         "stage1": r["stage_fallbacks"]["stage1"], "stage2": r["stage_fallbacks"]["stage2"],
                         "stage3_errors": "; ".join(r["stages"]["stage3"]["attempts"][-1]["errors"][:2])[:90],
                         "tokens_in": r["tokens"]["prompt"], "tokens_out": r["tokens"]["completion"],
                         "cache_hits": r["tokens"]["cache_hits"], "llm_s": r["tokens"]["latency_s"]})
        label = (f"{cfg.describe()} | length reference={ref}")
    else:
        from litseg_nb.lite.config import LiteConfig
        from litseg_nb.lite.segmenter import LiteSegmenter

        lcfg = LiteConfig.for_profile(args.profile)
        if args.structured != "profile":
            lcfg = lcfg.replace(llm=lcfg.llm.replace(structured_output=args.structured == "on"))
        backend = make_backend(lcfg.llm, UsageLedger())
        seg = LiteSegmenter(backend, lcfg.infer_max_new_tokens, lcfg.infer_retries, seed=lcfg.seed)
        _, results = seg.segment_units(items, progress=True)
        for r in results:
            rows.append({"unit": f"{r.book_id.split(':')[-1][:12]}/{r.unit_id}", "n_sentences": r.n_sentences,
                         "segments": r.n_segments, "fallback": r.fallback, "fallback_types": ",".join(r.fallback_types),
                         "stage3_errors": "; ".join(r.errors[-1][:2])[:90], "tokens_in": r.prompt_tokens,
                         "tokens_out": r.completion_tokens, "cache_hits": r.cache_hits, "llm_s": round(r.model_seconds, 1)})
        label = f"{lcfg.describe()} | structured={'on' if seg.structured else 'off'} | length reference=100"
    wall = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    whole = int((df["fallback"] == "whole_unit").sum())
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 90):
        print(label)
        print(df.to_string(index=False))
    multi = int((df["segments"] >= 2).sum())
    print(f"[{args.method}] {len(df)} units: whole-unit fallback {whole}/{len(df)} ({whole / max(1, len(df)):.0%}), "
          f"fallbacks by type {df['fallback'].value_counts().to_dict()}, >= 2 segments {multi}/{len(df)}, "
          f"wall {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
