"""Preprocessing benchmark (targets: < 0.4 s per MB over all local raw books, a 20 MB book indexed in < 15 s,
< 1 GiB; reported, never asserted): every local raw Gutenberg book cleaned, split and sentence-indexed as
:func:`litseg_nb.corpus.load_corpus` does, and one synthetic 20 MB book with a contents list."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from .structure import build_units
from ..data.gutenberg import GutenbergFormatError, clean_gutenberg_file, join_paragraphs
from ..core.paths import data_dir

TARGET_SECONDS_PER_MB = 0.4
TARGET_BIG_SECONDS = 15.0
TARGET_BYTES = 1 << 30
RAW_FOLDERS = ("gutenberg", "gutenberg_dev", "literaryqa/texts/validation")


def _peak_rss_bytes() -> int:
    """Peak resident memory of this process: ``VmHWM`` (reset at exec, unlike ``ru_maxrss``, which
    Linux carries over from a large parent such as a Jupyter kernel), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def raw_files(root: Path) -> list[Path]:
    return [p for f in RAW_FOLDERS for p in sorted((Path(root) / f).glob("*.txt"))]


def big_book(root: Path, target_mb: float = 20.0) -> tuple[str, list[tuple[int, int]]]:
    """A cleaned book of about ``target_mb`` MB: local paragraphs under ``CHAPTER n`` headings + contents."""

    pool: list[str] = []
    for p in raw_files(root):
        try:
            c = clean_gutenberg_file(p)
        except GutenbergFormatError:
            continue
        pool.extend(c.text[a:b] for a, b in c.paragraphs if len(c.text[a:b].split()) >= 20)
        if sum(map(len, pool)) > 4e6:
            break
    chapters, size, body = [], 0, []
    while size < target_mb * 1e6:
        n = len(chapters) + 1
        paras = [pool[(40 * (n - 1) + j) % len(pool)] for j in range(40)]  # the next 40 pool paragraphs
        chapters.append(f"CHAPTER {n}")
        body += [f"CHAPTER {n}", *paras]
        size += sum(map(len, paras))
    return join_paragraphs(["A BIG BOOK", "CONTENTS", "\n".join(chapters), *body])


def run_benchmark(root: Path | None = None, max_unit_words: int = 2000, big_mb: float = 20.0) -> dict:
    root = Path(root) if root else data_dir()
    files = raw_files(root)
    mb = sum(p.stat().st_size for p in files) / 1e6
    t0, c0 = time.perf_counter(), time.process_time()
    books = skipped = units = 0
    for p in files:
        try:
            c = clean_gutenberg_file(p)
        except GutenbergFormatError:
            skipped += 1
            continue
        units += len(build_units(p.stem, c.text, c.paragraphs, max_unit_words, author=c.report.author))
        books += 1
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    # wall time and this process's CPU time: on a shared machine the CPU time is the work's own cost
    out = {"books": books, "skipped": skipped, "input_mb": round(mb, 2), "seconds": round(seconds, 2),
           "seconds_per_mb": round(seconds / mb, 3) if mb else None,
           "cpu_seconds_per_mb": round(cpu / mb, 3) if mb else None, "units": units,
           "max_unit_words": max_unit_words,
           "meets_time_target": bool(mb) and seconds / mb < TARGET_SECONDS_PER_MB,
           "meets_time_target_cpu": bool(mb) and cpu / mb < TARGET_SECONDS_PER_MB,
           "load_average_1min": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None}
    if big_mb:
        text, paragraphs = big_book(root, big_mb)
        t1, c1 = time.perf_counter(), time.process_time()
        n_units = len(build_units("big", text, paragraphs, max_unit_words))
        big_s, big_cpu = time.perf_counter() - t1, time.process_time() - c1
        out.update({"big_book_mb": round(len(text.encode("utf-8")) / 1e6, 1), "big_book_seconds": round(big_s, 2),
                    "big_book_cpu_seconds": round(big_cpu, 2),
                    "big_book_units": n_units, "meets_big_book_target": big_s < TARGET_BIG_SECONDS,
                    "meets_big_book_target_cpu": big_cpu < TARGET_BIG_SECONDS})
    peak = _peak_rss_bytes()
    out.update({"peak_rss_mb": round(peak / 2**20, 1), "meets_memory_target": peak < TARGET_BYTES})
    return out


def run_benchmark_subprocess(max_unit_words: int = 2000, big_mb: float = 20.0, timeout: float = 900) -> dict:
    """:func:`run_benchmark` in a fresh interpreter (clean peak-memory measurement)."""
    out = subprocess.run([sys.executable, "-m", "litseg_nb.preprocess.benchmark", str(max_unit_words), str(big_mb)],
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"preprocessing benchmark failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(run_benchmark(max_unit_words=int(args[0]) if args else 2000,
                                   big_mb=float(args[1]) if len(args) > 1 else 20.0)))
