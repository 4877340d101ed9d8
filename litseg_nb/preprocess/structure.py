"""Splitting a cleaned book into narrative units (paper §3.1.2) and showing them."""
from __future__ import annotations

import bisect
import html
import math
import re
from itertools import groupby
from typing import Sequence

from ..core.schema import Book, Sentence, Unit, word_count
from .detect import detect_headings  # noqa: F401  (public here)
from .headings import FRONT_MATTER, Span, StructureReport  # noqa: F401  (FRONT_MATTER: public here)
from .sections import _Section, plan_sections
from .sentences import split_paragraph_sentences


def _pack_blocks(blocks: list[list[tuple[int, int, int]]], n: int) -> list[Span]:
    """Pack blocks (a unit's sections) of ``(start, end, words)`` atoms in order into pieces of at most ``n``
    words, cutting between blocks when a block does not fit; a block longer than ``n`` is packed atom by atom
    into pieces of its own."""
    pieces: list[list[float]] = []  # [start, end, words]; words = inf: closed

    def add(a: int, b: int, w: float) -> None:
        if pieces and pieces[-1][2] + w <= n:
            pieces[-1][1:] = [b, pieces[-1][2] + w]
        else:
            pieces.append([a, b, w])

    for atoms in filter(None, blocks):
        w = sum(x[2] for x in atoms)
        if w <= n:
            add(atoms[0][0], atoms[-1][1], w)
            continue
        if pieces:
            pieces[-1][2] = math.inf
        for atom in atoms:
            add(*atom)
        pieces[-1][2] = math.inf
    return [(a, b) for a, b, _ in pieces]


def build_units(book_id: str, text: str, paragraphs: Sequence[Span], max_unit_words: int | None,
                sentence_splitter: str = "nupunkt", sentences: Sequence[Span] | None = None,
                use_structure: bool = True, whole_title: str = "Whole text",
                report: StructureReport | None = None,
                sections: Sequence[tuple[int, str]] | None = None, author: str | None = None) -> list[Unit]:
    """Split a cleaned book into indexed narrative units."""
    if max_unit_words is not None and max_unit_words <= 0:
        raise ValueError(f"book {book_id!r}: max_unit_words must be positive, got {max_unit_words}")
    if not paragraphs or not text.strip():
        raise ValueError(f"book {book_id!r}: no text to split into units")
    report = report if report is not None else StructureReport()
    n = max_unit_words if max_unit_words is not None else math.inf  # None: never split
    para_words = [word_count(text[a:b]) for a, b in paragraphs]

    given = sections is not None
    if given:
        ends = [p for p, _ in sections[1:]] + [len(paragraphs)]
        secs = [_Section(p, t, e) for (p, t), e in zip(sections, ends)]
        if not secs or secs[0].first_para != 0:
            raise ValueError(f"book {book_id!r}: given sections must start at paragraph 0")
        dropped: list[tuple[int, int, str]] = []
        whole = False
    else:
        secs, dropped = plan_sections(text, paragraphs, report, whole_title=whole_title, author=author,
                                      use_structure=use_structure)
        whole = len(secs) == 1 and secs[0].title == whole_title
    report.dropped = [(paragraphs[a][0], paragraphs[b - 1][1], why) for a, b, why in dropped]
    report.dropped_chars = sum(e - s for s, e, _ in report.dropped)
    if sentences is None:  # only the narrative paragraphs are split into sentences
        sentences = []
        for s in secs:
            sentences.extend(split_paragraph_sentences(text, paragraphs[s.first_para:s.end_para],
                                                       splitter=sentence_splitter))
    # cut sentences longer than n words at whitespace (they could not fit any unit otherwise)
    sents: list[Span] = []
    for a, b in sentences:
        if b - a > n and word_count(text[a:b]) > n:  # n characters cannot hold more than n words
            words = [(m.start() + a, m.end() + a) for m in re.finditer(r"\S+", text[a:b])]
            pieces = [(words[i][0], words[min(i + n, len(words)) - 1][1]) for i in range(0, len(words), n)]
            report.split_sentences += len(pieces) - 1
            sents.extend(pieces)
        else:
            sents.append((a, b))
    sent_starts = [a for a, _ in sents]

    units: list[Unit] = []
    para_starts = [a for a, _ in paragraphs]

    def add_unit(uid: str, title: str, start: int, end: int, split: str, subs=()) -> None:
        lo = bisect.bisect_left(sent_starts, start)
        hi = bisect.bisect_left(sent_starts, end)
        ss = tuple(Sentence(i + 1, a, b) for i, (a, b) in enumerate(sents[lo:hi]))
        p_lo = max(bisect.bisect_right(para_starts, start) - 1, 0)
        p_hi = bisect.bisect_left(para_starts, end)
        pspans = tuple((max(a, start), min(b, end)) for a, b in paragraphs[p_lo:p_hi] if a < end and b > start)
        inside = tuple((paragraphs[q][0], t) for q, t in subs if start <= paragraphs[q][0] < end)
        units.append(Unit(book_id=book_id, unit_id=uid, ordinal=len(units), title=title, start=start,
                          end=end, sentences=ss, paragraphs=pspans, split=split, sections=inside))

    def atoms(p: int) -> list[tuple[int, int, int]]:
        """Paragraph ``p`` as one ``(start, end, words)`` atom, or its sentences when longer than n words."""
        a, b = paragraphs[p]
        if para_words[p] <= n:
            return [(a, b, para_words[p])]
        lo, hi = bisect.bisect_left(sent_starts, a), bisect.bisect_left(sent_starts, b)
        return [(sa, sb, word_count(text[sa:sb])) for sa, sb in sents[lo:hi]]

    for k, sec in enumerate(secs):
        p0, p1 = sec.first_para, sec.end_para
        start, end = paragraphs[p0][0], paragraphs[p1 - 1][1]
        uid = f"u{k:04d}"
        words = sum(para_words[p0:p1])
        if words <= n:
            add_unit(uid, sec.title, start, end, "dataset" if given else "whole" if whole else "structure",
                     sec.subs)
            report.structure_units += 1
            continue
        # the unit's sections are the preferred cut points: whole sections are packed while they
        # fit; a section longer than n is packed by paragraphs, then sentences
        cuts = sorted({q for q, _ in sec.subs if p0 < q < p1})
        blocks = [[x for p in range(q0, q1) for x in atoms(p)] for q0, q1 in zip([p0] + cuts, cuts + [p1])]
        pieces = _pack_blocks(blocks, n)
        for j, (a, b) in enumerate(pieces, 1):
            add_unit(f"{uid}.{j}", f"{sec.title} [{j}/{len(pieces)}]", a, b, "recursive", sec.subs)
        report.recursive_units += len(pieces)
    return units


def structure_table(books) -> "pd.DataFrame":  # noqa: F821 - pandas imported lazily
    """Per book: how its units were found (heading kinds and nesting levels, contents entries matched
    in the body) and what was dropped as non-narrative (labels with character counts)."""
    import pandas as pd

    rows = []
    for b in books:
        st = b.meta.get("structure") or {}
        dropped = st.get("dropped") or []
        rows.append({
            "book_id": b.book_id, "title": b.title, "units": len({u.unit_id.split(".")[0] for u in b.units}),
            "levels": " > ".join(st.get("levels") or []) or ("dataset chapters" if b.dataset == "gutenqa" else "none"),
            "heading_kinds": ", ".join(f"{k}:{v}" for k, v in sorted((st.get("heading_kinds") or {}).items())),
            "contents_matched": f"{st.get('toc_matched', 0)}/{st.get('toc_entries', 0)}",
            "sections_in_units": st.get("sections", 0),
            "section_kinds": ", ".join(st.get("section_kinds") or []),
            "level_notes": "; ".join(st.get("level_notes") or []),
            "front_decision": st.get("front_decision", ""),
            "preface_decision": st.get("preface_decision", ""),
            "narrative_before_first_heading": bool(st.get("front_matter")),
            "dropped": "; ".join(f"{d[2][:40]} ({int(d[1]) - int(d[0])} chars)" for d in dropped),
            "dropped_chars": sum(int(d[1]) - int(d[0]) for d in dropped),
            "licence_notes_dropped_chars": (b.meta.get("clean") or {}).get("dropped_chars", 0),
        })
    return pd.DataFrame(rows)


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
    ends = [b for _, b in unit.paragraphs] or [unit.end]  # each sentence in the first paragraph ending after it
    for _, group in groupby([s for s in sentences if s.start < ends[-1]], lambda s: bisect.bisect_right(ends, s.start)):
        spans = (f'<span class="s"><span class="i">{s.index}</span>'
                 + html.escape(book.text[s.start:s.end]).replace("\n", "<br>") + "</span>" for s in group)
        parts.append("<p>" + " ".join(spans) + "</p>")
    parts.append("</div>")
    return "\n".join(parts)
