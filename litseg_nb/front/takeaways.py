"""What a notebook's numbers say, computed from its own tables (never typed into markdown).

:func:`best_per_metric` reads a results table (one row per method, or per method and dataset, ...)
and gives, per metric, the best row, the runner-up and the margin between them; ``"max"`` metrics
are better high (MRR, F1), ``"min"`` ones better low (boundary similarity, seconds); ``"largest"`` and
``"smallest"`` rank a quantity that is neither good nor bad (mean tokens per chunk). Rows with no
value for a metric are left out of that metric and counted. :func:`format_takeaways` turns the
result into a few printed lines under the run's label (profile, models, data), which is how every
notebook closes (``RunContext.takeaways``).

Example: methods ``a`` (MRR 0.5), ``b`` (0.25), ``c`` (no value) give for ``{"MRR": "max"}`` one row
``best=a, value=0.5, runner_up=b, runner_up_value=0.25, margin=0.25, n_compared=2, n_missing=1``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd

# direction -> (sort ascending, what the direction means, the word for the top row)
_DIRECTIONS = {"max": (False, "higher is better", "best"), "min": (True, "lower is better", "best"),
               "largest": (False, "largest first", "largest"), "smallest": (True, "smallest first", "smallest")}
COLUMNS = ["metric", "direction", "best", "value", "runner_up", "runner_up_value", "margin", "n_compared",
           "n_missing"]


def _cols(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _name(row: pd.Series, by: list[str]) -> str:
    return " / ".join(str(row[c]) for c in by)


def best_per_metric(table: pd.DataFrame, metrics: Mapping[str, str], by: str | Sequence[str] = "method",
                    group: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Per ``group`` (e.g. dataset) and metric: the best row named by ``by``, its value, the runner-up.

    ``metrics`` maps a column to ``"max"`` or ``"min"``. A metric or ``by``/``group`` column the
    table lacks is an error naming it (a renamed column would otherwise drop a takeaway silently).
    Ties for the best are listed together (``"a, b"``).
    """
    by_c, group_c = _cols(by), _cols(group)
    if not by_c:
        raise ValueError("best_per_metric: 'by' names no column")
    bad = {m: d for m, d in metrics.items() if d not in _DIRECTIONS}
    if bad:
        raise ValueError(f"best_per_metric: direction must be one of {', '.join(_DIRECTIONS)}, got {bad}")
    missing = [c for c in [*by_c, *group_c, *metrics] if c not in table.columns]
    if missing:
        raise KeyError(f"best_per_metric: table has no column {missing}; it has {list(table.columns)}")
    rows: list[dict[str, Any]] = []
    groups = table.groupby(group_c, sort=False, dropna=False) if group_c else [((), table)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric, direction in metrics.items():
            values = pd.to_numeric(part[metric], errors="coerce")
            ok = part[values.notna()].assign(_v=values[values.notna()])
            ascending, meaning, _ = _DIRECTIONS[direction]
            row = {**dict(zip(group_c, key)), "metric": metric, "direction": meaning,
                   "best": None, "value": math.nan, "runner_up": None, "runner_up_value": math.nan,
                   "margin": math.nan, "n_compared": int(len(ok)), "n_missing": int(len(part) - len(ok))}
            if len(ok):
                ordered = ok.sort_values("_v", ascending=ascending, kind="stable")
                top = ordered["_v"].iloc[0]
                tied = ordered[ordered["_v"] == top]
                rest = ordered[ordered["_v"] != top]
                row["best"] = ", ".join(_name(r, by_c) for _, r in tied.iterrows())
                row["value"] = float(top)
                if len(rest):
                    row["runner_up"] = _name(rest.iloc[0], by_c)
                    row["runner_up_value"] = float(rest["_v"].iloc[0])
                    row["margin"] = abs(float(top) - row["runner_up_value"])
            rows.append(row)
    return pd.DataFrame(rows, columns=[*group_c, *COLUMNS])


def _fmt(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def takeaway_lines(best: pd.DataFrame) -> list[str]:
    """One sentence per row of :func:`best_per_metric`'s frame."""
    group_c = [c for c in best.columns if c not in COLUMNS]
    lines = []
    for _, r in best.iterrows():
        where = " / ".join(str(r[c]) for c in group_c)
        head = f"[{where}] " if where else ""
        if pd.isna(r["best"]):
            lines.append(f"{head}{r['metric']}: no value in any row ({r['n_missing']} row(s) empty)")
            continue
        word = "best" if r["direction"].endswith("is better") else r["direction"].split()[0]
        names = str(r["best"]).split(", ")
        best = ", ".join(names) if len(names) <= 4 else ", ".join(names[:3]) + f" and {len(names) - 3} more"
        text = f"{head}{r['metric']} ({r['direction']}): {word} {best} = {_fmt(r['value'])}"
        if not pd.isna(r["runner_up"]):
            text += f", next {r['runner_up']} = {_fmt(r['runner_up_value'])} (margin {_fmt(r['margin'])})"
        elif r["n_compared"] > 1:
            text += " (all rows tie)"
        text += f"; {r['n_compared']} compared"
        if r["n_missing"]:
            text += f", {r['n_missing']} without a value"
        lines.append(text)
    return lines


def format_takeaways(best: pd.DataFrame, title: str, label: str) -> str:
    """The takeaways as printed: a title, the label they hold for, one line per metric."""
    return "\n".join([title, f"  ({label})", *(f"  - {line}" for line in takeaway_lines(best))])
