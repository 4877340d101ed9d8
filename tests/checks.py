"""The unit-coverage check the structure tests share."""
from __future__ import annotations

from typing import Sequence

from litseg_nb.core.schema import Unit
from litseg_nb.preprocess.headings import Span


def check_unit_coverage(text: str, paragraphs: Sequence[Span], units: Sequence[Unit],
                        dropped: Sequence[Sequence] = ()) -> None:
    """Raise if units overlap, leave a narrative character uncovered or misplace a sentence; only the
    ``dropped`` ``(start, end, why)`` spans (the report's) may lie outside the units."""
    allowed = sorted((int(d[0]), int(d[1])) for d in dropped)

    def outside(a: int, b: int) -> str:
        for s, e in allowed:
            if e <= a or s >= b:
                continue
            rest = text[a:s] if s > a else ""
            a = max(a, e)
            if rest.strip():
                return rest
        return text[a:b] if a < b else ""

    pos = 0
    for u in units:
        gap = outside(pos, u.start)
        if gap.strip():
            raise AssertionError(f"unit {u.unit_id}: text before it is in no unit: {gap.strip()[:60]!r}")
        if u.start < pos:
            raise AssertionError(f"unit {u.unit_id} overlaps the previous unit")
        for s in u.sentences:
            if not u.start <= s.start < s.end <= u.end:
                raise AssertionError(f"unit {u.unit_id}: sentence {s.index} outside the unit")
        pos = u.end
    rest = outside(pos, len(text))
    if rest.strip():
        raise AssertionError(f"text after the last unit is in no unit: {rest.strip()[:60]!r}")
