"""The unit level: chapters, not the numbered sections inside them.

The paper isolates "top-level narrative units (e.g., chapters, acts, scenes, sections, cantos, or
titled episodes)" (§3.1.2) and its prompts read ``[Chapter Text Content]``: the unit is the
*chapter-like* level — a chapter inside a BOOK/PART, a story in a collection, an act of a play.
Headings below it (bare numerals ``1``/``II.``, numbered titles ``1. THE FIRST WEEK``, scenes,
``SECTION 3``) are **sections**: they are not units; they are recorded on their unit
(:attr:`litseg_nb.core.schema.Unit.sections`) and are the preferred cut points when a unit longer than
``max_unit_words`` is split recursively.

The rule walks the accepted headings in order and keeps the *open unit* (the last unit-level
heading):

* a container (``VOLUME``/``BOOK``/``PART``), a special (``PREFACE``, ``INTRODUCTION``, ... never a
  parent) or a non-narrative heading closes the open unit;
* with no open unit, a heading opens one (it is a unit, or a parent of units if the planner finds
  chapters under it: a story title over ``CHAPTER I``);
* a heading of a section kind (numeral, numbered title, scene, ``SECTION``) is a section of the open
  unit when it is inner to it (a higher rank: numerals under ``CHAPTER III``, scenes under ``ACT I``,
  numerals under a story's title), when the open unit is listed by the contents and it is not (the
  level the contents lists is the chapter level), or when it is of the open unit's kind but numbered
  in another style (``1.``, ``2.`` inside ``I. TITLE``, ``II. TITLE``: the outer series is the one
  the book starts with);
* anything else is a sibling unit and becomes the open unit.

One exception keeps a book's own title from swallowing the book: when a single title heading would
hold every section of the book (the novel's title set again as a heading, then ``I``, ``II``, ...),
it is a parent and its sections are the units.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .headings import _NN, Heading

SECTION_KINDS = frozenset({"numeral", "numbered", "scene", "section"})
_CLOSERS = frozenset({"volume", "book", "part"}) | _NN


def _style(h: Heading) -> str:
    t = h.title.lstrip("[(_* ")
    return "arabic" if t[:1].isdigit() else "roman"


@dataclass
class LevelDecision:
    """What the unit level is and why (kept in the structure report)."""

    unit_kinds: list[str] = field(default_factory=list)
    section_kinds: list[str] = field(default_factory=list)
    sections: int = 0
    notes: list[str] = field(default_factory=list)


def chapter_level(heads: list[Heading], toc_paras: set[int]) -> tuple[list[Heading], list[Heading], LevelDecision]:
    """Split the accepted headings into unit/parent headings and section headings (see module doc)."""
    keep: list[Heading] = []
    subs: list[tuple[Heading, Heading]] = []  # (section, its unit heading)
    first_style: dict[str, str] = {}
    why: dict[str, str] = {}
    open_unit: Heading | None = None
    for i, h in enumerate(heads):
        if h.kind in _CLOSERS:
            open_unit = None
            keep.append(h)
            continue
        if open_unit is not None and open_unit.kind == "special":
            # a preface is never a parent: only a run of bare numerals that starts at 1 and ends
            # before the book's own headings (``INTRODUCTION`` / I / II / III, then the chapters)
            # divides it; numerals that run to the end of the book are its chapters
            if h.kind == "numeral" and (h.value == 1 or bool(subs) and subs[-1][1] is open_unit):
                rest = next((g for g in heads[i + 1:] if g.kind not in ("numeral", "special") and g.kind not in _NN),
                            None)
                if rest is not None:
                    subs.append((h, open_unit))
                    why.setdefault("numeral", f"a run of numerals divides the {open_unit.title!r} before "
                                              "the book's own headings")
                    continue
            keep.append(h)
            open_unit = h
            first_style.setdefault(h.kind, _style(h))
            continue
        if open_unit is not None and h.kind in SECTION_KINDS:
            reason = None
            if h.rank > open_unit.rank:
                reason = f"inner to {open_unit.kind}"
            elif h.rank == open_unit.rank and open_unit.kind not in SECTION_KINDS:
                reason = f"numbered inside a {open_unit.kind} heading (the keyword level is the chapter level)"
            elif open_unit.para in toc_paras and h.para not in toc_paras:
                reason = f"not in the contents, which lists the {open_unit.kind} level"
            elif (h.kind == open_unit.kind and first_style.get(h.kind)
                  and _style(h) != first_style[h.kind] == _style(open_unit)):
                reason = f"numbered in another style than the {open_unit.kind} series"
            if reason is not None:
                subs.append((h, open_unit))
                why.setdefault(h.kind, reason)
                continue
        first_style.setdefault(h.kind, _style(h))
        keep.append(h)
        open_unit = h
    decision = LevelDecision()
    holders = {id(u): u for _, u in subs}
    if len(holders) == 1 and subs:
        (u,) = holders.values()
        units_at_level = [h for h in keep if h.kind == u.kind and h.kind not in _CLOSERS]
        if u.kind == "title" and len(units_at_level) == 1 and len(subs) >= 2:
            decision.notes.append(f"the title heading {u.title!r} holds every section of the book: it is the "
                                  "book's title, a parent, and its sections are the units")
            restored = sorted(keep + [s for s, _ in subs], key=lambda h: (h.para, h.rank))
            return restored, [], _describe(restored, [], decision, {})
    parts = _titled_parts(keep, subs)
    if parts:
        decision.notes.append(f"{len(parts)} word headings ({', '.join(repr(u.title) for u in parts)}) each hold "
                              f"a run of at least {PART_MIN_CHAPTERS} numerals restarting at 1: they are parts, "
                              "parents, and their numerals are the chapters (the units)")
        moved = {id(s) for s, u in subs if id(u) in {id(p) for p in parts}}
        restored = sorted(keep + [s for s, _ in subs if id(s) in moved], key=lambda h: (h.para, h.rank))
        rest = [s for s in subs if id(s[0]) not in moved]
        return restored, [s for s, _ in rest], _describe(restored, [s for s, _ in rest], decision, why)
    return keep, [s for s, _ in subs], _describe(keep, [s for s, _ in subs], decision, why)


PART_MIN_CHAPTERS = 5  # numerals under each word heading for it to be a part of chapters (#36)
PART_MAX_PARTS = 4  # more word headings than this, each with numerals: a collection of stories


def _titled_parts(keep: list[Heading], subs: list[tuple[Heading, Heading]]) -> list[Heading]:
    """Word headings that are a novel's parts, not stories (issue #36): a book in two to
    :data:`PART_MAX_PARTS` word headings (a title in capitals, no ``PART``), each holding a run of at
    least :data:`PART_MIN_CHAPTERS` bare numerals that restarts at 1, and no other word heading.
    A story collection has more stories, or stories with a few numbered sections each
    (Wharton's ``THE BOLTED DOOR`` I-VII among ten stories: the stories stay the units)."""
    held: dict[int, list[Heading]] = {}
    holder: dict[int, Heading] = {}
    for s, u in subs:
        if s.kind == "numeral" and u.kind == "title":
            held.setdefault(id(u), []).append(s)
            holder[id(u)] = u
    titles = [h for h in keep if h.kind == "title"]
    if not 2 <= len(titles) <= PART_MAX_PARTS or len(held) != len(titles):
        return []
    if any(id(t) not in held for t in titles):
        return []
    for t in titles:
        nums = held[id(t)]
        if len(nums) < PART_MIN_CHAPTERS or nums[0].value != 1:
            return []
    return titles


def _describe(keep: list[Heading], subs: list[Heading], d: LevelDecision, why: dict[str, str]) -> LevelDecision:
    d.unit_kinds = list(dict.fromkeys(h.kind for h in keep if h.kind not in _NN and h.kind != "special"))
    if d.unit_kinds:
        d.notes.insert(0, f"unit level: {' > '.join(d.unit_kinds)} (containers are parents; a special such as "
                          "a preface is a unit of its own, never a parent)")
    d.section_kinds = list(dict.fromkeys(h.kind for h in subs))
    d.sections = len(subs)
    for kind in d.section_kinds:
        d.notes.append(f"{kind} headings are sections, not units: {why.get(kind, '')}")
    return d
