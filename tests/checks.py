"""Checks the tests share: unit coverage (structure tests), overlapping text in figures and the plumbing an
executed notebook must not show."""
from __future__ import annotations

import json
import re
from pathlib import Path
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


#: at most this many stderr lines per executed notebook (eight notebooks: the 50 lines of a clean run)
MAX_STDERR_LINES = 6
#: a cell's value that is plumbing, not a result: a path, a config object, a figure object, a dict of them
PLUMBING_REPR = re.compile(r"\b(?:Posix|Windows)Path\(|<Figure size [^>]*>|<matplotlib\.|\b[A-Z]\w*Config\(")
#: at most this many columns in a table a notebook shows (the CSV keeps every column)
MAX_SHOWN_COLUMNS = 12
#: a tqdm bar, whatever its description: "12%|███  | 3/25 [00:01<...]"
PROGRESS_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d*|\d+/\d+ \[\d+:\d+")


def executed_output_problems(path: Path, max_stderr_lines: int = MAX_STDERR_LINES) -> list[str]:
    """What a reader of the executed notebook ``path`` should not see, one line each: progress bars, more
    than ``max_stderr_lines`` stderr lines, a path/config/figure repr as a cell's shown value (a figure
    drawn as an image is fine: its plain-text twin is ``<Figure size ...>``), a table of more than
    :data:`MAX_SHOWN_COLUMNS` columns."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    problems, stderr_lines = [], 0
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for k, cell in enumerate(code, 1):
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream" and out["name"] == "stderr":
                lines = [ln for ln in re.split(r"[\r\n]+", "".join(out["text"])) if ln.strip()]
                stderr_lines += len(lines)
                bars = [ln for ln in lines if PROGRESS_BAR.search(ln)]
                if bars:
                    problems.append(f"code cell {k}: progress bar on stderr: {bars[0].strip()[:80]!r}")
            elif out["output_type"] in ("execute_result", "display_data"):
                data = out.get("data", {})
                html = "".join(data.get("text/html", ""))
                head = re.search(r"<thead>.*?<tr[^>]*>(.*?)</tr>", html, re.S)  # a DataFrame's column row
                n_cols = len(re.findall(r"<th\b", head.group(1))) - 1 if head else 0  # the index's cell aside
                if n_cols > MAX_SHOWN_COLUMNS:
                    problems.append(f"code cell {k}: shows a table of {n_cols} columns (at most {MAX_SHOWN_COLUMNS})")
                if any(m.startswith("image/") or m == "text/html" for m in data):
                    continue  # a drawn figure or a rendered table
                plain = "".join(data.get("text/plain", ""))
                hit = PLUMBING_REPR.search(plain)
                if hit:
                    problems.append(f"code cell {k}: shows {hit.group(0)!r} ({plain.strip()[:80]!r})")
    if stderr_lines > max_stderr_lines:
        problems.append(f"{stderr_lines} stderr lines (at most {max_stderr_lines})")
    return problems
