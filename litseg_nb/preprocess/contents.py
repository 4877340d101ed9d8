"""Contents lists: finding them, reading their entries and matching the entries to body headings
(in linear time, through a dictionary)."""
from __future__ import annotations

import bisect
import re

from .headings import (CONTAINER_KINDS, _CONTENTS_RE, StructureReport, _classify, _keyword, _norm_title, _NN,
                       _strip_decor, _strip_leader, _strip_number, _words)


def _contents_blocks(paras: list[str]) -> list[tuple[int, int, list[str]]]:
    """``(header_para, end_para_exclusive, entries)`` of each contents list.

    The list runs from its header over short paragraphs (one entry per line) and ends at prose, at
    another list's header (``ILLUSTRATIONS``) or at the first body heading that repeats an entry.
    """
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
            long_entry = _words(paras[j]) <= 60 and _keyword(first_line.split(" ", 2)[0] + " " + (first_line.split(" ", 2) + ["", ""])[1]) is not None
            if any(len(ln) > 110 or _words(ln) > 18 for ln in lines) and not long_entry:
                break  # prose: the list is over
            if len(lines) == 1 and re.match(r"^(?:list\s+of|illustrations|plates)\b", first_line, re.I):
                break  # "ILLUSTRATIONS" list follows
            keys = _body_keys(paras[j])
            nxt_words = _words(paras[j + 1]) if j + 1 < len(paras) else 0
            starts_body = (len(lines) == 1 and nxt_words >= 50 and "\n" not in paras[j + 1]
                           and bool(_classify(paras[j])))  # a heading followed by prose ("PREFACE")
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
        # then the story): the "entries" are that heading and its title line, not a list (issue #36)
        first_entry = _classify(paras[i + 1]) if i + 1 < j and "\n" not in paras[i + 1] else []
        if (first_entry and first_entry[0].kind not in _NN and first_entry[0].kind != "special"
                and j - (i + 1) <= 2 and j < len(paras) and _words(paras[j]) >= 50 and "\n" not in paras[j]
                and "\n" not in paras[i]):
            entries, j = [], i + 1
        out.append((i, j, entries))
        i = max(j, i + 1)
    return out


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
    for head, end, entries in blocks:
        if len(entries) < 2:
            continue
        report.toc_entries += len(entries)
        pos = end
        for entry in entries:
            hit = None
            variants = [entry, _strip_number(entry), _drop_article(_strip_number(entry)),
                        re.sub(r"\s+(?:[ivxlc]+|\d+)$", "", entry)]  # "the mixer i" -> "the mixer"
            for key in dict.fromkeys(variants):
                if len(key) < 2:
                    continue
                cands = index.get(key, [])
                j = bisect.bisect_left(cands, pos)
                if j < len(cands) and (hit is None or cands[j] < hit):
                    hit = cands[j]
            if hit is None:  # "THE BOX TUNNEL BY CHARLES READE" -> "THE BOX TUNNEL"
                words = entry.split()
                for n in range(len(words) - 1, 1, -1):
                    if n < 3 and words[n] not in ("from", "by"):  # "KINDNESS REWARDED, from ..."
                        continue
                    cands = index.get(" ".join(words[:n]), [])
                    j = bisect.bisect_left(cands, pos)
                    if j < len(cands):
                        hit = cands[j]
                        break
            if hit is not None:
                found[hit] = entry
                report.toc_matched += 1
                pos = hit + 1
    return found


def _implicit_contents(paras: list[str], shaped: list[bool], limit: int) -> list[tuple[int, int, list[str]]]:
    """A list of short lines near the start (no CONTENTS header) whose lines recur as headings."""
    out = []
    for i in range(min(limit, len(paras))):
        lines = [ln.strip() for ln in paras[i].split("\n") if ln.strip()]
        if len(lines) >= 3 and all(len(ln) <= 90 and _words(ln) <= 14 for ln in lines):
            out.append((i, i + 1, [_norm_title(_strip_decor(ln)) for ln in lines]))
    return out
