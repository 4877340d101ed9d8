"""Benchmark: load + clean + split + index the 11 raw Gutenberg books and GutenQA's Emma.

    LITSEG_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_preprocess.py [max_unit_words]

Prints seconds, seconds per MB and peak memory against the targets (< 20 s, < 1 GiB); a report,
not an assertion. Notebook 01 shows the same numbers.
"""
import sys

from litseg_nb.preprocess.benchmark import TARGET_SECONDS, run_benchmark_subprocess

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    r = run_benchmark_subprocess(n)
    for k, v in r.items():
        print(f"{k:>20}: {v}")
    print(f"target: < {TARGET_SECONDS:.0f} s and < 1024 MB peak memory")
