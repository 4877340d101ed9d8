"""Benchmark: books per minute of ``segment DIR``, one process vs ``--ray`` on a local cluster of this machine.

    python benchmarks/bench_ray_segment.py [--books-dir DIR] [--books 6] [--max-units 2] [--cpus 2]

Two methods on the same books: ``token`` (rule-based: Ray tasks) and ``litseg`` over the fake
OpenAI-compatible server of ``tests/fakes.py`` (``--reply-s`` seconds per reply, the stand-in for a
model server's latency; Ray actors, each holding one backend). Each run starts from an empty output
folder and an empty LLM request cache. The local cluster is started once, before the timed runs (its
start-up time is reported on its own line); the ``--ray`` runs reuse it, as a long-lived cluster would
be reused. Every ``--ray`` run's outputs are compared byte for byte with the one-process run's.

The books are the first ``--books`` ``*.txt`` files of ``--books-dir`` (default: ``<data>/gutenberg``,
the raw GutenQA books held locally), cut to ``--max-units`` units each. Writes
``<outputs>/<profile>/tables/bench_ray_segment.{csv,md}``. The numbers are this machine's at the moment
of the run (say its load when quoting them); they are not a cluster's.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake server (tests/fakes.py)


def _run(argv: list[str], out: Path, cache: Path) -> tuple[float, int]:
    from litseg_nb.cli import main

    os.environ["LITSEG_CACHE_DIR"] = str(cache)
    t0 = time.perf_counter()
    rc = main(argv + ["-o", str(out)])
    return time.perf_counter() - t0, rc


def _same(a: Path, b: Path) -> bool:
    fa, fb = sorted(p.name for p in a.iterdir()), sorted(p.name for p in b.iterdir())
    return fa == fb and all((a / n).read_bytes() == (b / n).read_bytes() for n in fa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--books-dir", type=Path, default=None)
    ap.add_argument("--books", type=int, default=6)
    ap.add_argument("--max-units", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=2, help="the local cluster's CPUs")
    ap.add_argument("--reply-s", type=float, default=0.5, help="the fake server's seconds per reply")
    ap.add_argument("--profile", default="test", help="the profile of the segment runs (test: no model download)")
    args = ap.parse_args()
    import ray

    from fakes import FakeOpenAI
    from litseg_nb.core.paths import outputs_dir

    src = args.books_dir or Path(os.environ.get("LITSEG_DATA_DIR", REPO.parent / "shared" / "data")) / "gutenberg"
    books = sorted(src.glob("*.txt"))[:args.books]
    if not books:
        sys.exit(f"no *.txt books in {src}")
    work = Path(tempfile.mkdtemp(prefix="bench_ray_segment_"))
    folder = work / "books"
    folder.mkdir()
    for b in books:  # a folder of just these books (links: nothing copied)
        (folder / b.name).symlink_to(b.resolve())
    tables = outputs_dir(args.profile) / "tables"  # before the runs' own outputs folder is set
    os.environ["LITSEG_OUTPUTS_DIR"] = str(work / "outputs")
    t0 = time.perf_counter()
    for attempt in range(3):  # Ray gives a local raylet 30 s to register: a busy machine may need another go
        try:
            ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            if ray.is_initialized():
                ray.shutdown()
            if attempt == 2:
                raise
    startup = time.perf_counter() - t0
    attempts = attempt + 1
    rows = []
    try:
        with FakeOpenAI("hang", hang_s=args.reply_s) as srv:
            methods = {"token": ["--method", "token"],
                       "litseg (fake server)": ["--method", "litseg", "--llm-backend", "openai", "--base-url", srv.url,
                                                "--llm-model", "fake-model"]}
            for name, extra in methods.items():
                base = ["segment", str(folder), "--profile", args.profile, "--max-units", str(args.max_units), *extra]
                key = name.split()[0]
                s1, rc1 = _run(base, work / f"{key}-one", work / f"cache-{key}-one")
                s2, rc2 = _run(base + ["--ray", "--ray-actors", str(args.cpus)] if "litseg" in name else base + ["--ray"],
                               work / f"{key}-ray", work / f"cache-{key}-ray")
                same = _same(work / f"{key}-one", work / f"{key}-ray")
                for how, s, rc in (("one process", s1, rc1), (f"--ray (local, {args.cpus} CPUs)", s2, rc2)):
                    rows.append({"method": name, "run": how, "books": len(books), "max_units": args.max_units,
                                 "seconds": round(s, 1), "books/min": round(60 * len(books) / s, 2), "exit": rc,
                                 "outputs identical": same})
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = list(rows[0])
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(r[k]) for k in head) + " |" for r in rows]
    note = (f"profile {args.profile}; books: {', '.join(b.name for b in books)} ({src}); the fake server answers each "
            f"request after {args.reply_s} s; local cluster start-up {startup:.1f} s in {attempts} attempt(s) (not in the --ray rows); "
            f"{os.cpu_count()} CPUs, load average {load:.1f} at the end")
    tables.mkdir(parents=True, exist_ok=True)
    with open(tables / "bench_ray_segment.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=head)
        w.writeheader()
        w.writerows(rows)
    (tables / "bench_ray_segment.md").write_text("\n".join(md) + f"\n\n{note}\n", encoding="utf-8")
    print("\n".join(md))
    print(note)
    print(f"[bench] written: {tables / 'bench_ray_segment.csv'}, {tables / 'bench_ray_segment.md'}")


if __name__ == "__main__":
    main()
