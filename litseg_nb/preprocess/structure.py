"""Structure-driven splitting of a cleaned book into narrative units (paper §3.1.2, issue #9).

Input: the cleaned text and its paragraph spans (see :mod:`litseg_nb.data.gutenberg`). Output:
:class:`~litseg_nb.schema.Unit` records over the book's *narrative* paragraphs, with sentences
indexed 1..N. Non-narrative matter (title pages, contents, editors' and translators' prefaces,
indexes, addenda, notes) is kept in the text but belongs to no unit; it is listed, with character
spans, in :attr:`StructureReport.dropped` and :func:`check_unit_coverage` checks that every other
character is in exactly one unit.

**Headings** are short paragraphs (at most 3 lines, 120 characters, 18 words) that do not start
with a quotation mark, of these kinds, each with a nesting rank (lower = outer):

====================  ====  ===========================================================
kind                  rank  examples
====================  ====  ===========================================================
volume                0     ``VOLUME I``, ``VOL. II.``
book / part           1     ``BOOK I.``, ``PART ONE``, ``FIRST PART``, ``Book the Second``
act                   2     ``ACT I.``, ``FIRST ACT`` (plays)
title                 2     a contents entry found in the body (``THE SISTERS``), a titled
                            part (``THE RED CAPTAIN.—II.``), capitals inside a part
chapter-like          3     ``CHAPTER I``, ``LETTER II.``, ``STAVE I: ...``, ``CANTO IV``,
                            ``LECTURE I``, ``[CHAPTER I]``, ``Purgatorio: Canto I``
numbered title        3     ``I. A SCANDAL IN BOHEMIA``, ``I. LOUISE ... TO RENEE ...``
scene                 4     ``SCENE II.`` (``ACT I. SCENE I.`` is an act and a scene)
numeral               5     a bare ``I``, ``II.``, ``3``
special               -     ``PREFACE``, ``PROLOGUE``, ``EPILOGUE``, ``INTRODUCTION``,
                            ``POSTSCRIPT``, ... (a narrative unit of its own, never a parent)
non-narrative         -     ``CONTENTS``, ``INDEX``, ``ADDENDUM``, ``TRANSLATOR'S PREFACE``,
                            ``EDITOR'S NOTE``, ``Introduction by <name>``, ``FOOTNOTES``, ...
====================  ====  ===========================================================

**Contents-aware search.** A contents block (``CONTENTS``, ``LIST OF CHAPTERS`` ... and its
entries) never yields units. Its entries are normalised (case, accents, punctuation, page numbers)
and looked up, in order, among the short paragraphs after the block through a dictionary (linear
time): a match makes that paragraph a heading (kind ``title`` unless it already has a kind), so
``I. THE OLD PYNCHEON FAMILY`` finds ``I The Old Pyncheon Family``. The load report counts entries
and matches.

**Numbering continuity.** Numbered headings of one kind and rank form series that count up (a
series restarts at one under a new parent or goes on from its last number, as chapters numbered
across books do; a repeated number is kept). A numbered heading that
breaks its series is not a heading (``L. FRANK BAUM`` after nothing numbered). A run of headings
that is followed by a restart of the same numbering without a parent between them, and has almost
no text between its members, is a table of contents typed as headings and is dropped.

**Nesting.** The units are the innermost headings: a heading is a parent when headings of a higher
rank follow it before the next heading of its own or a lower rank. A unit's title carries its
parents (``BOOK I / CHAPTER III``); the text between a parent heading and its first child belongs
to the first child unless it is longer than :data:`CONTAINER_GAP_WORDS` (then the parent's
introduction is a unit of its own). A heading immediately followed by a short title paragraph
takes it into its title. In verse-dominated books (poetry) bare numerals under a title are
sections of one poem, not units; a poetry book without headings gets one unit per capitalised
title over verse. Inside a PART/BOOK without child headings, capitalised short lines are its
chapters. A heading with no text under it (a repeated title, ``Volume II.`` on a title page) is not
a unit.

**Front matter.** Before the first heading, narrative prose (at least :data:`FRONT_NARRATIVE_WORDS`
words in paragraphs that read as prose, outside contents and non-narrative sections) is a unit
titled by the book (``whole_title``), starting at its first prose paragraph; everything else there
is dropped as front matter. A book without headings is one unit (``split="whole"``) over the same
narrative span.

**Recursive splitting.** A unit longer than ``max_unit_words`` (the paper's *n*) is split greedily:
atoms are whole paragraphs, or — for a paragraph longer than *n* — its sentences; atoms are packed
in order while the piece stays within *n* words (``split="recursive"``, ids ``<unit>.<k>``). A
single sentence longer than *n* words is cut at whitespace into pieces of at most *n* words, and the
pieces are indexed as sentences (counted in the unit's sentence list; nothing is lost).
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

from ..schema import Sentence, Unit
from .sentences import split_paragraph_sentences

Span = tuple[int, int]

FRONT_MATTER = "Front matter"
CONTAINER_GAP_WORDS = 150
FRONT_NARRATIVE_WORDS = 150
CONTAINER_KINDS = frozenset({"volume", "book", "part", "act"})

_NUMBER_WORDS = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split())
}
_ORDINALS = {
    w: i for i, w in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
        "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split())
}
_WORDNUM = "|".join(sorted(set(_NUMBER_WORDS) | set(_ORDINALS) | {"last", "final"}, key=len, reverse=True))
_ROMAN = r"[IVXLCDM]+|[ivxlcdm]+"
_NUM = rf"(?:{_ROMAN}|\d{{1,3}}|(?:the\s+)?(?:{_WORDNUM})(?:[\s-](?:{_WORDNUM}))?)"
_KEYWORDS = {
    "chapter": "chapter", "chap": "chapter", "stave": "stave", "letter": "letter", "canto": "canto",
    "scene": "scene", "sc": "scene", "section": "section", "episode": "episode", "story": "story",
    "tale": "tale", "adventure": "adventure", "lecture": "lecture", "essay": "essay", "fytte": "canto",
    "volume": "volume", "vol": "volume", "book": "book", "part": "part", "act": "act", "chapitre": "chapter",
}
RANKS = {"volume": 0, "book": 1, "part": 1, "act": 2, "title": 2, "chapter": 3, "stave": 3,
         "letter": 3, "canto": 3, "section": 3, "episode": 3, "story": 3, "tale": 3, "adventure": 3,
         "lecture": 3, "essay": 3, "numbered": 3, "scene": 4, "numeral": 5, "special": 1,
         "nonnarrative": 1, "resume": 1}
_KW = "|".join(sorted(_KEYWORDS, key=len, reverse=True))
_KEYWORD_RE = re.compile(
    rf"^(?:[\w'’ ]{{1,30}}:\s+)?(?P<kw>{_KW})\.?\s+(?P<num>{_NUM})\b\.?(?P<rest>(?:[\s:.—–-].*)?)$", re.I)
_ORDINAL_KW_RE = re.compile(rf"^(?P<num>(?:the\s+)?(?:{_WORDNUM}))\s+(?P<kw>part|book|volume|act|canto|story)\.?$", re.I)
_SPECIAL_RE = re.compile(
    r"^(?:the\s+)?(?:author[’']?s\s+)?(?P<kw>preface|prologue|epilogue|introduction|conclusion|afterword|"
    r"postscript|foreword|proem|envoi|l[’']envoi|prelude|finale|interlude|introductory|(?:dedicatory\s+)?epistle)"
    r"\b(?P<rest>.*)$", re.I)
_NON_NARRATIVE_RE = re.compile(
    r"^(?:(?:table\s+of\s+)?contents?|list\s+of\s+(?:chapters|illustrations|plates|stories|poems)|"
    r"illustrations|index|glossary(?:\s+of.*)?|addend(?:um|a)|footnotes?|end\s*notes|notes?(?:\s+to\s+.*)?|"
    r"errata|corrigenda|appendix(?:\s+.*)?|bibliography|dedication(?:\s+.*)?|"
    r"(?:list\s+of\s+)?corrections(?:\s+made)?|typographical\s+errors(?:\s+corrected)?|"
    r"advertisements?|(?:other\s+)?books\s+by\s+.*|"
    r"transcriber[’']?s?\s+notes?|(?:translator|editor|preparer|publisher|producer)[’']?s?\s+"
    r"(?:preface|note|notes|introduction|foreword)|editorial\s+note|critical\s+introduction|"
    r"biographical\s+(?:note|sketch|introduction)|credits|dramatis\s+person(?:ae|æ)|"
    r"the\s+persons\s+(?:in|of)\s+the\s+play|the\s+scenes\s+of\s+the\s+play|"
    r"(?:introduction|preface|foreword)\s+(?:by|to\s+the\s+\w+\s+edition)\b.*)[.:]?$", re.I)
_CONTENTS_RE = re.compile(r"^(?:(?:table\s+of\s+)?contents?|list\s+of\s+(?:chapters|stories|poems))[.:]?$", re.I)
_NUMBERED_TITLE_RE = re.compile(rf"^(?P<num>{_ROMAN}|\d{{1,3}})(?:\.|:|\s*[—–-]+)?\s+(?P<rest>\S.{{1,110}})$")
_TITLE_PART_RE = re.compile(rf"^(?P<base>.*?\w.*?)[.,]?\s*[—–-]+\s*(?P<num>{_ROMAN}|\d{{1,3}})\.?$")
_BARE_NUM_RE = re.compile(rf"^(?P<num>{_ROMAN}|[1-9]\d{{0,2}})\.?$")  # not "01" (a figure label)
_QUOTE_START = "“‘\"'«„"
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_NN = frozenset({"nonnarrative", "resume"})
_DECOR_RE = re.compile(r"[_*\[\]{}]")
_SMALL_WORDS = frozenset("a an and as at by for from in into of on or the to with de la le du des el von van".split())


def roman_to_int(s: str) -> int | None:
    s = s.upper()
    if not s or any(ch not in _ROMAN_VALUES for ch in s):
        return None
    total, prev = 0, 0
    for ch in reversed(s):
        v = _ROMAN_VALUES[ch]
        total = total - v if v < prev else total + v
        prev = max(prev, v)
    return total


def _numeral_value(num: str) -> int | None:
    num = num.strip().rstrip(".").lower()
    if num.isdigit():
        return int(num)
    num = re.sub(r"^the\s+", "", num)
    if num in _NUMBER_WORDS:
        return _NUMBER_WORDS[num]
    if num in _ORDINALS:
        return _ORDINALS[num]
    parts = re.split(r"[\s-]+", num)
    if len(parts) == 2 and parts[0] in ("twenty", "twentieth") and (parts[1] in _NUMBER_WORDS or parts[1] in _ORDINALS):
        return 20 + _NUMBER_WORDS.get(parts[1], _ORDINALS.get(parts[1], 0))
    if num in ("last", "final"):
        return None
    return roman_to_int(num)


@dataclass(frozen=True)
class Heading:
    para: int  # paragraph index
    kind: str  # chapter | ... | volume | book | part | act | scene | special | numbered | numeral | title
    title: str
    value: int | None = None  # its number, when numbered

    @property
    def rank(self) -> int:
        return RANKS[self.kind]

    @property
    def is_container(self) -> bool:
        return self.kind in CONTAINER_KINDS


@dataclass
class StructureReport:
    """How a book was split (kept in ``Book.meta['structure']``)."""

    headings: int = 0
    heading_kinds: dict[str, int] = field(default_factory=dict)  # kind -> headings used
    levels: list[str] = field(default_factory=list)  # kinds from outer to inner, e.g. [book, numeral]
    toc_entries: int = 0
    toc_matched: int = 0
    demoted_toc_headings: int = 0
    rejected_numbering: int = 0  # numbered headings that broke their series
    front_matter: bool = False  # narrative before the first heading became a unit
    dropped: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, why): not narrative
    dropped_chars: int = 0
    structure_units: int = 0
    recursive_units: int = 0
    split_sentences: int = 0  # sentences longer than n words cut into pieces


def _strip_leader(s: str) -> str:
    """``"The Shadow of Change . . . . 9"`` -> ``"The Shadow of Change"`` (no regex backtracking)."""
    if "..." not in s and ". ." not in s:
        return s
    t = s.rstrip()
    m = re.search(r"(?:\d+|[ivxlcIVXLC]+)$", t[-12:])
    if m:
        t = t[:len(t) - (len(t[-12:]) - m.start())]
    t2 = t.rstrip(" .")
    return t2 if len(t) - len(t2) >= 3 else s


def _words(s: str) -> int:
    return len(s.split())


def _strip_decor(s: str) -> str:
    """Emphasis and bracket marks off: ``[CHAPTER I] _To Mrs._ SAVILLE`` -> ``CHAPTER I To Mrs. SAVILLE``."""
    return " ".join(_DECOR_RE.sub("", s).split())


def _norm_title(s: str) -> str:
    """Contents/body heading key: no accents, case, punctuation, decoration or page number."""
    s = _strip_leader(s)
    m = re.search(r"[\s.]+(?:\d+|[ivxlc]+)\s*$", s.strip())  # trailing page number (vii, 25) ...
    if m:
        before = s.strip()[:m.start()].split()
        if before and not re.fullmatch(rf"(?:{_KW})\.?", before[-1], re.I):
            s = s.strip()[:m.start()]  # ... but not "Chapter 1"
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).casefold()
    s = re.sub(r"[^\w\s]|_", " ", s)
    return " ".join(s.split())


def _strip_number(key: str) -> str:
    """``chapter iv the escape`` / ``iv the escape`` -> ``the escape`` (keys are normalised)."""
    key = re.sub(rf"^(?:{_KW})\s+", "", key)
    key = re.sub(r"^(?:[ivxlcdm]+|\d+)\s+", "", key)
    return key


_QUOTED_CAPS_RE = re.compile(r"^[“‘\"'«„]+([^“”‘’\"'«»„!?]+?)[”’\"'»]+[.;:,]?$")


def _quoted_title(para: str) -> bool:
    """A whole short line in quotes, in capitals, without ``!``/``?`` (``“POLIKUSHKA;”``): a quoted
    story title, not dialogue (``“Amanda!”``, ``“Come in,” said he.``)."""
    m = _QUOTED_CAPS_RE.match(para.strip())
    if not m:
        return False
    letters = [c for c in m.group(1) if c.isalpha()]
    return len(letters) >= 3 and all(c.isupper() for c in letters)


def _is_heading_shaped(para: str) -> bool:
    lines = para.split("\n")
    return (len(lines) <= 3 and len(para) <= 120 and _words(para) <= 18
            and (para.lstrip()[:1] not in _QUOTE_START or (len(lines) == 1 and _quoted_title(para))))


def _title_like(s: str) -> bool:
    """Capitals or title case: most words of a heading's title start upper-case."""
    words = [w for w in re.findall(r"[^\W\d_][\w'’-]*", s)]
    if not words:
        return False
    caps = sum(1 for w in words if w[0].isupper())
    small = sum(1 for w in words if w.lower() in _SMALL_WORDS)
    return caps >= max(1, (len(words) - small) * 0.6) and words[0][0].isupper()


def _keyword(line: str) -> Heading | None:
    """A keyword heading on one line (``para`` filled in by the caller)."""
    m = _KEYWORD_RE.match(line)
    if m:
        rest = m.group("rest").strip(" .:—–-")
        # "Letter I received ..." is prose: a heading's title is short and starts with a capital
        if rest and (_words(rest) > 14 or not (rest[0].isupper() or rest[0].isdigit() or rest[0] in "(“‘\"'")):
            return None
        value = _numeral_value(m.group("num"))
        if value is None and m.group("num").lower() not in ("last", "final", "the last", "the final"):
            return None
        # "Act I. Scene I." keeps the scene as its own heading (see _classify)
        return Heading(-1, _KEYWORDS[m.group("kw").lower()], line, value)
    m = _ORDINAL_KW_RE.match(line)
    if m:
        return Heading(-1, _KEYWORDS[m.group("kw").lower()], line, _numeral_value(m.group("num")))
    return None


def _classify(para: str) -> list[Heading]:
    """The heading(s) a short paragraph is (empty when it is none); ``para`` index left at -1."""
    lines = [_strip_decor(ln) for ln in para.split("\n")]
    lines = [ln for ln in lines if ln]
    if not lines:
        return []
    first = lines[0]
    full = " ".join(lines)
    if _NON_NARRATIVE_RE.match(first) or (_CONTENTS_RE.match(first)):
        return [Heading(-1, "nonnarrative", full)]
    kw = _keyword(first)
    if kw:
        # a heading paragraph's title: its first line, and a short title line under it
        title = first
        if len(lines) > 1 and _words(lines[1]) <= 12 and _title_like(lines[1]):
            title = f"{first} {lines[1]}"
        # "ACT I. SCENE I." -> an act and a scene
        m = re.search(rf"\b(scene|sc)\.?\s+({_NUM})\b", first[3:], re.I) if kw.kind == "act" else None
        if m:
            cut = 3 + m.start()
            return [Heading(-1, kw.kind, first[:cut].strip(), kw.value),
                    Heading(-1, "scene", title[cut:].strip(), _numeral_value(m.group(2)))]
        return [Heading(-1, kw.kind, title, kw.value)]
    for line in lines[1:]:
        kw = _keyword(line)
        if kw and kw.kind in CONTAINER_KINDS and len(lines) <= 3:
            return [Heading(-1, kw.kind, line, kw.value)]  # "IN THREE VOLUMES." / "VOL. II."
    m = _SPECIAL_RE.match(first)
    if m and first[0].isupper() and (not m.group("rest").strip(" .:") or _words(m.group("rest")) <= 6):
        return [Heading(-1, "special", full)]
    if len(lines) == 1:
        m = _BARE_NUM_RE.match(first)
        if m:
            v = _numeral_value(m.group("num"))
            return [Heading(-1, "numeral", full, v)] if v else []
        m = _TITLE_PART_RE.match(first)
        if (m and _title_like(m.group("base")) and not re.search(r"[\d()]", m.group("base"))
                and _numeral_value(m.group("num"))):
            return [Heading(-1, "title", full, _numeral_value(m.group("num")))]
    m = _NUMBERED_TITLE_RE.match(full)
    if m and _title_like(m.group("rest")) and not re.search(r"[,;]$", full):
        v = _numeral_value(m.group("num"))
        # "I saw him." / "I DESIRE AFFECTIONATELY TO" is prose: a bare "I" needs a dot, colon or dash
        if v and not (m.group("num") in ("I", "i") and not re.match(r"^I\s*[.:—–-]", full, re.I)):
            return [Heading(-1, "numbered", full, v)]
    return []


# ---------------------------------------------------------------- contents
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

        def add(lines: list[str]) -> None:
            for ln in lines:
                key = _norm_title(_strip_decor(ln))
                if key and key not in ("page", "chapter", "chap") and not key.isdigit() and key not in seen:
                    entries.append(key)
                    seen.add(key)
                    seen.add(_strip_number(key))
                    ws = key.split()
                    prefixes.update(" ".join(ws[:m]) for m in range(3, len(ws)))

        add([ln for ln in paras[i].split("\n")[1:] if ln.strip()])  # entries in the header block
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
                break
            add(lines)
            j += 1
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


# ---------------------------------------------------------------- detection
def _verse_share(paras: list[str], words: list[int]) -> float:
    total = sum(words) or 1
    verse = sum(w for p, w in zip(paras, words) if p.count("\n") >= 2)
    return verse / total


def _prose_words(para: str) -> int:
    """Words of a paragraph that reads as prose (not a title-page line, list or heading)."""
    if "\n" in para or _words(para) < 12 or para.isupper():
        return 0
    return _words(para)


def _signature_author(author: str | None, lines: Sequence[str]) -> bool | None:
    """Whether a signature line names the book's author (None: no signature found)."""
    for ln in list(reversed([x for x in lines if x.strip()]))[:4]:
        s = ln.strip().rstrip(".")
        if re.search(r"\d", s) or _SPECIAL_RE.match(s) or _keyword(s):
            continue
        if 1 <= _words(s) <= 5 and re.fullmatch(r"[A-Z][A-Za-z.\s'’-]*", s) and (s.isupper() or "." in s):
            if not author:
                return None
            initials = {w[0].upper() for w in re.findall(r"[A-Za-z]+", author)}
            sig = {w[0].upper() for w in re.findall(r"[A-Za-z]+", s)}
            return bool(sig & initials) and len(sig - initials) <= 1
    return None


def detect_headings(text: str, paragraphs: Sequence[Span], report: StructureReport | None = None,
                    author: str | None = None) -> list[Heading]:
    """All accepted headings (narrative and non-narrative), in order, ToC entries removed."""
    report = report if report is not None else StructureReport()
    paras = [text[a:b] for a, b in paragraphs]
    shaped = [_is_heading_shaped(p) for p in paras]
    words = [_words(p) for p in paras]
    blocks = _contents_blocks(paras)
    in_block = {k for h, e, _ in blocks for k in range(h + 1, e)}
    if not blocks:  # a list of titles without a CONTENTS header counts if its lines recur as headings
        for blk in _implicit_contents(paras, shaped, 60):
            probe = StructureReport()
            if len(_match_contents(paras, shaped, [blk], probe, set(range(blk[0], blk[1])))) >= 3:
                blocks = [(blk[0] - 1, blk[1], blk[2])]
                in_block = set(range(blk[0], blk[1]))
                break
    by_para: dict[int, list[Heading]] = {}
    for k, p in enumerate(paras):
        if shaped[k] and k not in in_block:
            hs = _classify(p)
            if hs:
                by_para[k] = [Heading(k, h.kind, h.title, h.value) for h in hs]
    for h, _, _ in blocks:
        if h not in in_block and h not in by_para and _CONTENTS_RE.match(_strip_decor(paras[h].split("\n")[0])):
            by_para[h] = [Heading(h, "nonnarrative", paras[h].split("\n")[0].strip())]
    matched = _match_contents(paras, shaped, blocks, report, in_block | {h for h, _, _ in blocks})
    matched = {k: v for k, v in matched.items() if not (blocks and blocks[0][0] == 0 and k < 0)}
    if blocks and len(matched) < 2:
        matched = {}
    for k in matched:
        if k - 1 in by_para and by_para[k - 1][0].kind not in _NN and k not in by_para:
            continue  # the title line under a "CHAPTER IV" heading: part of that heading
        if k not in by_para or by_para[k][0].kind in ("numeral",):
            title = " ".join(_strip_decor(paras[k]).split())
            m = _NUMBERED_TITLE_RE.match(title)  # "I The Old Pyncheon Family": a numbered title
            v = _numeral_value(m.group("num")) if m else None
            by_para[k] = [Heading(k, "numbered", title, v) if v else Heading(k, "title", title)]
    for h, e, _ in blocks:  # the contents list itself; what follows it is decided afresh
        for k in range(h + 1, e):
            by_para.pop(k, None)
        if e < len(paras) and e not in by_para:
            by_para[e] = [Heading(e, "resume", "")]

    heads = [h for k in sorted(by_para) for h in by_para[k]]
    heads = _drop_toc_runs(heads, words, report)
    heads = _continuity(heads, report)
    heads = _numeral_policy(heads, paras, words)
    heads = _capital_titles(heads, paras, words, shaped)
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
        j = k + 1
        while j < n and heads[j].para == h.para:
            j += 1
        if j < n and heads[j].kind == h.kind and heads[j].para == h.para + 1 and h.kind not in ("title",):
            drop.add(k)
            continue
        # a short-gapped run whose numbering restarts later without a parent between
        if h.value is not None and _gap(heads, k, words) < 25:
            for j2 in range(k + 1, n):
                g = heads[j2]
                if g.rank < h.rank and g.kind not in ("special", "nonnarrative", "resume"):
                    break
                if g.kind == h.kind and g.value is not None and g.value <= h.value:
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
    out = [h for k, h in enumerate(heads) if k not in drop]
    # a dropped ACT that had a SCENE on the same line: keep the pair consistent
    return out


def _continuity(heads: list[Heading], report: StructureReport) -> list[Heading]:
    """Numbered headings must continue their series (restart at 1 under a new parent)."""
    last: dict[tuple[str, int], int] = {}
    history: dict[tuple[str, int], int] = {}  # never reset: chapters numbered on across books
    out: list[Heading] = []
    for k, h in enumerate(heads):
        if h.value is None or h.kind in ("title",):
            if h.kind not in _NN and h.kind != "special":
                # an outer heading restarts the series below it
                for key in [key for key in last if key[1] > h.rank]:
                    del last[key]
            out.append(h)
            continue
        key = (h.kind, h.rank)
        prev = last.get(key)
        if h.kind == "numeral" and prev is None:
            # "XLI" after "Chapter XL": the chapter series goes on without its keyword
            chap = next((g for g in reversed(out) if g.value is not None and g.kind != "numeral"), None)
            if chap is not None and chap.rank == 3 and chap.value == h.value - 1:
                h = Heading(h.para, chap.kind, h.title, h.value)
                key, prev = (h.kind, h.rank), last.get((h.kind, h.rank))
        first_ok = (h.value == 1 or (h.value == 2 and h.kind != "numeral")
                    or history.get(key) is not None and h.value == history[key] + 1)
        ok = prev is None and first_ok or prev is not None and h.value in (prev, prev + 1, 1)
        if not ok:
            # tolerate a gap (a heading missing in the source) when the next one continues from here
            nxt = next((g for g in heads[k + 1:] if (g.kind, g.rank) == key), None)
            ok = nxt is not None and nxt.value == h.value + 1 and prev is not None and h.value > prev
        if ok:
            last[key] = history[key] = h.value
            for key2 in [key2 for key2 in last if key2[1] > h.rank]:
                del last[key2]
            out.append(h)
        else:
            report.rejected_numbering += 1
    return out


def _numeral_policy(heads: list[Heading], paras: list[str], words: list[int]) -> list[Heading]:
    """Bare numerals: units unless they number the sections of a poem in a poetry book or short list
    items; numbered titles (``1. The First Point``) between keyword chapters: list items unless
    chapter-sized."""
    if any(h.kind == "numbered" for h in heads) and any(h.rank == 3 and h.kind != "numbered" for h in heads):
        para_of = sorted({h.para for h in heads})
        sizes = sorted(sum(words[h.para + 1:(para_of[j] if j < len(para_of) else len(paras))])
                       for h in heads if h.kind == "numbered" for j in [bisect.bisect_right(para_of, h.para)])
        if sizes[len(sizes) // 2] < 150:
            heads = [h for h in heads if h.kind != "numbered"]
    if not any(h.kind == "numeral" for h in heads):
        return heads
    verse = _verse_share(paras, words) > 0.5
    # numbered stanzas or list items ("1.", "2." a few lines apart) are not units
    nums = [h for h in heads if h.kind == "numeral"]
    sizes = []
    para_of = sorted({h.para for h in heads})
    for h in nums:
        j = bisect.bisect_right(para_of, h.para)
        if j < len(para_of) and para_of[j] == h.para + 1:  # "I" over "Introduction"
            j += 1
        nxt = para_of[j] if j < len(para_of) else len(paras)
        sizes.append(sum(words[h.para + 1:nxt]))
    small = {id(h) for h, n in zip(nums, sizes) if n < 150}
    if nums and len(small) * 2 > len(nums):
        heads = [h for h in heads if h.kind != "numeral"]
    else:
        # runs of small numbered sections inside a bigger unit
        heads = [h for h in heads if id(h) not in small or h.kind != "numeral"]
    out = []
    parent: Heading | None = None
    for h in heads:
        if h.kind == "numeral":
            if verse and parent is not None and parent.kind in ("title", "numbered"):
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
                and not re.search(r"[,:;!?]$", paras[j].strip()))

    parents = [k for k, h in enumerate(heads) if h.kind in ("part", "book", "volume")]
    if sum(1 for h in heads if h.kind not in _NN) < 2 and _verse_share(paras, words) > 0.5:
        poems = [j for j in range(len(paras) - 1) if caps(j) and paras[j + 1].count("\n") >= 2]
        if len(poems) >= 3:
            return sorted(heads + [Heading(j, "title", paras[j].strip()) for j in poems], key=lambda h: (h.para, h.rank))
    if not parents:
        return heads
    extra: list[Heading] = []
    for n, k in enumerate(parents):
        a = heads[k].para
        b = heads[parents[n + 1]].para if n + 1 < len(parents) else len(paras)
        if any(a < h.para < b and h.kind not in _NN for h in heads):
            continue
        cands = [j for j in range(a + 1, b) if caps(j)]
        if len(cands) >= 2:
            extra += [Heading(j, "title", paras[j].strip()) for j in cands]
    return sorted(heads + extra, key=lambda h: (h.para, h.rank)) if extra else heads


@dataclass
class _Section:
    first_para: int
    title: str
    end_para: int = -1  # exclusive; -1: up to the next section
    narrative: bool = True
    headed: bool = True  # starts with a heading paragraph (not: narrative before the first heading)


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
    heads = detect_headings(text, paragraphs, report, author) if use_structure else []
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
    return narrative, sorted(dropped)


def _cut_long_sentence(text: str, a: int, b: int, n: int) -> list[Span]:
    """Cut ``text[a:b]`` at whitespace into pieces of at most ``n`` words."""
    words = [(m.start() + a, m.end() + a) for m in re.finditer(r"\S+", text[a:b])]
    return [(words[i][0], words[min(i + n, len(words)) - 1][1]) for i in range(0, len(words), n)]


def _greedy_pieces(atoms: list[tuple[int, int, int]], n: int) -> list[Span]:
    """Pack ``(start, end, words)`` atoms in order into pieces of at most ``n`` words."""
    pieces: list[Span] = []
    cur_start, cur_end, cur_words = None, None, 0
    for a, b, w in atoms:
        if cur_start is not None and cur_words + w > n:
            pieces.append((cur_start, cur_end))
            cur_start, cur_words = None, 0
        if cur_start is None:
            cur_start = a
        cur_end = b
        cur_words += w
    if cur_start is not None:
        pieces.append((cur_start, cur_end))
    return pieces


def build_units(book_id: str, text: str, paragraphs: Sequence[Span], max_unit_words: int,
                sentence_splitter: str = "nupunkt", sentences: Sequence[Span] | None = None,
                use_structure: bool = True, whole_title: str = "Whole text",
                report: StructureReport | None = None,
                sections: Sequence[tuple[int, str]] | None = None, author: str | None = None) -> list[Unit]:
    """Split a cleaned book into indexed narrative units (see module docstring).

    ``sentences`` (spans into ``text``) are computed with ``sentence_splitter`` when not given.
    ``use_structure=False`` skips heading detection (the whole text is one section).
    ``sections`` — ``(first_paragraph, title)`` pairs given by the dataset (GutenQA chapters) —
    replace heading detection; their units get ``split="dataset"`` and nothing is dropped.
    ``author`` (the Gutenberg header's) tells an author's signed preface from an editor's.
    Non-narrative paragraph ranges are recorded in ``report.dropped`` as character spans.
    """
    if max_unit_words <= 0:
        raise ValueError(f"book {book_id!r}: max_unit_words must be positive, got {max_unit_words}")
    if not paragraphs or not text.strip():
        raise ValueError(f"book {book_id!r}: no text to split into units")
    report = report if report is not None else StructureReport()
    n = max_unit_words
    para_words = [_words(text[a:b]) for a, b in paragraphs]

    given = sections is not None
    if given:
        secs = [_Section(p, t) for p, t in sections]
        if not secs or secs[0].first_para != 0:
            raise ValueError(f"book {book_id!r}: given sections must start at paragraph 0")
        for k, s in enumerate(secs):
            s.end_para = secs[k + 1].first_para if k + 1 < len(secs) else len(paragraphs)
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
    # cut sentences longer than n words (they could not fit any unit otherwise)
    sents: list[Span] = []
    for a, b in sentences:
        if b - a > n and _words(text[a:b]) > n:  # n characters cannot hold more than n words
            pieces = _cut_long_sentence(text, a, b, n)
            report.split_sentences += len(pieces) - 1
            sents.extend(pieces)
        else:
            sents.append((a, b))
    sent_starts = [a for a, _ in sents]

    units: list[Unit] = []
    para_starts = [a for a, _ in paragraphs]

    def add_unit(uid: str, title: str, start: int, end: int, split: str) -> None:
        lo = bisect.bisect_left(sent_starts, start)
        hi = bisect.bisect_left(sent_starts, end)
        ss = tuple(Sentence(i + 1, a, b) for i, (a, b) in enumerate(sents[lo:hi]))
        if ss and ss[-1].end > end:
            raise AssertionError(f"book {book_id!r}: sentence crosses the end of unit {uid}")
        p_lo = max(bisect.bisect_right(para_starts, start) - 1, 0)
        p_hi = bisect.bisect_left(para_starts, end)
        pspans = tuple((max(a, start), min(b, end)) for a, b in paragraphs[p_lo:p_hi] if a < end and b > start)
        units.append(Unit(book_id=book_id, unit_id=uid, ordinal=len(units), title=title, start=start,
                          end=end, sentences=ss, paragraphs=pspans, split=split))

    for k, sec in enumerate(secs):
        p0, p1 = sec.first_para, sec.end_para
        start, end = paragraphs[p0][0], paragraphs[p1 - 1][1]
        uid = f"u{k:04d}"
        words = sum(para_words[p0:p1])
        if words <= n:
            add_unit(uid, sec.title, start, end, "dataset" if given else "whole" if whole else "structure")
            report.structure_units += 1
            continue
        atoms: list[tuple[int, int, int]] = []
        for p in range(p0, p1):
            a, b = paragraphs[p]
            if para_words[p] <= n:
                atoms.append((a, b, para_words[p]))
            else:
                lo, hi = bisect.bisect_left(sent_starts, a), bisect.bisect_left(sent_starts, b)
                atoms.extend((sa, sb, _words(text[sa:sb])) for sa, sb in sents[lo:hi])
        pieces = _greedy_pieces(atoms, n)
        for j, (a, b) in enumerate(pieces, 1):
            add_unit(f"{uid}.{j}", f"{sec.title} [{j}/{len(pieces)}]", a, b, "recursive")
        report.recursive_units += len(pieces)
    return units


def check_unit_coverage(text: str, paragraphs: Sequence[Span], units: Sequence[Unit],
                        dropped: Sequence[Sequence] = ()) -> None:
    """Raise if units overlap, leave a narrative character uncovered or misplace a sentence.

    ``dropped`` — ``(start, end, why)`` character spans of non-narrative matter (the structure
    report's ``dropped``): only they may lie outside the units.
    """
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
            "narrative_before_first_heading": bool(st.get("front_matter")),
            "dropped": "; ".join(f"{d[2][:40]} ({int(d[1]) - int(d[0])} chars)" for d in dropped),
            "dropped_chars": sum(int(d[1]) - int(d[0]) for d in dropped),
            "licence_notes_dropped_chars": (b.meta.get("clean") or {}).get("dropped_chars", 0),
        })
    return pd.DataFrame(rows)
