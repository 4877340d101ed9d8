"""Benchmark: read, clean, split and index every local raw book (gutenberg/, gutenberg_dev/,
LiteraryQA texts), then one synthetic single-body book (default 20 MB).

    LITSEG_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_preprocess.py [max_unit_words] [big_mb]

Prints seconds, seconds per MB, the big book's seconds and peak memory against targets
(< 0.4 s/MB, 20 MB book < 15 s, < 1 GiB); a report, not an assertion. Notebook 01 shows the same numbers.
"""
import sys

from litseg_nb.preprocess.benchmark import (TARGET_BIG_SECONDS, TARGET_SECONDS_PER_MB,
                                            run_benchmark_subprocess)

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    big = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    r = run_benchmark_subprocess(n, big)
    for k, v in r.items():
        print(f"{k:>22}: {v}")
    print(f"targets: < {TARGET_SECONDS_PER_MB} s/MB, big book < {TARGET_BIG_SECONDS:.0f} s, < 1024 MB peak memory")
