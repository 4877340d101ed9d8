"""Section planning: from accepted headings to narrative and non-narrative paragraph ranges."""
from __future__ import annotations

import re
import bisect
from dataclasses import dataclass, field
from typing import Sequence

from .detect import detect_headings
from .headings import (_NN, _SPECIAL_RE, CONTAINER_GAP_WORDS, FRONT_MATTER, FRONT_NARRATIVE_WORDS, RANKS, Heading,
                       Span, StructureReport, _is_heading_shaped, _prose_words, _signature_author,
                       _strip_decor, _title_like, _words)


@dataclass
class _Section:
    first_para: int
    title: str
    end_para: int = -1  # exclusive; -1: up to the next section
    narrative: bool = True
    headed: bool = True  # starts with a heading paragraph (not: narrative before the first heading)
    subs: list[tuple[int, str]] = field(default_factory=list)  # (paragraph, title) of sections inside


def _sections(text: str, paragraphs: Sequence[Span], heads: list[Heading], para_words: list[int],
              report: StructureReport, whole_title: str, author: str | None = None) -> list[_Section]:
    """Narrative and non-narrative sections from the accepted headings (see module docstring)."""
    paras = [text[a:b] for a, b in paragraphs]
    n = len(paras)
    sections: list[_Section] = []
    stack: list[Heading] = []  # open parents
    narrative_heads = [h for h in heads if h.kind != "nonnarrative"]
    # merge headings on one paragraph (act + scene) and a heading immediately followed by a title
    k = 0
    items: list[tuple[int, list[Heading]]] = []  # (first_para, headings forming one start)
    all_heads = sorted(heads, key=lambda h: (h.para, h.rank))
    while k < len(all_heads):
        group = [all_heads[k]]
        k += 1
        while k < len(all_heads) and all_heads[k].para == group[0].para:
            group.append(all_heads[k])
            k += 1
        items.append((group[0].para, group))
    # which headings are parents: a higher-rank (inner) heading follows before one of equal/lower rank
    ranks = []
    for p, group in items:
        inner = group[-1]
        ranks.append(inner)
    is_parent = [False] * len(items)
    for i, (p, group) in enumerate(items):
        h = group[-1]
        if h.kind in ("special", "nonnarrative", "resume"):
            continue
        for j in range(i + 1, len(items)):
            g = items[j][1][0]
            if g.kind in _NN:
                break
            if g.kind == "special":
                break
            if g.rank <= h.rank:
                break
            is_parent[i] = True
            break
    pending: list[tuple[int, list[Heading]]] = []
    item_paras = {it[0] for it in items}
    for i, (p, group) in enumerate(items):
        h = group[0]
        if h.kind == "nonnarrative":
            stack = [s for s in stack if s.rank < 1]
            sections.append(_Section(p, h.title, narrative=False))
            pending = []
            continue
        if h.kind == "resume":  # the end of a contents list
            if pending or not sections or sections[-1].narrative:
                continue
            if any(x.narrative for x in sections):
                prev = next(x for x in reversed(sections) if x.narrative)
                sections.append(_Section(p, prev.title))
            else:
                sections.append(_Section(p, FRONT_MATTER, narrative=False))
            continue
        # pop parents of equal or higher rank number (siblings, inner levels)
        stack = [s for s in stack if s.rank < h.rank] if h.kind != "special" else []
        if is_parent[i]:
            nxt = items[i + 1][0] if i + 1 < len(items) else n
            gap = sum(para_words[p + 1:nxt])
            stack.extend(group)
            if gap > CONTAINER_GAP_WORDS and not all(g.kind == "title" for g in group):
                title = " / ".join(s.title for s in stack)
                sections.append(_Section(p, title))
                pending = []
            else:
                pending.append((p, group))
            continue
        if (i + 1 < len(items) and items[i + 1][0] == p + 1 and items[i + 1][1][0].kind not in _NN
                and group[-1].kind not in ("title",)):
            pending.append((p, group))  # "I" over "Introduction": one heading
            continue
        if group[-1].is_container and i + 1 < len(items) and items[i + 1][1][0].kind not in _NN:
            nxt = items[i + 1][0]
            if sum(para_words[p + 1:nxt]) <= CONTAINER_GAP_WORDS:
                pending.append((p, group))  # "VOL. I." right before "PREFACE": one unit
                continue
        title = " / ".join([s.title for s in stack] + [g.title for gr in pending for g in gr[1]
                                                        if g not in stack] + [g.title for g in group])
        # a short subtitle paragraph right after the heading joins its title
        q = p + 1
        if (q < n and q not in item_paras and _is_heading_shaped(paras[q]) and "\n" not in paras[q]
                and para_words[q] <= 12 and _title_like(paras[q]) and not re.search(r"[,;:]$", paras[q].strip())
                and group[-1].kind not in ("title", "numbered", "special")):
            title = f"{title} {_strip_decor(paras[q])}"
        start = pending[0][0] if pending else p
        sections.append(_Section(start, title))
        pending = []
    if pending:
        sections.append(_Section(pending[0][0], " / ".join(g.title for _, gr in pending for g in gr)))

    # front matter: narrative prose before the first narrative section
    first_narr = next((s.first_para for s in sections if s.narrative), n)
    nonnarr_spans = []
    for i, s in enumerate(sections):
        if not s.narrative:
            e = sections[i + 1].first_para if i + 1 < len(sections) else n
            nonnarr_spans.append((s.first_para, e))
    in_nn = set()
    nonnarr_spans = [(a, b) for (a, b), x in zip(nonnarr_spans, [x for x in sections if not x.narrative])
                     if x.title != FRONT_MATTER]
    for a, b in nonnarr_spans:
        in_nn.update(range(a, b))
    # prose before a contents list or a non-narrative section, or before a preface, is front matter
    scan_from = max([b for a, b in nonnarr_spans if b <= first_narr]
                    + [x.first_para for x in sections if not x.narrative and x.first_para < first_narr] + [0])
    first_sec = next((x for x in sections if x.narrative), None)
    m = _SPECIAL_RE.match(first_sec.title.split(" / ")[-1]) if first_sec is not None else None
    if m and m.group("kw").lower() in ("preface", "introduction", "foreword", "prologue", "proem", "prelude",
                                       "introductory", "epistle"):
        scan_from = first_narr  # what precedes a preface is not the story (a POSTSCRIPT follows one)
    front_start, front_words = None, 0
    for k in range(scan_from, first_narr):
        if k in in_nn:
            continue
        w = _prose_words(paras[k])
        if w:
            if front_start is None:
                front_start = k
            front_words += w
    if front_start is not None and front_words >= FRONT_NARRATIVE_WORDS:
        sections.insert(0, _Section(front_start, whole_title, headed=False))
        report.front_matter = True
    sections.sort(key=lambda s: s.first_para)
    # non-narrative specials: an introduction/preface signed by someone else than the author
    for i, s in enumerate(sections):
        if s.narrative and re.match(r"^(?:introduction|preface|foreword)\b", s.title.split(" / ")[-1], re.I):
            e = sections[i + 1].first_para if i + 1 < len(sections) else n
            tail = [ln for p in paras[max(s.first_para, e - 3):e] for ln in p.split("\n")]
            if _signature_author(author, tail) is False:
                s.narrative = False
    return sections


def plan_sections(text: str, paragraphs: Sequence[Span], report: StructureReport | None = None,
                  whole_title: str = "Whole text", author: str | None = None,
                  use_structure: bool = True) -> tuple[list[_Section], list[tuple[int, int, str]]]:
    """Narrative sections ``(first_para, title)`` and dropped paragraph ranges ``(a, b, why)``."""
    report = report if report is not None else StructureReport()
    para_words = [_words(text[a:b]) for a, b in paragraphs]
    paras = [text[a:b] for a, b in paragraphs]
    sub_heads: list[Heading] = []
    heads = detect_headings(text, paragraphs, report, author, sub_heads) if use_structure else []
    secs = _sections(text, paragraphs, heads, para_words, report, whole_title, author) if heads else []
    n = len(paragraphs)
    if not any(s.narrative for s in secs):
        # no narrative heading: the whole narrative is one unit from the first prose paragraph
        start = next((k for k in range(n) if _prose_words(text[paragraphs[k][0]:paragraphs[k][1]])), 0)
        if sum(para_words[start:]) < FRONT_NARRATIVE_WORDS:
            start = 0
        keep = [s for s in secs if not s.narrative and s.first_para > start and s.title != FRONT_MATTER]
        secs = [_Section(start, whole_title, headed=False)] + keep
    # a heading with no text under it ("Volume II." on a title page, a repeated book title) is not
    # a unit: before the narrative it is front matter, later it joins the next unit
    ends = [secs[i + 1].first_para if i + 1 < len(secs) else n for i in range(len(secs))]
    merged: list[_Section] = []
    carry: _Section | None = None
    seen_narrative = False
    for s, e in zip(secs, ends):
        if carry is not None and s.narrative:
            s = _Section(carry.first_para, f"{carry.title} / {s.title}")
            carry = None
        b0 = s.first_para + (1 if s.headed else 0)
        body = sum(w for p, w in zip(paras[b0:e], para_words[b0:e]) if w >= 8 or p.count("\n") >= 2)
        if s.narrative and body == 0 and e < n:
            if seen_narrative:
                carry = s
            else:
                merged.append(_Section(s.first_para, FRONT_MATTER, narrative=False))
            continue
        seen_narrative = seen_narrative or s.narrative
        merged.append(s)
    secs = merged or secs
    # one section per start paragraph (a narrative one wins), in order
    by_start: dict[int, _Section] = {}
    for s in sorted(secs, key=lambda x: x.first_para):
        if s.first_para not in by_start or s.narrative:
            by_start[s.first_para] = s
    secs = [by_start[k] for k in sorted(by_start)]
    dropped: list[tuple[int, int, str]] = []
    if secs[0].first_para > 0:
        dropped.append((0, secs[0].first_para, "front matter"))
    narrative: list[_Section] = []
    for i, s in enumerate(secs):
        e = secs[i + 1].first_para if i + 1 < len(secs) else n
        if e <= s.first_para:
            continue
        if s.narrative:
            narrative.append(_Section(s.first_para, s.title, e))
        else:
            dropped.append((s.first_para, e, s.title))
    kinds: dict[str, int] = {}
    for h in heads:
        kinds[h.kind] = kinds.get(h.kind, 0) + 1
    report.heading_kinds = kinds
    first_seen = list(dict.fromkeys(h.kind for h in heads if h.kind not in _NN and h.kind != "special"))
    order = sorted(first_seen, key=lambda k: (RANKS[k], first_seen.index(k)))
    report.levels = order
    _attach_subsections(narrative, sub_heads, paras)
    return narrative, sorted(dropped)


def _attach_subsections(narrative: list[_Section], sub_heads: list[Heading], paras: list[str]) -> None:
    """Record each section heading on the narrative section (unit) that holds its paragraph."""
    starts = [s.first_para for s in narrative]
    for h in sub_heads:
        i = bisect.bisect_right(starts, h.para) - 1
        if i >= 0 and h.para < narrative[i].end_para:
            narrative[i].subs.append((h.para, " ".join(_strip_decor(h.title).split())))
