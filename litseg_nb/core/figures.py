"""Saving figures with their label footer, without overlapping text, atomically.

Every saved figure carries a footer naming profile, models and data (the label). The footer is laid
out *below everything already drawn* (tick labels, axis labels, legends placed outside the axes), in
figure coordinates measured after a draw, wrapped to the width of the drawn content, and the figure
is saved with ``bbox_inches="tight"`` so the canvas grows to hold it: the footer can never cover an
axis label, whatever the figure's size or layout engine.

:func:`text_overlaps` lists pairs of visible text artists whose rendered boxes intersect (tick
labels, axis labels, titles, legends, annotations, the footer); :func:`save_figure` logs a warning
naming them, and the tests call it on every plotting function's output.

:func:`stacked_text_figure` lays blocks of text (a passage, its answer, ...) top to bottom, each under
the measured box of the one before, and sizes the figure to hold them: no block can cover another,
however long a passage or answer is.
"""
from __future__ import annotations

import logging
import textwrap
from pathlib import Path
from typing import Any

from .safe_io import atomic_path

log = logging.getLogger(__name__)

FOOTER_FONTSIZE = 7
FOOTER_GID = "litseg-label-footer"
_PNG_DPI = 150


def _renderer(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def add_label_footer(fig, label: str, fontsize: float = FOOTER_FONTSIZE):
    """Put ``label`` under all drawn content of ``fig`` (wrapped to its width); returns the Text."""
    for t in list(fig.texts):  # saving twice must not stack footers
        if t.get_gid() == FOOTER_GID:
            t.remove()
    renderer = _renderer(fig)
    bbox = fig.get_tightbbox(renderer)  # inches, everything drawn so far
    width_in, height_in = fig.get_figwidth(), fig.get_figheight()
    content_w = max(bbox.width, 0.5 * width_in)
    # average glyph width of the default sans font is about 0.55 em
    chars = max(40, int(content_w * 72 / (fontsize * 0.55)))
    text = "\n".join(textwrap.wrap(label, width=chars, break_on_hyphens=False)) or label
    pad_in = 0.06
    footer = fig.text(bbox.x0 / width_in, (bbox.y0 - pad_in) / height_in, text, fontsize=fontsize,
                      color="0.35", ha="left", va="top", gid=FOOTER_GID)
    return footer


def stacked_text_figure(blocks, width_in: float = 9.5, pad_in: float = 0.1):
    """A figure of text ``blocks`` ``(text, text_kwargs, gap_after_points)`` stacked top to bottom.

    Each block is placed under the rendered box of the block before it (plus its gap) and the figure's
    height is set to the stacked content, so text sizes in points keep the layout at any dpi."""
    import matplotlib.pyplot as plt  # deferred: matplotlib only where a figure is drawn

    fig = plt.figure(figsize=(width_in, 1.0))
    renderer = fig.canvas.get_renderer()
    placed, top_in = [], pad_in
    for text, kwargs, gap_pt in blocks:
        t = fig.text(pad_in / width_in, 0.5, text, ha="left", va="top", **kwargs)
        placed.append((t, top_in))
        top_in += t.get_window_extent(renderer).height / fig.dpi + gap_pt / 72
    height = top_in + pad_in
    fig.set_figheight(height)
    for t, top in placed:
        t.set_y(1.0 - top / height)
    return fig


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
    renderer = _renderer(fig)
    items = _visible_texts(fig, renderer)
    pairs = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            a, b = items[i][1], items[j][1]
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > tolerance_px and h > tolerance_px:
                pairs.append((items[i][0], items[j][0]))
    return pairs


def save_figure_files(fig, stem: Path, label: str) -> dict[str, Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` (label footer, deterministic metadata, atomic)."""
    stem = Path(stem)
    add_label_footer(fig, label)
    overlaps = text_overlaps(fig)
    if overlaps:
        log.warning("figure %s: overlapping text: %s", stem.name,
                    "; ".join(f"{a!r} / {b!r}" for a, b in overlaps[:5]))
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=_PNG_DPI, bbox_inches="tight", pad_inches=0.1, metadata={"Software": None})
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, bbox_inches="tight", pad_inches=0.1,
                    metadata={"Creator": None, "Producer": None, "CreationDate": None})
    return {"png": png, "pdf": pdf}
