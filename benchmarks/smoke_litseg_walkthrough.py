"""Notebook 02's walk-through without the notebook: the toy chapter through LitSeg's three prompts.

Calls exactly what the walk-through cells call (``walkthrough.toy_book`` with the profile's corpus settings,
``make_backend(cfg.llm, UsageLedger())``, ``walkthrough.litseg_walkthrough``, ``stage_table``,
``verdict_table``, ``pipeline.records_to_chunks``) and prints the stage table, the final segments (with
the unit's ``segment_floor``: smoke's stage-3 schema asks for at least that many segments, a small-model
accommodation, see ``LitSegConfig.min_segments``) and the rebuilt chunks. The length reference is the
configured one (the paper's 100) unless ``--length-reference N``: notebook 02 passes the calibrated value of
the first evaluated unit's dataset (calibration costs two more units here, so it is not run).

    python benchmarks/smoke_litseg_walkthrough.py --profile smoke
"""
from __future__ import annotations

import argparse
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="smoke", choices=("test", "smoke", "full"))
    ap.add_argument("--length-reference", type=int, default=0, help="0 = the profile's configured value")
    args = ap.parse_args()
    if args.length_reference < 0:
        print("smoke_litseg_walkthrough: --length-reference must be >= 0", file=sys.stderr)
        return 2

    import time

    import pandas as pd

    from litseg_nb.front import walkthrough
    from litseg_nb.front.params import notebook_config
    from litseg_nb.litseg import pipeline
    from litseg_nb.llm import UsageLedger, make_backend

    cfg = notebook_config("02_litseg_annotation", profile=args.profile, seed=0, max_units=None, max_retries=None,
                          calibrate=None, compare_structured=None)
    ref = args.length_reference or cfg.length_reference
    _, toy = walkthrough.toy_book(cfg.corpus.max_unit_words, cfg.corpus.sentence_splitter)
    unit = toy.units[0]
    backend = make_backend(cfg.llm, UsageLedger())
    t0 = time.perf_counter()
    record = walkthrough.litseg_walkthrough(toy, unit, backend, cfg, ref)
    wall = time.perf_counter() - t0
    chunks = pipeline.records_to_chunks([toy], [record], method="litseg-walkthrough")
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 160):
        print(f"{cfg.describe()} | length reference={ref} | unit {unit.unit_id} {unit.title!r}: "
              f"{unit.n_sentences} sentences, segment_floor={record['segment_floor']}")
        print(walkthrough.stage_table(record, reply_chars=600).to_string(index=False))
        print(walkthrough.verdict_table(record).to_string(index=False))
        print(pd.DataFrame([{"chunk": c.chunk_id, "from_idx": c.from_idx, "to_idx": c.to_idx,
                             "context_idx": c.context_idx, "subtitle": c.subtitle, "text": c.text[:120]}
                            for c in chunks]).to_string(index=False))
    print(f"[walkthrough] {len(record['segments'])} segment(s), fallback {record['fallback']} "
          f"({','.join(record['fallback_types'])}), wall {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
