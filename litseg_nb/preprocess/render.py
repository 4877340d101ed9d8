"""Rendering a unit with its sentence indices as HTML (for notebook 01 and for learners).

Each sentence is shown with its 1-based index as a badge — exactly the ``[i]`` numbering the LitSeg
prompt receives — and paragraphs stay paragraphs, so a reader can see where the splitter put the
boundaries.
"""
from __future__ import annotations

import html

from ..core.schema import Book, Unit

_STYLE = """
<style>
.litseg-unit {font-family: Georgia, serif; max-width: 46em; line-height: 1.55;}
.litseg-unit h3 {font-family: sans-serif;}
.litseg-unit .meta {font-family: sans-serif; font-size: 0.85em; color: #555;}
.litseg-unit p {margin: 0.6em 0;}
.litseg-unit .s {border-bottom: 1px dotted #bbb;}
.litseg-unit .i {font-family: monospace; font-size: 0.75em; color: #fff; background: #3a6ea5;
                 border-radius: 3px; padding: 0 3px; margin-right: 3px; vertical-align: super;}
</style>
"""


def render_unit_html(book: Book, unit: Unit, max_sentences: int | None = None) -> str:
    """A self-contained HTML fragment showing ``unit`` with numbered sentences per paragraph (the
    unit before segmentation; a LitSeg annotation of it is
    :func:`litseg_nb.litseg.report.render_segments_html`)."""
    sentences = unit.sentences[:max_sentences] if max_sentences else unit.sentences
    parts = [_STYLE, '<div class="litseg-unit">',
             f"<h3>{html.escape(book.title)} — {html.escape(unit.title)}</h3>",
             f'<p class="meta">book <code>{html.escape(book.book_id)}</code>, unit '
             f"<code>{html.escape(unit.unit_id)}</code> ({unit.split}), {unit.n_sentences} sentences, "
             f"characters [{unit.start}, {unit.end}) of the cleaned text"
             + (f"; first {len(sentences)} sentences shown" if len(sentences) < unit.n_sentences else "")
             + "</p>"]
    paragraphs = list(unit.paragraphs) or [(unit.start, unit.end)]
    k = 0
    for a, b in paragraphs:
        chunk = []
        while k < len(sentences) and sentences[k].start < b:
            s = sentences[k]
            text = html.escape(book.text[s.start:s.end]).replace("\n", "<br>")
            chunk.append(f'<span class="s"><span class="i">{s.index}</span>{text}</span>')
            k += 1
        if chunk:
            parts.append("<p>" + " ".join(chunk) + "</p>")
        if k >= len(sentences):
            break
    parts.append("</div>")
    return "\n".join(parts)
