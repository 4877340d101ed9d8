"""Checks the tests share: unit coverage (structure tests) and overlapping text in figures."""
from __future__ import annotations

from typing import Any, Sequence

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


def _drawn_tick_labels(fig) -> tuple[set[int], list[Any]]:
    """(ids of all tick-label texts, the tick labels actually drawn: inside the view limits)."""
    from matplotlib.axis import Tick

    all_ids = set()
    for tick in fig.findobj(Tick):
        all_ids.update((id(tick.label1), id(tick.label2)))
    drawn = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            eps = 1e-9 * max(1.0, abs(hi - lo))
            for ticks in (axis.get_major_ticks(len(axis.get_majorticklocs())),
                          axis.get_minor_ticks(len(axis.get_minorticklocs()))):
                for tick in ticks:
                    if lo - eps <= tick.get_loc() <= hi + eps:
                        drawn += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    return all_ids, drawn


def _visible_texts(fig, renderer) -> list[tuple[str, Any]]:
    """(description, bbox) of every drawn, non-empty text artist of ``fig``."""
    from matplotlib.text import Text

    tick_ids, drawn_ticks = _drawn_tick_labels(fig)
    artists = [a for a in fig.findobj(Text) if id(a) not in tick_ids] + drawn_ticks
    out = []
    seen = set()
    for artist in artists:
        if id(artist) in seen or not artist.get_visible() or not artist.get_text().strip():
            continue
        seen.add(id(artist))
        try:
            bb = artist.get_window_extent(renderer)
        except (RuntimeError, ValueError):
            continue
        if bb.width <= 0 or bb.height <= 0:
            continue
        out.append((artist.get_text().strip().replace("\n", " ")[:60], bb))
    return out


def text_overlaps(fig, tolerance_px: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of visible texts in ``fig`` whose boxes overlap by more than ``tolerance_px``."""
    fig.canvas.draw()
    items = _visible_texts(fig, fig.canvas.get_renderer())
    pairs = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            a, b = items[i][1], items[j][1]
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > tolerance_px and h > tolerance_px:
                pairs.append((items[i][0], items[j][0]))
    return pairs
