"""Compare the tables of two runs of the notebooks (e.g. a smoke run before and after a refactoring).

    python scripts/compare_runs.py BEFORE/outputs/smoke AFTER/outputs/smoke [--md report.md] \
        [--renamed 06_pairwise_fleiss=05_pairwise_fleiss ...]

For every ``tables/*.csv`` in either run: same file present, same columns, same rows, and the same
values, where numbers are compared with a relative tolerance (``--rtol``, default 1e-9); a table
whose rows match only in another order is reported as such. Columns that measure the machine rather than
the method (seconds, wall, time, finished, per second, tokens/s, latency, ms, load average before/after, RSS,
or a ratio of those) are listed but not compared. Figures are compared by file name only (their pixels carry
timing axes in 08). ``--renamed OLD=NEW`` compares the before run's table or figure ``OLD`` with the
after run's ``NEW`` (a table that moved to another notebook; the line names both). Prints one line per
table and exits 1 when any table differs, 0 otherwise.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import pandas as pd

# columns that measure the machine, not the method: time, throughput, load and memory
TIMING = re.compile(r"(second|wall|time|finished|_s$|_s_|per_s|speedup|ratio|duration|elapsed|tokens/s|latency"
                    r"|(^|_)ms($|_)|load_(average|avg|before|after)|rss)", re.I)


def _timing_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if TIMING.search(str(c))]


def _same_value(a, b, rtol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)
    if pd.isna(a) and pd.isna(b):
        return True
    return a == b


def _same_rows_any_order(a: pd.DataFrame, b: pd.DataFrame, cols: list[str], rtol: float) -> bool:
    """Whether the two tables hold the same rows (over ``cols``) in another order."""
    def key(df):
        return [("\x1f".join(map(str, row))) for row in df[cols].itertuples(index=False)]
    sa = a.assign(_k=key(a)).sort_values("_k", kind="stable").reset_index(drop=True)
    sb = b.assign(_k=key(b)).sort_values("_k", kind="stable").reset_index(drop=True)
    return all(_same_value(x, y, rtol) for c in cols for x, y in zip(sa[c].tolist(), sb[c].tolist()))


def compare_table(before: Path, after: Path, rtol: float = 1e-9) -> tuple[str, str]:
    """(verdict, detail) for one CSV table: "same", "same (timing differs)",
    "same rows (order differs)" or "DIFFERS"."""
    a, b = pd.read_csv(before), pd.read_csv(after)
    if list(a.columns) != list(b.columns):
        return "DIFFERS", f"columns {list(a.columns)} vs {list(b.columns)}"
    if len(a) != len(b):
        return "DIFFERS", f"{len(a)} rows vs {len(b)}"
    timing = set(_timing_columns(a))
    # the rows of a timing table (e.g. a row per notebook with its seconds) are compared on their keys
    diffs = []
    for col in a.columns:
        if col in timing:
            continue
        for i, (x, y) in enumerate(zip(a[col].tolist(), b[col].tolist())):
            if not _same_value(x, y, rtol):
                diffs.append(f"row {i} {col}: {x!r} vs {y!r}")
    if diffs:
        if _same_rows_any_order(a, b, [c for c in a.columns if c not in timing], rtol):
            return "same rows (order differs)", f"{len(diffs)} cell(s) differ in place; sorted, every row matches"
        return "DIFFERS", "; ".join(diffs[:5]) + (f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else "")
    timing_changed = [c for c in sorted(timing) if not all(_same_value(x, y, rtol) for x, y in
                                                             zip(a[c].tolist(), b[c].tolist()))]
    if timing_changed:
        return "same (timing differs)", "timing columns not compared: " + ", ".join(timing_changed)
    return "same", ""


def compare_runs(before: Path, after: Path, rtol: float = 1e-9,
                 renamed: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """One (name, verdict, detail) per table and per figure name of either run; ``renamed`` maps a
    before-run name (stem) to its after-run name."""
    renamed = renamed or {}
    rows = []
    ta = {_after_name(p.name, renamed): p for p in (before / "tables").glob("*.csv")}
    tb = {p.name: p for p in (after / "tables").glob("*.csv")}
    old = {v: k for k, v in renamed.items()}
    for name in sorted(set(ta) | set(tb)):
        shown = f"{old[name[:-4]]}.csv -> {name}" if name[:-4] in old else name
        if name not in ta or name not in tb:
            rows.append((shown, "MISSING", f"only in {'after' if name in tb else 'before'}"))
            continue
        rows.append((shown, *compare_table(ta[name], tb[name], rtol)))
    fa = {_after_name(p.name, renamed) for p in (before / "figures").glob("*.png")}
    fb = {p.name for p in (after / "figures").glob("*.png")}
    for name in sorted(fa ^ fb):
        rows.append((name, "MISSING", f"figure only in {'after' if name in fb else 'before'}"))
    return rows


def _after_name(filename: str, renamed: dict[str, str]) -> str:
    stem, dot, ext = filename.rpartition(".")
    return f"{renamed.get(stem, stem)}{dot}{ext}"


def _renames(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        old, eq, new = pair.partition("=")
        if not eq or not old or not new:
            raise SystemExit(f"compare_runs: --renamed {pair!r}: expected OLD=NEW (table or figure names)")
        out[old.removesuffix(".csv")] = new.removesuffix(".csv")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rtol", type=float, default=1e-9)
    ap.add_argument("--md", type=Path, help="also write the comparison as a Markdown table")
    ap.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW",
                    help="the before run's table or figure OLD is the after run's NEW (repeatable)")
    args = ap.parse_args(argv)
    renamed = _renames(args.renamed)
    for d in (args.before, args.after):
        if not (d / "tables").is_dir():
            print(f"compare_runs: {d}: no tables/ folder (give outputs/<profile> of a run)", file=sys.stderr)
            return 2
    rows = compare_runs(args.before, args.after, args.rtol, renamed)
    for name, verdict, detail in rows:
        print(f"{verdict:22s} {name}" + (f"  [{detail}]" if detail else ""))
    bad = [r for r in rows if r[1] in ("DIFFERS", "MISSING")]
    n_fig = len(list((args.after / "figures").glob("*.png")))
    print(f"{len(rows) - len(bad)} of {len(rows)} tables the same; {len(bad)} differ or are missing; "
          f"{n_fig} figures in the second run")
    if args.md:
        lines = ["| table | verdict | detail |", "|---|---|---|"]
        lines += [f"| {n} | {v} | {d.replace('|', '/')} |" for n, v, d in rows]
        args.md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
