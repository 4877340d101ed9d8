"""Section planning: from accepted headings to narrative and non-narrative paragraph ranges."""
from __future__ import annotations

import bisect
import re
from collections import Counter
from itertools import groupby
from dataclasses import dataclass, field
from typing import Sequence

from .detect import detect_headings
from .headings import (_NN, _SPECIAL_RE, CONTAINER_GAP_WORDS, CONTAINER_KINDS, FRONT_MATTER, FRONT_NARRATIVE_WORDS,
                       RANKS, Heading, Span, StructureReport, _INITIAL_RE, _is_heading_shaped, _prose_words,
                       _classify, _signature_author, _signature_name,
                       _norm_title, _strip_decor, _title_like, _SMALL_WORDS)
from ..core.schema import word_count


_CREDIT_LINE_RE = re.compile(r"^(?:by|with|illustrat|translat|edit|dedicat|this\s+is\s+dedicat|author)\w*\b", re.I)
LONG_FRONT_WORDS = 500  # prose before a contents list or preface this long is a unit, not front matter
_OPENING_SPECIALS = ("preface", "introduction", "foreword", "prologue", "proem", "prelude", "introductory",
                     "epistle", "prefatory")


@dataclass
class _Section:
    first_para: int
    title: str
    end_para: int = -1  # exclusive; -1: up to the next section
    narrative: bool = True
    headed: bool = True  # starts with a heading paragraph (not: narrative before the first heading)
    subs: list[tuple[int, str]] = field(default_factory=list)  # (paragraph, title) of sections inside


def _ends(secs: list[_Section], n: int) -> list[int]:
    return [s.first_para for s in secs[1:]] + [n]


def _parents(items: list[tuple[int, list[Heading]]]) -> list[bool]:
    """An item is a parent when the next narrative heading is inner to it (a higher rank); a
    special (preface) or non-narrative heading is never one."""
    pairs = zip((group[-1] for _, group in items), (group[0] for _, group in items[1:]))  # (item, next item)
    return [h.kind not in ("special", "nonnarrative", "resume") and g.kind not in _NN and g.kind != "special"
            and g.rank > h.rank for h, g in pairs] + [False]


def _walk(items, is_parent: list[bool], paras: list[str], para_words: list[int],
          sub_paras: frozenset[int] = frozenset()) -> list[_Section]:
    """Sections in heading order: parents open (a parent with a long introduction is a unit of its
    own), headings glued to the next one wait for it, titles carry their open parents."""
    n = len(paras)
    sections: list[_Section] = []
    stack: list[Heading] = []  # open parents
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
            prev = next((x for x in reversed(sections) if x.narrative), None)
            sections.append(_Section(p, prev.title) if prev else _Section(p, FRONT_MATTER, narrative=False))
            continue
        # pop parents of equal or higher rank number (siblings, inner levels)
        stack = [s for s in stack if s.rank < h.rank] if h.kind != "special" else []
        nxt = items[i + 1][0] if i + 1 < len(items) else n
        if is_parent[i]:
            stack.extend(group)
            if sum(para_words[p + 1:nxt]) > CONTAINER_GAP_WORDS and not all(g.kind == "title" for g in group):
                sections.append(_Section(p, " / ".join(s.title for s in stack)))
                pending = []
            else:
                pending.append((p, group))
            continue
        glued = i + 1 < len(items) and items[i + 1][1][0].kind not in _NN
        if glued and nxt == p + 1 and group[-1].kind not in ("title",):
            pending.append((p, group))  # "I" over "Introduction": one heading
            continue
        if glued and group[-1].kind in CONTAINER_KINDS and sum(para_words[p + 1:nxt]) <= CONTAINER_GAP_WORDS:
            pending.append((p, group))  # "VOL. I." right before "PREFACE": one unit
            continue
        title = " / ".join([s.title for s in stack] + [g.title for gr in pending for g in gr[1]
                                                        if g not in stack] + [g.title for g in group])
        # a short subtitle paragraph right after the heading joins its title
        q = p + 1
        if (q < n and q not in item_paras and q not in sub_paras and _is_heading_shaped(paras[q]) and "\n" not in paras[q]
                and para_words[q] <= 12 and _title_like(paras[q]) and not re.search(r"[,;:]$", paras[q].strip())
                and group[-1].kind not in ("title", "numbered", "special")):
            title = f"{title} {_strip_decor(paras[q])}"
        sections.append(_Section(pending[0][0] if pending else p, title))
        pending = []
    if pending:
        sections.append(_Section(pending[0][0], " / ".join(g.title for _, gr in pending for g in gr)))
    return sections


def _front_matter(sections: list[_Section], paras: list[str], whole_title: str,
                  report: StructureReport) -> list[_Section]:
    """Narrative prose before the first narrative section becomes a unit: after the last contents list or
    non-narrative section when it holds :data:`FRONT_NARRATIVE_WORDS` prose words, before them only when long
    (:data:`LONG_FRONT_WORDS`), titled by the heading-shaped lines right above it; the report says which."""
    n = len(paras)
    first_narr = next((s.first_para for s in sections if s.narrative), n)
    in_nn: set[int] = set()
    nn_ends = []
    for s, e in zip(sections, _ends(sections, n)):
        if not s.narrative and s.title != FRONT_MATTER:
            in_nn.update(range(s.first_para, e))
            nn_ends.append(e)
    # prose before a contents list or a non-narrative section, or before a preface, is front matter
    scan_from = max([e for e in nn_ends if e <= first_narr]
                    + [x.first_para for x in sections if not x.narrative and x.first_para < first_narr] + [0])
    first_sec = next((x for x in sections if x.narrative), None)
    m = _SPECIAL_RE.match(first_sec.title.split(" / ")[-1]) if first_sec is not None else None
    if m and m.group("kw").lower() in _OPENING_SPECIALS:
        scan_from = first_narr  # what precedes a preface is not the story (a POSTSCRIPT follows one)

    def prose(a: int, b: int) -> tuple[int | None, int]:
        ks = [k for k in range(a, b) if k not in in_nn and _prose_words(paras[k])]
        return (ks[0] if ks else None), sum(_prose_words(paras[k]) for k in ks)

    front_start, front_words = prose(scan_from, first_narr)
    inserted: set[int] = set()
    early_start, early_words = prose(0, scan_from)
    report.front_prose_words = front_words + early_words
    if front_start is not None and front_words >= FRONT_NARRATIVE_WORDS:
        # the end of a contents list above that prose ("Front matter" up to it) is where the unit starts
        marker = next((x.first_para for x in sections if x.title == FRONT_MATTER and not x.narrative
                       and scan_from <= x.first_para <= front_start), front_start)
        sections.insert(0, _Section(marker, whole_title, headed=False))
        inserted.add(marker)
        report.front_matter = True
        report.front_decision = (f"{front_words} prose words before the first heading: a unit "
                                 f"(at least {FRONT_NARRATIVE_WORDS})")
    long_run = _long_run(paras, in_nn, early_start, scan_from, whole_title) if early_start is not None else None
    story = None
    if long_run is None and early_start is not None and early_words >= FRONT_NARRATIVE_WORDS:
        story = _long_run(paras, in_nn, early_start, scan_from, whole_title, FRONT_NARRATIVE_WORDS)
        if story is not None and not _reads_as_story(paras, in_nn, story[0], scan_from):
            story = None
    kept = long_run or story
    if kept is not None:
        start, title, run = kept
        sections.insert(0, _Section(start, title, headed=title != whole_title))
        inserted.add(start)
        report.front_matter = True
        why = (f"long prose (at least {LONG_FRONT_WORDS} in one run) is kept as a unit" if long_run is not None else
               "read as story (quoted speech, no word about the book, its author or readers): kept as a unit")
        report.front_decision = f"{run} prose words before the contents/preface: {why} ({title[:40]!r})"
    elif early_words and not report.front_decision:
        report.front_decision = (f"{early_words} prose words before the contents/preface: front matter "
                                 f"(no run of {LONG_FRONT_WORDS})")
    # a "Front matter" marker (the end of a contents list) where the long-prose unit starts is void
    sections = [s for s in sections if not (s.title == FRONT_MATTER and not s.narrative and s.first_para in inserted)]
    sections.sort(key=lambda s: s.first_para)
    return sections


_META_RE = re.compile(r"\b(?:books?|author\w*|edition\w*|readers?|publish\w*|translat\w*|volumes?|copyright|"
                      r"printed|dedicat\w*|acknowledg\w*|chapters?|preface|introduction|series|tales?|stor(?:y|ies)|"
                      r"poems?|verses?|pages?|work)\b", re.I)
_SPEECH_RE = re.compile(r"[“\"][^“”\"]{2,200}?[,!?]?[”\"],?\s+(?:said|asked|cried|replied|answered|exclaimed|"
                        r"whispered|shouted|called|went on|continued)\b|\b(?:said|asked|cried|replied)\s+\w+,?\s+[“\"]",
                        re.I)


def _reads_as_story(paras: list[str], in_nn: set[int], lo: int, hi: int) -> bool:
    """Prose before a contents list that is the story's opening, not a blurb, dedication or note:
    at least two quoted speeches (``"...," said she``) and not one word about books, authors,
    editions, readers, tales or pages (a publisher's note, a dedication and a preface all have one)."""
    text = " ".join(paras[k] for k in range(lo, hi) if k not in in_nn and _prose_words(paras[k]))
    return len(_SPEECH_RE.findall(text)) >= 2 and not _META_RE.search(text)


def _long_run(paras: list[str], in_nn: set[int], lo: int, hi: int, whole_title: str,
              min_words: int = LONG_FRONT_WORDS) -> tuple[int, str, int] | None:
    """The first run of at least ``min_words`` prose words in paragraphs ``[lo, hi)`` outside non-narrative
    sections: ``(start, title, words)``, starting at the (up to two) title-like lines right above it."""
    k = lo
    while k < hi:
        if k in in_nn or not _prose_words(paras[k]):
            k += 1
            continue
        j, run = k, 0
        while j < hi and j not in in_nn and (_prose_words(paras[j]) or not _is_heading_shaped(paras[j])):
            run += _prose_words(paras[j])
            j += 1
        if run >= min_words:
            # walk up over the title lines (at most two) and the credit lines between them and the
            # text ("DERELICT" / "By A. Writer" / "Illustrated by ..."); a credit above the title ends it
            top, titles, q = k, [], k - 1
            while q >= 0 and k - q <= 4 and q not in in_nn and not _prose_words(paras[q]) \
                    and _is_heading_shaped(paras[q]) and len(titles) < 2:
                if _CREDIT_LINE_RE.match(paras[q]):
                    if titles:
                        break
                elif paras[q].isupper() or _title_like(paras[q]):
                    titles.insert(0, paras[q])
                    top = q
                else:
                    break
                q -= 1
            title = " ".join(_strip_decor(" ".join(titles)).split()) if titles else whole_title
            return top, title, run
        k = j + 1
    return None


_PREFACE_TITLE_RE = re.compile(r"^(?:the\s+)?(?:author[’']?s\s+)?(?:introduction|introductory|preface|prefatory|foreword)\b",
                               re.I)
_BY_LINE_RE = re.compile(r"^by\b.{0,60}$", re.I)
_FIRST_PERSON_RE = re.compile(r"\b(?:I|me|my|myself|mine)\b")


def _signature_lines(paras: list[str], a: int, e: int) -> list[str]:
    """The last lines of the section ``paras[a:e]``, where its signature is, without a title page set after
    it (``THE HOUSE OF THE SEVEN GABLES`` / ``by`` / ``Nathaniel Hawthorne``: the title is no signature)."""
    lines = [ln.strip() for p in paras[max(a + 1, e - 6):e] for ln in p.split("\n") if ln.strip()]
    by = next((i for i in range(len(lines) - 1, max(len(lines) - 5, -1), -1) if _BY_LINE_RE.match(lines[i])), None)
    if by is not None:
        top = by
        while top > 0 and by - top < 3 and not _prose_words(lines[top - 1]) and word_count(lines[top - 1]) <= 8 \
                and not _INITIAL_RE.search(lines[top - 1]) and (lines[top - 1].isupper() or _title_like(lines[top - 1])):
            top -= 1
        lines = lines[:top]
    return lines


def _foreign_prefaces(sections: list[_Section], paras: list[str], author: str | None,
                      report: StructureReport) -> None:
    """A preface, introduction or introductory note by someone else than the author is not narrative: signed by
    another name (unless an introduction never names the author: a fictional editor's framing, a unit, and the
    report says so), or unsigned and speaking of the author (the author's surname at least twice, more often
    than ``I``/``my``: an editor's note)."""
    surname = re.findall(r"[A-Za-z][\w'’-]+", author)[-1] if author and re.search(r"[A-Za-z]{2}", author) else None
    total = sum(len(p.split()) for p in paras)
    for s, e in zip(sections, _ends(sections, len(paras))):
        if not s.narrative or not s.headed:
            continue
        if any(h.value is not None and h.kind not in CONTAINER_KINDS for h in _classify(paras[s.first_para])):
            break  # the book's numbered units have begun: an "Introductory" chapter among them is no preface
        if not _PREFACE_TITLE_RE.match(s.title.split(" / ")[-1]):
            continue
        if sum(len(p.split()) for p in paras[s.first_para:e]) * 2 > total:
            continue  # a "preface" holding most of the book is never dropped (see _preface_end)
        tail = _signature_lines(paras, s.first_para, e)
        signed = _signature_author(author, tail)
        body = " ".join(paras[s.first_para + 1:e])
        if signed is None and surname and sum(len(p.split()) for p in paras[s.first_para:e]) <= SWALLOW_WORDS:
            named = len(re.findall(rf"\b{re.escape(surname)}\b", body))
            if named >= 2 and len(_FIRST_PERSON_RE.findall(body)) < named:
                report.level_notes.append(f"{s.title!r} is unsigned and speaks of the author ({surname!r} {named} "
                                          "times, more than I/my): an editor's note, not narrative")
                s.narrative = False
            continue
        if signed is False:
            unnamed = surname and not re.search(rf"\b{re.escape(surname)}\b", body, re.I)
            if unnamed and re.match(r"^introduction\b", s.title.split(" / ")[-1], re.I):
                report.level_notes.append(f"{s.title!r} is signed by someone else than the author but never "
                                          f"names {surname}: a framing introduction, kept as a unit")
                continue
            # a preface that is part of the fiction: signed by one of the story's people (the
            # signer's surname recurs in the narrative after it) and never naming the author
            signer = _signer_surname(tail)
            if unnamed and signer and re.search(rf"\b{re.escape(signer)}\b", " ".join(paras[e:]), re.I):
                report.level_notes.append(f"{s.title!r} is signed by {signer!r}, a name of the story, and never "
                                          f"names {surname}: a preface that is part of the fiction, kept as a unit")
                continue
            s.narrative = False


def _signer_surname(lines: Sequence[str]) -> str | None:
    """The last name (three letters or more, not initials) of a preface's signature line."""
    for ln in list(reversed([x for x in lines if x.strip()]))[:4]:
        t = _signature_name(ln)
        if t is not None:
            if any(w.lower() in _SMALL_WORDS for w in t.replace(".", " ").split()):
                return None  # "THE VOYAGE OF THE BEAGLE": the book's title set again, not a signature
            names = re.findall(r"[A-Za-z][a-z'’-]{2,}|[A-Z][A-Z'’-]{2,}", t)
            return names[-1] if names else None
    return None


_RULE_RE = re.compile(r"^[\s*.·•_—–=~-]{3,}$")  # "* * *", "-----", ". . . ."
_DATE_LINE_RE = re.compile(r"\b(?:1[5-9]\d\d|20\d\d)\.?$")  # "London, May 1850."
SWALLOW_WORDS = 5000  # an opening preface holding more than this (and most of the book) swallowed it


def _preface_end(sections: list[_Section], paras: list[str], para_words: list[int], whole_title: str,
                 report: StructureReport) -> list[_Section]:
    """An opening preface holding more than :data:`SWALLOW_WORDS` words and most of the narrative ends at the
    first cue after its first prose paragraph (a signature or dated line, a rule, the book's title); the rest is
    a unit titled by the book. Without a cue it stays one unit; the report says which."""
    i = next((i for i, s in enumerate(sections) if s.narrative), None)
    if i is None:
        return sections
    s = sections[i]
    m = _SPECIAL_RE.match(s.title.split(" / ")[-1])
    if not m or m.group("kw").lower() not in _OPENING_SPECIALS:
        return sections
    ends = _ends(sections, len(paras))
    e = ends[i]
    words = sum(para_words[s.first_para:e])
    total = sum(sum(para_words[x.first_para:y]) for x, y in zip(sections, ends) if x.narrative)
    if words <= SWALLOW_WORDS or words < 0.8 * total:
        return sections
    title_key = _norm_title(whole_title)
    seen_prose = False
    for k in range(s.first_para + 1, e - 1):
        p = paras[k].strip()
        if _prose_words(p):
            seen_prose = True
            continue
        if not seen_prose or not p:
            continue
        lines = [ln.strip() for ln in p.split("\n") if ln.strip()]
        cue = None
        if _RULE_RE.match(p):
            cue = "a rule"
        elif title_key and _norm_title(p) == title_key:
            cue = "the book's title"
        elif len(lines) <= 2 and word_count(p) <= 8 and (
                (word_count(lines[-1]) <= 5 and re.fullmatch(r"[A-Z][A-Za-z.\s'’-]*", lines[-1])
                 and (lines[-1].isupper() or "." in lines[-1])) or _DATE_LINE_RE.search(lines[-1])):
            cue = f"a signature or date line {lines[-1][:30]!r}"
        if cue is None:
            continue
        start = k if cue == "the book's title" else k + 1
        while start < e and not paras[start].strip():
            start += 1
        if start >= e or sum(para_words[start:e]) < 0.5 * words:
            continue  # a cue inside the preface: the narrative after it would be too short
        report.preface_decision = (f"the opening {s.title!r} held {words} of {total} narrative words; it "
                                   f"ends at {cue} (paragraph {k}) and the rest is a unit titled by the book")
        sections.insert(i + 1, _Section(start, whole_title, headed=cue == "the book's title"))
        return sections
    report.preface_decision = (f"the opening {s.title!r} holds {words} of {total} narrative words; no "
                               "end cue found: kept as one unit")
    return sections


def _whole_when_headless(secs: list[_Section], paras: list[str], para_words: list[int],
                         whole_title: str) -> list[_Section]:
    """No narrative heading: the whole narrative is one unit from its first paragraph of text: prose, or a line
    no title page has (a quoted line of dialogue: an opening scene in short speeches)."""
    if any(s.narrative for s in secs):
        return secs
    start = next((k for k, p in enumerate(paras) if _prose_words(p) or not _is_heading_shaped(p)), 0)
    if sum(para_words[start:]) < FRONT_NARRATIVE_WORDS:
        start = 0
    keep = [s for s in secs if not s.narrative and s.first_para > start and s.title != FRONT_MATTER]
    return [_Section(start, whole_title, headed=False)] + keep


def _merge_empty(secs: list[_Section], paras: list[str], para_words: list[int]) -> list[_Section]:
    """A heading with no text under it ("Volume II." on a title page, a repeated book title) is not
    a unit: before the narrative it is front matter, later it joins the next unit."""
    n = len(paras)
    ends = _ends(secs, n)
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
    return merged or secs


def _ranges(secs: list[_Section], n: int) -> tuple[list[_Section], list[tuple[int, int, str]]]:
    """One section per start paragraph (a narrative one wins), then narrative ranges and dropped ones."""
    by_start: dict[int, _Section] = {}
    for s in sorted(secs, key=lambda x: x.first_para):
        if s.first_para not in by_start or s.narrative:
            by_start[s.first_para] = s
    secs = list(by_start.values())
    dropped: list[tuple[int, int, str]] = []
    if secs[0].first_para > 0:
        dropped.append((0, secs[0].first_para, "front matter"))
    narrative: list[_Section] = []
    for s, e in zip(secs, _ends(secs, n)):
        if s.narrative:
            narrative.append(_Section(s.first_para, s.title, e))
        else:
            dropped.append((s.first_para, e, s.title))
    return narrative, sorted(dropped)


def plan_sections(text: str, paragraphs: Sequence[Span], report: StructureReport | None = None,
                  whole_title: str = "Whole text", author: str | None = None,
                  use_structure: bool = True) -> tuple[list[_Section], list[tuple[int, int, str]]]:
    """Narrative sections ``(first_para, title)`` and dropped paragraph ranges ``(a, b, why)``."""
    report = report if report is not None else StructureReport()
    para_words = [word_count(text[a:b]) for a, b in paragraphs]
    paras = [text[a:b] for a, b in paragraphs]
    sub_heads: list[Heading] = []
    heads = detect_headings(text, paragraphs, report, sub_heads) if use_structure else []
    secs: list[_Section] = []
    if heads:  # headings on one paragraph (act + scene) form one item ``(first_para, headings)``
        items = [(p, list(g)) for p, g in groupby(sorted(heads, key=lambda h: (h.para, h.rank)), lambda h: h.para)]
        secs = _walk(items, _parents(items), paras, para_words, frozenset(h.para for h in sub_heads))
        secs = _front_matter(secs, paras, whole_title, report)
        _foreign_prefaces(secs, paras, author, report)
        secs = _preface_end(secs, paras, para_words, whole_title, report)
    secs = _whole_when_headless(secs, paras, para_words, whole_title)
    secs = _merge_empty(secs, paras, para_words)
    narrative, dropped = _ranges(secs, len(paragraphs))
    report.heading_kinds = dict(Counter(h.kind for h in heads))
    first_seen = list(dict.fromkeys(h.kind for h in heads if h.kind not in _NN and h.kind != "special"))
    report.levels = sorted(first_seen, key=lambda k: (RANKS[k], first_seen.index(k)))
    starts = [s.first_para for s in narrative]
    for h in sub_heads:  # each section heading goes on the unit that holds its paragraph
        i = bisect.bisect_right(starts, h.para) - 1
        if i >= 0 and h.para < narrative[i].end_para:
            narrative[i].subs.append((h.para, " ".join(_strip_decor(h.title).split())))
    return narrative, dropped
