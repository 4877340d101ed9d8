"""Preprocessing benchmark (issue target: < 20 s and < 1 GiB on the 2-core machine; reported only).

Load + clean + structure-split + sentence-index all raw Gutenberg books under ``<data>/gutenberg``
plus GutenQA's Emma, without the corpus cache. :func:`run_benchmark_subprocess` runs it in a fresh
interpreter so the peak resident memory (``VmHWM``) belongs to this work alone (it includes the
interpreter and imports, ~100 MB).
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_SECONDS = 20.0
TARGET_BYTES = 1 << 30


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


def run_benchmark(root: Path | None = None, max_unit_words: int = 2000) -> dict:
    from ..config import CorpusConfig
    from ..corpus import data_files, load_corpus
    from ..paths import data_dir

    root = Path(root) if root else data_dir()
    cfg = CorpusConfig(datasets=("gutenqa", "gutenberg"), max_unit_words=max_unit_words)
    files = data_files(cfg, root)
    mb = sum(p.stat().st_size for p in files) / 1e6
    t0 = time.perf_counter()
    books = load_corpus(cfg, use_cache=False, root=root)
    seconds = time.perf_counter() - t0
    peak = _peak_rss_bytes()
    return {"books": len(books), "input_mb": round(mb, 2), "seconds": round(seconds, 2),
            "seconds_per_mb": round(seconds / mb, 3), "peak_rss_mb": round(peak / 2**20, 1),
            "units": sum(len(b.units) for b in books),
            "sentences": sum(u.n_sentences for b in books for u in b.units),
            "max_unit_words": max_unit_words,
            "meets_time_target": seconds < TARGET_SECONDS, "meets_memory_target": peak < TARGET_BYTES}


def run_benchmark_subprocess(max_unit_words: int = 2000, timeout: float = 600) -> dict:
    """:func:`run_benchmark` in a fresh interpreter (clean peak-memory measurement)."""
    out = subprocess.run([sys.executable, "-m", "litseg_nb.preprocess.benchmark", str(max_unit_words)],
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"preprocessing benchmark failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(run_benchmark(max_unit_words=int(sys.argv[1]) if len(sys.argv) > 1 else 2000)))
