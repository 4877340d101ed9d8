"""Heading detection: classified paragraphs plus contents-list matches, then the filters (typed contents
lists, numbering continuity, numerals, capital titles) and the unit level (chapters, not the sections inside)."""
from __future__ import annotations

import bisect
import re
from typing import Sequence

from .headings import (_CONTENTS_RE, _NN, _NUMBERED_TITLE_RE, CONTAINER_KINDS, Heading, Span, StructureReport,
                       _classify, _is_heading_shaped, _keyword, _norm_title, _numeral_value, _strip_decor,
                       _strip_leader, _strip_number, _verse_share, quoted_signature)
from ..core.schema import word_count


def detect_headings(text: str, paragraphs: Sequence[Span], report: StructureReport | None = None,
                    sections_out: list[Heading] | None = None) -> list[Heading]:
    """All accepted unit-level and parent headings (narrative and non-narrative), in order, ToC
    entries removed; the section headings inside units (:func:`chapter_level`) go to ``sections_out``."""
    report = report if report is not None else StructureReport()
    paras = [text[a:b] for a, b in paragraphs]
    shaped = [_is_heading_shaped(p) for p in paras]
    words = [word_count(p) for p in paras]
    blocks = _contents_blocks(paras)
    in_block = {k for h, e, _ in blocks for k in range(h + 1, e)}
    if not blocks:  # a list of short lines near the start, without a CONTENTS header, counts if they recur as headings
        for i, p in enumerate(paras[:60]):
            lines = [ln.strip() for ln in p.split("\n") if ln.strip()]
            if len(lines) < 3 or any(len(ln) > 90 or word_count(ln) > 14 for ln in lines):
                continue
            entries = [_norm_title(_strip_decor(ln)) for ln in lines]
            if len(_match_contents(paras, shaped, [(i, i + 1, entries)], StructureReport(), {i})) >= 3:
                blocks, in_block = [(i - 1, i + 1, entries)], {i}
                break
    by_para: dict[int, list[Heading]] = {}
    for k, p in enumerate(paras):
        if shaped[k] and k not in in_block and (hs := _classify(p)):
            by_para[k] = [Heading(k, h.kind, h.title, h.value) for h in hs]
    for h, _, _ in blocks:
        if h not in in_block and h not in by_para and _CONTENTS_RE.match(_strip_decor(paras[h].split("\n")[0])):
            by_para[h] = [Heading(h, "nonnarrative", paras[h].split("\n")[0].strip())]
    matched = _match_contents(paras, shaped, blocks, report, in_block | {h for h, _, _ in blocks})
    if blocks and len(matched) < 2:
        matched = {}
    toc_paras = set(matched)
    for k in matched:
        if (k - 1 in by_para and by_para[k - 1][0].kind not in _NN and k not in by_para
                and not (by_para[k - 1][0].kind in CONTAINER_KINDS and k - 1 not in matched)):
            # the title line under a "CHAPTER IV" heading: part of that heading (but a listed title
            # under an unlisted PART/BOOK heading is that part's first chapter)
            toc_paras.add(k - 1)
            continue
        if k not in by_para or by_para[k][0].kind in ("numeral",):
            title = " ".join(_strip_decor(paras[k]).split())
            m = _NUMBERED_TITLE_RE.match(title)  # "I The Old Pyncheon Family": a numbered title
            v = _numeral_value(m.group("num")) if m else None
            by_para[k] = [Heading(k, "numbered", title, v) if v else Heading(k, "title", title)]
    for _, e, _ in blocks:  # what follows a contents list is decided afresh
        if e < len(paras) and e not in by_para:
            by_para[e] = [Heading(e, "resume", "")]

    heads = [h for k in sorted(by_para) for h in by_para[k]]
    heads = _drop_toc_runs(heads, words, report)
    heads = _continuity(heads, report)
    notes: list[str] = []
    heads = _numeral_policy(heads, paras, words, notes)
    heads = _capital_titles(heads, paras, words, shaped)
    heads, subs = chapter_level(heads, toc_paras, report, notes)
    if sections_out is not None:
        sections_out.extend(subs)
    if report.demoted_toc_headings:
        report.level_notes.append(f"{report.demoted_toc_headings} headings rejected: a contents list typed as "
                                  "headings (no text between them, or their numbering restarts later)")
    if report.rejected_numbering:
        report.level_notes.append(f"{report.rejected_numbering} numbered headings rejected: they break their "
                                  "series (numbers must count up, restarting at 1 under a new parent)")
    report.headings = sum(1 for h in heads if h.kind not in _NN)
    return heads


def _gap(heads: list[Heading], k: int, words: list[int]) -> int:
    """Words between heading ``k`` and the next heading at another paragraph."""
    a = heads[k].para
    nxt = next((h.para for h in heads[k + 1:] if h.para != a), len(words))
    return sum(words[a + 1:nxt])


def _drop_toc_runs(heads: list[Heading], words: list[int], report: StructureReport) -> list[Heading]:
    """Headings typed as a list (almost no text between them) before the same numbering restarts."""
    drop: set[int] = set()
    n = len(heads)
    for k, h in enumerate(heads):
        if h.kind in ("nonnarrative", "special", "resume"):
            continue
        # adjacent same-kind headings with nothing between: a typed contents list
        nxt = next((heads[j] for j in range(k + 1, n) if heads[j].para != h.para), None)
        if nxt is not None and _series(nxt) == _series(h) and nxt.para == h.para + 1 and h.kind != "title":
            drop.add(k)
            continue
        # a short-gapped run whose numbering restarts later without a parent between
        if h.value is not None and _gap(heads, k, words) < 25:
            for j2 in range(k + 1, n):
                g = heads[j2]
                if g.rank < h.rank and g.kind not in ("special", "nonnarrative", "resume"):
                    break
                if _series(g) == _series(h) and g.value is not None and g.value <= h.value:
                    if _gap(heads, j2, words) >= 25 or j2 == n - 1:
                        drop.add(k)
                    break
    # a numbered run whose sections are tiny next to the run that restarts the same numbering
    # (a contents list with summaries under each "CHAPTER II.") is a table of contents
    runs: dict[str, list[list[int]]] = {}
    parent_between: set[int] = set()  # runs (by first index) that start under a new parent
    for k, h in enumerate(heads):
        if h.value is None or k in drop or h.kind in ("title", "nonnarrative", "special", "resume"):
            continue
        rs = runs.setdefault(h.kind, [])
        parent = bool(rs) and any(g.rank < h.rank and g.kind not in ("special", "nonnarrative", "resume")
                                  for g in heads[rs[-1][-1] + 1:k])
        if rs and heads[rs[-1][-1]].value is not None and h.value > heads[rs[-1][-1]].value and not parent:
            rs[-1].append(k)
        else:
            rs.append([k])
            if parent:
                parent_between.add(k)
    for rs in runs.values():
        for a, b in zip(rs, rs[1:]):
            if len(a) < 2 or b[0] in parent_between:
                continue
            size_a = sorted(_gap(heads, k, words) for k in a)[len(a) // 2]
            size_b = sorted(_gap(heads, k, words) for k in b)[len(b) // 2]
            if size_a * 4 < size_b and heads[b[0]].value <= heads[a[0]].value:
                drop.update(a)
    report.demoted_toc_headings += len(drop)
    return [h for k, h in enumerate(heads) if k not in drop]


def _series(h: Heading) -> tuple[str, int, str]:
    """A numbering series: kind, rank and, for numbered titles and bare numerals, the numeral style (``I. TITLE``
    and ``1. Section``, ``I`` and ``1`` are two series: Roman chapters holding Arabic sections)."""
    return h.kind, h.rank, _style(h) if h.kind in ("numbered", "numeral") else ""


def _continuity(heads: list[Heading], report: StructureReport) -> list[Heading]:
    """Numbered headings must continue their series (restart at 1 under a new parent)."""
    last: dict[tuple[str, int, str], int] = {}
    history: dict[tuple[str, int, str], int] = {}  # never reset: chapters numbered on across books
    out: list[Heading] = []
    for k, h in enumerate(heads):
        if h.value is None or h.kind in ("title",):
            if h.kind not in _NN and h.kind != "special":
                last = {key: v for key, v in last.items() if key[1] <= h.rank}  # restarts the series below it
            out.append(h)
            continue
        key = _series(h)
        prev = last.get(key)
        if h.kind == "numeral" and prev is None:
            # "XLI" after "Chapter XL": the chapter series goes on without its keyword
            chap = next((g for g in reversed(out) if g.value is not None and g.kind != "numeral"), None)
            if chap is not None and chap.rank == 3 and chap.value == h.value - 1:
                h = Heading(h.para, chap.kind, h.title, h.value)
                key = _series(h)
                prev = last.get(key)
        first_ok = (h.value == 1 or (h.value == 2 and h.kind != "numeral")
                    or history.get(key) is not None and h.value == history[key] + 1)
        ok = prev is None and first_ok or prev is not None and h.value in (prev, prev + 1, 1)
        if not ok:
            # tolerate a gap (a heading missing in the source) when the next one continues from here
            nxt = next((g for g in heads[k + 1:] if _series(g) == key), None)
            ok = nxt is not None and nxt.value == h.value + 1 and prev is not None and h.value > prev
        if ok:
            last[key] = history[key] = h.value
            last = {key2: v for key2, v in last.items() if key2[1] <= h.rank}
            out.append(h)
        else:
            report.rejected_numbering += 1
    return out


def _numeral_policy(heads: list[Heading], paras: list[str], words: list[int],
                    notes: list[str] | None = None) -> list[Heading]:
    """Bare numerals: units unless they number the sections of a poem in a poetry book or short list
    items; numbered titles (``1. The First Point``) between keyword chapters: list items unless
    chapter-sized."""
    if any(h.kind == "numbered" for h in heads) and any(h.rank == 3 and h.kind != "numbered" for h in heads):
        para_of = sorted({h.para for h in heads})
        sizes = sorted(sum(words[h.para + 1:(para_of[j] if j < len(para_of) else len(paras))])
                       for h in heads if h.kind == "numbered" for j in [bisect.bisect_right(para_of, h.para)])
        if sizes[len(sizes) // 2] < 150:
            heads = [h for h in heads if h.kind != "numbered"]
            _note(notes, f"numbered titles rejected as a level: list items between keyword chapters "
                         f"(median {sizes[len(sizes) // 2]} words under them, under 150)")
    if not any(h.kind == "numeral" for h in heads):
        return heads
    verse = _verse_share(paras, words) > 0.5
    # numbered stanzas or list items ("1.", "2." a few lines apart) are not units
    nums = [h for h in heads if h.kind == "numeral"]
    # words up to the next heading, not counting one right under it ("I" over "Introduction"), nor the
    # numerals of the other style inside it (Roman chapters "I" holding Arabic sections "1", "2")
    bounds_of = {style: sorted({g.para for g in heads if g.kind != "numeral" or _style(g) == style}) + [len(paras) + 1]
                 for style in ("roman", "arabic")}

    def size(h: Heading) -> int:
        bounds = bounds_of[_style(h)]
        return sum(words[h.para + 1:bounds[bisect.bisect_right(bounds, h.para + 1)]])

    sizes = [size(h) for h in nums]
    small = {id(h) for h, n in zip(nums, sizes) if n < 150}
    if nums and len(small) * 2 > len(nums):
        heads = [h for h in heads if h.kind != "numeral"]
        _note(notes, f"bare numerals rejected as a level: {len(small)} of {len(nums)} have under 150 words "
                     "under them (stanzas or list items)")
    else:
        # runs of small numbered sections inside a bigger unit
        heads = [h for h in heads if id(h) not in small or h.kind != "numeral"]
    out = []
    parent: Heading | None = None
    for h in heads:
        if h.kind == "numeral":
            if verse and parent is not None and parent.kind in ("title", "numbered"):
                _note(notes, "numerals under a poem's title in a verse book are sections of the poem")
                continue
        elif h.kind not in _NN:
            parent = h
        out.append(h)
    return out


def _capital_titles(heads: list[Heading], paras: list[str], words: list[int], shaped: list[bool]) -> list[Heading]:
    """Inside parts/books that have no child headings, capitalised short lines are the chapters; in a
    poetry book without headings, a capitalised short line over a verse paragraph is a poem's title."""
    def caps(j: int) -> bool:
        return (shaped[j] and "\n" not in paras[j] and paras[j].isupper() and 1 <= words[j] <= 10
                and not re.search(r"[,:;!?]$", paras[j].strip()) and not quoted_signature(paras[j]))

    extra: list[Heading] = []
    if all(h.kind in _NN or h.kind in ("special", "numeral", "volume") for h in heads):
        # only numerals (and a volume or a preface): word headings over restarting chapter numerals
        extra = _capital_part_titles(heads, paras, caps)
    if not extra and sum(1 for h in heads if h.kind not in _NN) < 2 and _verse_share(paras, words) > 0.5:
        poems = [j for j in range(len(paras) - 1) if caps(j) and paras[j + 1].count("\n") >= 2]
        extra = [Heading(j, "title", paras[j].strip()) for j in poems] if len(poems) >= 3 else []
    if not extra and all(h.kind in _NN or h.kind in ("special", "numeral") for h in heads):
        # no headings, or only numerals (a story's numbered sections): capital-line story titles
        extra = _capital_story_titles(heads, paras, words, caps)
    parents = [] if extra else [k for k, h in enumerate(heads) if h.kind in ("part", "book", "volume")]
    for n, k in enumerate(parents):
        a = heads[k].para
        b = heads[parents[n + 1]].para if n + 1 < len(parents) else len(paras)
        if any(a < h.para < b and h.kind not in _NN for h in heads):
            continue
        cands = [j for j in range(a + 1, b) if caps(j)]
        if len(cands) >= 2:
            extra += [Heading(j, "title", paras[j].strip()) for j in cands]
    return sorted(heads + extra, key=lambda h: (h.para, h.rank)) if extra else heads


STORY_WORDS = 500  # median words under a capital-line title for it to be a story title


def _capital_story_titles(heads: list[Heading], paras: list[str], words: list[int], caps) -> list[Heading]:
    """Capital lines over prose (or a numeral) in a book without headings but numerals are story titles when at
    least three divide it into story-sized parts (median >= :data:`STORY_WORDS`, none under 100 words)."""
    first_prose = next((k for k, p in enumerate(paras) if "\n" not in p and words[k] >= 12 and not p.isupper()),
                       len(paras))
    nn = {h.para for h in heads}
    numerals = {h.para for h in heads if h.kind == "numeral"}  # a story's first numbered section
    cands = [j for j in range(max(first_prose - 1, 0), len(paras) - 1)
             if j not in nn and caps(j) and ("\n" not in paras[j + 1] and words[j + 1] >= 12 or j + 1 in numerals)]
    if len(cands) < 3:
        return []
    bounds = cands + [len(paras)]
    # numerals are a story's sections only if they restart at 1 under every title that has them
    # (one series running through the book is its chapters: the capital lines are not titles)
    first_values = [next((h.value for h in heads if h.kind == "numeral" and a < h.para < b), None)
                    for a, b in zip(bounds, bounds[1:])]
    if any(v not in (None, 1) for v in first_values) or numerals and min(numerals) < cands[0]:
        return []
    sizes = sorted(sum(words[a + 1:b]) for a, b in zip(bounds, bounds[1:]))
    if sizes[len(sizes) // 2] < STORY_WORDS or sizes[0] < 100:
        return []
    return [Heading(j, "title", paras[j].strip()) for j in cands]


def _capital_part_titles(heads: list[Heading], paras: list[str], caps) -> list[Heading]:
    """In a book whose only headings are numerals, a capital line right above each of two to four restarting
    ``I`` (each run at least :data:`PART_MIN_CHAPTERS` long) is a part's title (a parent of those chapters)."""
    nums = [h for h in heads if h.kind == "numeral"]
    starts = [i for i, h in enumerate(nums) if h.value == 1]
    headed = {h.para for h in heads}
    out = []
    for n, i in enumerate(starts):
        j = nums[i].para - 1
        if j in headed:
            continue  # "EPILOGUE." / "I.": the numerals of a preface or an epilogue, not a part
        run = (starts[n + 1] if n + 1 < len(starts) else len(nums)) - i
        if run < PART_MIN_CHAPTERS or j < 0 or not caps(j):
            return []
        out.append(Heading(j, "title", paras[j].strip()))
    return out if 2 <= len(out) <= PART_MAX_PARTS else []


def _note(notes: list[str] | None, note: str) -> None:
    if notes is not None and note not in notes:
        notes.append(note)


def _contents_blocks(paras: list[str]) -> list[tuple[int, int, list[str]]]:
    """``(header_para, end_para_exclusive, entries)`` of each contents list: from its header over short
    paragraphs to prose, another list's header or the first body heading that repeats an entry."""
    out = []
    i = 0
    while i < len(paras):
        first = _strip_decor(paras[i].split("\n", 1)[0]).strip()
        if not _CONTENTS_RE.match(first):
            i += 1
            continue
        entries: list[str] = []
        seen: set[str] = set()

        prefixes: set[str] = set()

        entry_para: list[int] = []  # the paragraph of each entry

        def add(lines: list[str], at: int) -> None:
            for ln in lines:
                key = _norm_title(_strip_decor(ln))
                if key and key not in ("page", "chapter", "chap") and not key.isdigit() and key not in seen:
                    entries.append(key)
                    entry_para.append(at)
                    seen.add(key)
                    seen.add(_strip_number(key))
                    ws = key.split()
                    prefixes.update(" ".join(ws[:m]) for m in range(3, len(ws)))

        add([ln for ln in paras[i].split("\n")[1:] if ln.strip()], i)  # entries in the header block
        j = i + 1
        while j < len(paras):
            lines = [_strip_leader(ln).strip() for ln in paras[j].split("\n") if ln.strip()]
            if not lines:
                break
            first_line = _strip_decor(lines[0])
            long_entry = word_count(paras[j]) <= 60 and _keyword(
                first_line.split(" ", 2)[0] + " " + (first_line.split(" ", 2) + ["", ""])[1]) is not None
            if any(len(ln) > 110 or word_count(ln) > 18 for ln in lines) and not long_entry:
                break  # prose: the list is over
            if len(lines) == 1 and re.match(r"^(?:list\s+of|illustrations|plates)\b", first_line, re.I):
                break  # "ILLUSTRATIONS" list follows
            keys = _body_keys(paras[j])
            nxt_words = word_count(paras[j + 1]) if j + 1 < len(paras) else 0
            starts_body = (len(lines) == 1 and nxt_words >= 50 and "\n" not in paras[j + 1]
                           and bool(_classify(paras[j])))  # a heading followed by prose ("PREFACE")
            starts_body = starts_body or len(lines) == 1 and _opens_first_chapter(paras, j)
            if entries and keys and (starts_body or any(k in seen for k in keys)
                                     or "\n" not in paras[j] and keys[0] in prefixes):
                # the first body heading repeats an entry; a numeral/keyword line just before it
                # ("I" over "Introduction") is that heading's first line, not an entry
                # ("CHAPTER I." over "MR. JOHN HARSTON ..." matched by its title only)
                prev = _classify(paras[j - 1]) if j - 1 > i and "\n" not in paras[j - 1] else []
                prev_key = _norm_title(_strip_decor(paras[j - 1]))
                if prev and prev[0].kind not in _NN and keys[0] not in entries and (
                        not starts_body or prev[0].kind == "numeral" or prev_key not in entries):
                    j -= 1
                # a one-line PART/BOOK/VOLUME heading right before that body heading opens the body
                # (the contents listed only the chapters): it is not an entry
                while j - 1 > i and "\n" not in paras[j - 1] and any(
                        h.kind in CONTAINER_KINDS - {"act"} for h in _classify(paras[j - 1])):
                    j -= 1
                    while entry_para and entry_para[-1] >= j:
                        entry_para.pop()
                        entries.pop()
                break
            add(lines, j)
            j += 1
        # an empty contents header over the book's first heading ("Contents" / "Chapter I" / its title,
        # then the story): the "entries" are that heading and its title line, not a list
        first_entry = _classify(paras[i + 1]) if i + 1 < j and "\n" not in paras[i + 1] else []
        if (first_entry and first_entry[0].kind not in _NN and first_entry[0].kind != "special"
                and j - (i + 1) <= 2 and j < len(paras) and word_count(paras[j]) >= 50 and "\n" not in paras[j]
                and "\n" not in paras[i]):
            entries, j = [], i + 1
        out.append((i, j, entries))
        i = max(j, i + 1)
    return out


def _opens_first_chapter(paras: list[str], j: int) -> bool:
    """Paragraph ``j`` is a first chapter's heading (``CHAPTER I``, numbered 1) over prose, with at most one
    short line between them (``It was late.``, a date): the body starts there, not another contents entry."""
    hs = _classify(paras[j])
    if not hs or hs[0].kind in _NN or hs[0].kind == "special" or hs[0].value != 1:
        return False
    k = j + 1
    if k < len(paras) and "\n" not in paras[k] and word_count(paras[k]) < 12 and not _classify(paras[k]):
        k += 1
    return k < len(paras) and "\n" not in paras[k] and word_count(paras[k]) >= 50


def _drop_article(key: str) -> str:
    return re.sub(r"^(?:the|a|an)\s+", "", key)


def _body_keys(para: str) -> list[str]:
    lines = [_strip_decor(ln) for ln in para.split("\n") if ln.strip()]
    keys = [_norm_title(" ".join(lines))]
    if len(lines) > 1:
        keys += [_norm_title(lines[0]), _norm_title(lines[-1])]
    keys += [_strip_number(k) for k in list(keys)]
    keys += [_drop_article(k) for k in list(keys)]
    return [k for k in dict.fromkeys(keys) if k]


def _match_contents(paras: list[str], shaped: list[bool], blocks, report: StructureReport,
                    in_block: set[int]) -> dict[int, str]:
    """Body paragraphs matched by contents entries, in order (one dictionary pass: linear)."""
    index: dict[str, list[int]] = {}
    for k, p in enumerate(paras):
        if shaped[k] and k not in in_block:
            for key in _body_keys(p):
                index.setdefault(key, []).append(k)
    found: dict[int, str] = {}

    def first_from(key: str) -> int | None:  # the first body paragraph with ``key`` at or after ``pos``
        cands = index.get(key, [])
        j = bisect.bisect_left(cands, pos)
        return cands[j] if j < len(cands) else None

    for head, end, entries in blocks:
        if len(entries) < 2:
            continue
        report.toc_entries += len(entries)
        pos = end
        for entry in entries:
            variants = [entry, _strip_number(entry), _drop_article(_strip_number(entry)),
                        re.sub(r"\s+(?:[ivxlc]+|\d+)$", "", entry)]  # "the mixer i" -> "the mixer"
            hit = min((x for key in dict.fromkeys(variants) if len(key) >= 2 and (x := first_from(key)) is not None),
                      default=None)
            if hit is None:  # "THE BOX TUNNEL BY CHARLES READE" -> "THE BOX TUNNEL"; "KINDNESS REWARDED, from ..."
                words = entry.split()
                hit = next((x for n in range(len(words) - 1, 1, -1) if n >= 3 or words[n] in ("from", "by")
                            if (x := first_from(" ".join(words[:n]))) is not None), None)
            if hit is not None:
                found[hit] = entry
                report.toc_matched += 1
                pos = hit + 1
    return found


SECTION_KINDS = frozenset({"numeral", "numbered", "scene", "section"})
_CLOSERS = frozenset({"volume", "book", "part"}) | _NN


def _style(h: Heading) -> str:
    return "arabic" if h.title.lstrip("[(_* ")[:1].isdigit() else "roman"


def chapter_level(heads: list[Heading], toc_paras: set[int], report: StructureReport,
                  notes: list[str]) -> tuple[list[Heading], list[Heading]]:
    """Split the accepted headings into unit/parent headings and section headings (§3.1.2: the unit is the
    chapter-like level); the report gets the levels and ``notes`` followed by why."""
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
    level_notes: list[str] = []
    lifted: set[int] = set()  # unit headings whose sections are the units after all
    holders = {id(u): u for _, u in subs}
    if len(holders) == 1:
        (u,) = holders.values()
        units_at_level = [h for h in keep if h.kind == u.kind and h.kind not in _CLOSERS]
        if u.kind == "title" and len(units_at_level) == 1 and len(subs) >= 2:
            level_notes.append(f"the title heading {u.title!r} holds every section of the book: it is the "
                               "book's title, a parent, and its sections are the units")
            lifted = {id(u)}
    parts = [] if lifted else _titled_parts(keep, subs)
    if parts:
        level_notes.append(f"{len(parts)} word headings ({', '.join(repr(u.title) for u in parts)}) each hold "
                           f"a run of at least {PART_MIN_CHAPTERS} numerals restarting at 1: they are parts, "
                           "parents, and their numerals are the chapters (the units)")
        lifted = {id(p) for p in parts}
    if lifted:
        keep = sorted(keep + [s for s, u in subs if id(u) in lifted], key=lambda h: (h.para, h.rank))
    sections = [s for s, u in subs if id(u) not in lifted]
    report.unit_level = list(dict.fromkeys(h.kind for h in keep if h.kind not in _NN and h.kind != "special"))
    if report.unit_level:
        notes.append(f"unit level: {' > '.join(report.unit_level)} (containers are parents; a special such as "
                     "a preface is a unit of its own, never a parent)")
    report.section_kinds = list(dict.fromkeys(h.kind for h in sections))
    report.sections = len(sections)
    report.level_notes = notes + level_notes + [f"{kind} headings are sections, not units: {why.get(kind, '')}"
                                                for kind in report.section_kinds]
    return keep, sections


PART_MIN_CHAPTERS = 5  # numerals under each word heading for it to be a part of chapters
PART_MAX_PARTS = 4  # more word headings than this, each with numerals: a collection of stories


def _titled_parts(keep: list[Heading], subs: list[tuple[Heading, Heading]]) -> list[Heading]:
    """Word headings that are a novel's parts, not stories: two to :data:`PART_MAX_PARTS` word headings,
    each holding a run of at least :data:`PART_MIN_CHAPTERS` bare numerals restarting at 1."""
    held: dict[int, list[Heading]] = {}
    for s, u in subs:
        if s.kind == "numeral" and u.kind == "title":
            held.setdefault(id(u), []).append(s)
    titles = [h for h in keep if h.kind == "title"]
    if not 2 <= len(titles) <= PART_MAX_PARTS or any(id(t) not in held for t in titles):
        return []
    if any(len(held[id(t)]) < PART_MIN_CHAPTERS or held[id(t)][0].value != 1 for t in titles):
        return []
    return titles
