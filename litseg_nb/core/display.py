"""What a notebook shows of a run's results. A figure: at most :data:`MAX_SERIES` series, the anchor methods
first, then the best of the rest; methods whose values coincide share one series; what is left out is named
under the figure. A table: at most :data:`MAX_COLUMNS` columns, the paper's. The saved CSV keeps everything."""
from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence

#: the most columns a table shown in a notebook has (its CSV has them all)
MAX_COLUMNS = 12
#: the most series (lines, bar rows, tick rows) one panel draws
MAX_SERIES = 8
#: always shown where present: the paper's two methods, its strongest baseline (LumberChunker, §4.4) and
#: the reference of notebook 05's paired comparisons (LangChain's recursive splitter)
ANCHOR_METHODS = ("litseg", "litseg-lite", "lumber", "recursive")


def pick_series(scores: Mapping[str, float], anchors: Sequence[str] = ANCHOR_METHODS, n: int = MAX_SERIES,
                higher_is_better: bool = True) -> tuple[list[str], list[str]]:
    """``(shown, left_out)`` of the methods of ``scores``: the ``anchors`` present (in their order), then the
    rest by score, best first (a missing score last; ties keep the order of ``scores``), ``n`` in all; the
    methods left out in the order of ``scores``."""
    if n < 1:
        raise ValueError(f"pick_series: n must be >= 1, got {n}")
    names = list(scores)
    first = [a for a in anchors if a in scores][:n]

    def key(m: str) -> tuple[bool, float, int]:
        v = scores[m]
        missing = v is None or (isinstance(v, float) and math.isnan(v))
        return missing, 0.0 if missing else (-v if higher_is_better else v), names.index(m)

    rest = sorted((m for m in names if m not in first), key=key)
    shown = first + rest[: n - len(first)]
    return shown, [m for m in names if m not in shown]


def group_identical(values: Mapping[str, Hashable]) -> list[list[str]]:
    """The methods of ``values`` grouped by equal value (first appearance order): one series per group."""
    groups: dict[Hashable, list[str]] = {}
    for m, v in values.items():
        groups.setdefault(v, []).append(m)
    return list(groups.values())


def pick_groups(values: Mapping[str, Hashable], scores: Mapping[str, float],
                anchors: Sequence[str] = ANCHOR_METHODS, n: int = MAX_SERIES,
                higher_is_better: bool = True) -> tuple[list[list[str]], list[str]]:
    """:func:`pick_series` over the groups of methods with equal ``values`` (one series each, scored by its
    first method; a group holding an anchor is an anchor): ``(shown groups, methods left out)``."""
    groups = {g[0]: g for g in group_identical(values)}
    first = list(dict.fromkeys(k for a in anchors for k, g in groups.items() if a in g))
    shown, left = pick_series({k: scores[k] for k in groups}, first, n, higher_is_better)
    return [groups[k] for k in shown], [m for k in left for m in groups[k]]


def left_out_note(left_out: Sequence[str], what: str, table: str) -> str:
    """``"not shown: 3 more <what> (a, b, c); every one is in table <table>"``, or ``""``."""
    if not left_out:
        return ""
    return f"not shown: {len(left_out)} more {what} ({', '.join(left_out)}); every one is in table {table}"


def paper_view(table, columns: Sequence[str]):
    """The ``columns`` of ``table`` that it has, in that order: the view a notebook shows (the saved CSV keeps
    every column); more than :data:`MAX_COLUMNS` is an error."""
    if len(columns) > MAX_COLUMNS:
        raise ValueError(f"paper_view: {len(columns)} columns; a shown table has at most {MAX_COLUMNS}")
    return table[[c for c in columns if c in table.columns]]
