"""Benchmark: reply parsing time against reply size, and a long fuzz run.

    .venv/bin/python benchmarks/bench_replies.py            # timings, sizes 16 KB .. 4 MB
    .venv/bin/python benchmarks/bench_replies.py --fuzz 10  # also tests/test_replies_fuzz.py x10 examples

For every reply shape (a realistic valid reply and the pathological shapes seen in replies) and size,
the median time of the full reading path of each consumer — LitSeg stage-3 validation + fallback,
Lite's format reward, the rubric judge's parser — and the coverage repair on many segments/gaps.
``us/KB`` staying flat as the size grows 256-fold is the linearity claim; a quadratic parser shows a
``us/KB`` growing with the size. A report, not an assertion (no caps applied: the size cap is what a
run adds on top, ``MAX_CHARS_PER_TOKEN`` characters per token of the stage budget).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from litseg_nb.lite.train import format_reward_breakdown
from litseg_nb.litseg.validate import Segment, finalize_segments, parse_json_reply, repair_coverage, validate_segments
from litseg_nb.litseg.rubric_judge import RubricParseError, parse_rubric_reply
from litseg_nb.llm.replies import MAX_CHARS_PER_TOKEN

SIZES = [16_000, 64_000, 256_000, 1_000_000, 4_000_000]


def realistic(size: int) -> tuple[str, int]:
    """A valid stage-3 reply of about ``size`` characters behind a reasoning block."""
    segs, n = [], 0
    body = '<think>Events first, then threads.</think>\n```json\n{"chapter_title": "I", "step_3_turning_points": [], "segments": ['
    while len(body) < size:
        seg = {"subtitle": "Emma plans a match ``` for Harriet", "from_idx": n + 1, "to_idx": n + 5,
               "context_idx": [n] if n else None}
        n += 5
        body += ("" if not segs else ", ") + json.dumps(seg)
        segs.append(seg)
    return body + "]}\n```", n


SHAPES = {
    "valid reply (fenced, reasoning)": None,
    "backticks": lambda k: "`" * k,
    "fence lines": lambda k: "```\n" * (k // 4),
    '"d1:[" repeated': lambda k: '"d1:["' * (k // 6),
    "open braces": lambda k: "{" * k,
    'nested {"a": [': lambda k: '{"a": [' * (k // 7),
    "<think> tags": lambda k: "<think>" * (k // 7),
    "draft in unclosed think": lambda k: "<think>" + '{"segments": [' * (k // 14),
    "whitespace after key": lambda k: "d1" + " " * k + ":",
}


def median_time(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def consumers(text: str, n: int):
    def litseg():
        finalize_segments(validate_segments(parse_json_reply(text), n), n)

    def reward():
        format_reward_breakdown(text, n)

    def judge():
        try:
            parse_rubric_reply(text, 3)
        except RubricParseError:
            pass
    return {"litseg": litseg, "lite_reward": reward, "rubric_judge": judge}


def run_timings() -> list[dict]:
    rows = []
    for shape, make in SHAPES.items():
        for size in SIZES:
            text, n = realistic(size) if make is None else (make(size), 50)
            repeat = 5 if size <= 256_000 else 2
            for name, fn in consumers(text, n).items():
                t = median_time(fn, repeat)
                rows.append({"shape": shape, "chars": len(text), "consumer": name, "seconds": t,
                             "us_per_kb": 1e6 * t / (len(text) / 1000)})
    for m_per_gap, gaps in ((10, 100), (104, 1000), (104, 4000)):
        segs, n = [], 0
        for _ in range(gaps):
            for _ in range(m_per_gap):
                segs.append(Segment("", n + 1, n + 1))
                n += 1
            n += 1
        t = median_time(lambda: repair_coverage(segs, n), 2)
        rows.append({"shape": f"coverage repair, {gaps} gaps", "chars": len(segs), "consumer": "repair_coverage",
                     "seconds": t, "us_per_kb": 1e6 * t / (len(segs) / 1000)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuzz", type=float, default=0.0, help="also run the fuzz test with this many times its examples")
    ap.add_argument("--json", type=Path, help="write the timing rows here")
    args = ap.parse_args()
    rows = run_timings()
    print(f"{'shape':34} {'consumer':16} {'size':>10} {'seconds':>9} {'us/KB':>8}")
    for r in rows:
        size = f"{r['chars']:,}" + (" segs" if r["consumer"] == "repair_coverage" else "")
        print(f"{r['shape']:34} {r['consumer']:16} {size:>10} {r['seconds']:9.4f} {r['us_per_kb']:8.1f}")
    print(f"\nsize cap in runs: {MAX_CHARS_PER_TOKEN} characters per token of the stage budget "
          f"(4,096 tokens -> {4096 * MAX_CHARS_PER_TOKEN:,} characters)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.fuzz:
        root = Path(__file__).resolve().parents[1]
        env = dict(os.environ, LITSEG_FUZZ_SCALE=str(args.fuzz))
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              str(root / "tests" / "test_replies_fuzz.py")], env=env, cwd=root)
        print(f"fuzz x{args.fuzz}: exit {rc} in {time.perf_counter() - t0:.0f} s")
        sys.exit(rc)


if __name__ == "__main__":
    main()
