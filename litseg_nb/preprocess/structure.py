"""Structure-driven splitting of a cleaned book into top-level narrative units (paper §3.1.2).

Input: the cleaned text and its paragraph spans (see :mod:`litseg_nb.data.gutenberg`). Output:
:class:`~litseg_nb.schema.Unit` records whose ``[start, end)`` spans jointly cover every paragraph
of the text (only the ``\\n\\n`` between units belongs to no unit), with sentences indexed 1..N.

**Headings** are short paragraphs (at most 3 lines, 100 characters) of these kinds:

* keyword headings — ``CHAPTER``/``STAVE``/``LETTER``/``CANTO``/``SCENE``/``SECTION``/``EPISODE``/
  ``STORY``/``TALE``/``ADVENTURE`` (primary) and ``VOLUME``/``VOL.``/``BOOK``/``PART``/``ACT``
  (containers), followed by a roman, arabic or spelled-out number and an optional title
  (``Stave I: Marley's Ghost``, ``Chapter the First``, ``FIRST PART``);
* special headings — ``PREFACE``, ``PROLOGUE``, ``EPILOGUE``, ``INTRODUCTION``, ``CONCLUSION``,
  ``AFTERWORD``, ``POSTSCRIPT`` as a paragraph of their own;
* numbered titles — ``I. A SCANDAL IN BOHEMIA`` (a roman numeral, a dot and a capitalised title);
* bare numerals — ``I``, ``II.``, ``3`` on their own, used only when the book has no keyword or
  titled headings and the sequence starts at one (Heart of Darkness, The Time Machine);
* table-of-contents titles — when a ``CONTENTS`` paragraph is followed by a list of entries, each
  entry is looked up, in order, among the short paragraphs *after* the list (Dubliners' stories,
  Grimm's tales, Jekyll and Hyde's chapters).

**Table of contents skipping.** The list itself never becomes units: a ToC's entries are only
matched after its end, and a keyword/numbered heading that is immediately followed by another
heading of the same kind (a ToC typed as blank-line separated ``Chapter 1``, ``Chapter 2``, ...) is
demoted to ordinary text.

**Hierarchy.** Containers (volumes, books, parts, acts) are units only in books that have no
primary headings. Otherwise a container heading is glued to the next primary heading when at most
:data:`CONTAINER_GAP_WORDS` words lie between them (``VOLUME I`` + ``CHAPTER I`` → one unit titled
``VOLUME I / CHAPTER I``), and later primary titles carry the container as a prefix. A primary
heading immediately followed by a heading of another kind is merged into it the same way.

**Front matter** before the first heading is kept as its own unit titled :data:`FRONT_MATTER`
(never dropped). A book without detectable headings is one unit (``split="whole"``).

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
from dataclasses import dataclass
from typing import Sequence

from ..schema import Sentence, Unit
from .sentences import split_paragraph_sentences

Span = tuple[int, int]

FRONT_MATTER = "Front matter"
CONTAINER_GAP_WORDS = 150
CONTAINER_KINDS = frozenset({"volume", "book", "part", "act"})

_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty first second third fourth fifth "
    "sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
    "seventeenth eighteenth nineteenth twentieth last final"
).split()
_ROMAN = r"[IVXLCDM]+"
_NUM = rf"(?:{_ROMAN}|\d{{1,3}}|(?:the\s+)?(?:{'|'.join(_NUMBER_WORDS)})(?:[\s-](?:{'|'.join(_NUMBER_WORDS)}))?)"
_KEYWORDS = {
    "chapter": "chapter", "chap": "chapter", "stave": "stave", "letter": "letter", "canto": "canto",
    "scene": "scene", "section": "section", "episode": "episode", "story": "story", "tale": "tale",
    "adventure": "adventure", "volume": "volume", "vol": "volume", "book": "book", "part": "part",
    "act": "act",
}
_KEYWORD_RE = re.compile(
    rf"^(?P<kw>{'|'.join(sorted(_KEYWORDS, key=len, reverse=True))})\.?\s+(?P<num>{_NUM})\b\.?"
    rf"(?P<rest>(?:[\s:.—–-].*)?)$",
    re.I,
)
_ORDINAL_KW_RE = re.compile(
    rf"^(?P<num>(?:the\s+)?(?:{'|'.join(_NUMBER_WORDS)}))\s+(?P<kw>part|book|volume)\.?$", re.I
)
_SPECIAL_RE = re.compile(
    r"^(?P<kw>preface|prologue|epilogue|introduction|conclusion|afterword|postscript)[.:]?$", re.I
)
_ROMAN_TITLED_RE = re.compile(rf"^(?P<num>{_ROMAN})\.\s+(?P<rest>[A-Z][^a-z]{{2,80}})$")
_BARE_NUM_RE = re.compile(rf"^(?P<num>{_ROMAN}|\d{{1,3}})\.?$")
_CONTENTS_RE = re.compile(r"^(?:table\s+of\s+)?contents?[.:]?$", re.I)
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


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
    num = num.strip().rstrip(".")
    if num.isdigit():
        return int(num)
    return roman_to_int(num)


@dataclass(frozen=True)
class Heading:
    para: int  # paragraph index
    kind: str  # chapter | stave | volume | ... | special | roman_titled | numeral | title
    title: str

    @property
    def is_container(self) -> bool:
        return self.kind in CONTAINER_KINDS


@dataclass
class StructureReport:
    """How a book was split (kept in ``Book.meta['structure']``)."""

    headings: int = 0
    toc_entries: int = 0
    toc_matched: int = 0
    demoted_toc_headings: int = 0
    front_matter: bool = False
    structure_units: int = 0
    recursive_units: int = 0
    split_sentences: int = 0  # sentences longer than n words cut into pieces


def _words(s: str) -> int:
    return len(s.split())


def _norm_title(s: str) -> str:
    s = unicodedata.normalize("NFKD", s).casefold()
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"^(?:chapter\s+)?(?:[ivxlc]+|\d+)[.:]\s+", "", s)
    s = re.sub(r"[^\w\s]", " ", s)
    s = re.sub(r"\s+\d+$", "", s.strip())  # trailing page number
    return re.sub(r"\s+", " ", s).strip()


def _is_heading_shaped(para: str) -> bool:
    lines = para.split("\n")
    return len(lines) <= 3 and len(para) <= 100 and _words(para) <= 16


def _keyword(line: str) -> tuple[str, str] | None:
    m = _KEYWORD_RE.match(line)
    if m:
        rest = m.group("rest").strip()
        # "Letter I received ..." is prose: a heading's title is short and starts with punctuation
        # or a capital ("Chapter I. Down the Rabbit-Hole", "Stave I: Marley's Ghost")
        if rest and (_words(rest) > 12 or rest[0].islower()):
            return None
        return _KEYWORDS[m.group("kw").lower()], line
    m = _ORDINAL_KW_RE.match(line)
    if m:
        return _KEYWORDS[m.group("kw").lower()], line
    return None


def _classify(para: str) -> tuple[str, str] | None:
    """``(kind, title)`` if the paragraph is a keyword/special/numbered heading.

    The first line decides; a container keyword may also stand on a later line of a short block
    (Frankenstein's title pages: ``IN THREE VOLUMES.`` / ``VOL. II.``).
    """
    lines = [ln.strip() for ln in para.split("\n")]
    first = lines[0]
    kw = _keyword(first)
    if kw:
        return kw[0], " ".join(para.split())
    for line in lines[1:]:
        kw = _keyword(line)
        if kw and kw[0] in CONTAINER_KINDS:
            return kw
    if len(lines) == 1:
        m = _SPECIAL_RE.match(first)
        if m and first[0].isupper():
            return "special", first
        if _ROMAN_TITLED_RE.match(first):
            return "roman_titled", first
        if _BARE_NUM_RE.match(first):
            return "numeral", first
    return None


def _toc_headings(paras: list[str], report: StructureReport) -> list[Heading]:
    """Headings found by looking up a table of contents' entries after the list."""
    out: list[Heading] = []
    i = 0
    while i < len(paras):
        if not _CONTENTS_RE.match(paras[i].strip()):
            i += 1
            continue
        entries: list[str] = []
        seen: set[str] = set()
        j = i + 1
        while j < len(paras):
            lines = [ln.strip() for ln in paras[j].split("\n") if ln.strip()]
            if not lines or any(len(ln) > 90 or _words(ln) > 14 for ln in lines):
                break  # prose: the list is over
            keys = [_norm_title(ln) for ln in lines]
            if keys[0] in seen:
                break  # the first body heading repeats an entry
            entries.extend(k for k in dict.fromkeys(keys) if k and k not in seen)
            seen.update(keys)
            j += 1
        if len(entries) >= 2:
            report.toc_entries += len(entries)
            pos = j
            for key in entries:
                for k in range(pos, len(paras)):
                    p = paras[k]
                    if "\n" not in p and len(p) <= 100 and _norm_title(p) == key:
                        out.append(Heading(k, "title", p.strip()))
                        report.toc_matched += 1
                        pos = k + 1
                        break
        i = j
    return out


def detect_headings(text: str, paragraphs: Sequence[Span], report: StructureReport | None = None
                    ) -> list[Heading]:
    """The unit-starting headings of a book, ToC entries removed, hierarchy resolved."""
    report = report if report is not None else StructureReport()
    paras = [text[a:b] for a, b in paragraphs]
    found: dict[int, Heading] = {}
    for k, p in enumerate(paras):
        if _is_heading_shaped(p):
            c = _classify(p)
            if c:
                found[k] = Heading(k, c[0], c[1])
    for h in _toc_headings(paras, report):
        if h.para not in found or found[h.para].kind == "numeral":
            found[h.para] = h
    heads = sorted(found.values(), key=lambda h: h.para)

    # bare numerals only when nothing stronger exists and they count from one
    if any(h.kind not in ("numeral",) for h in heads if h.kind != "special"):
        heads = [h for h in heads if h.kind != "numeral"]
    else:
        nums = [h for h in heads if h.kind == "numeral"]
        if len(nums) < 2 or _numeral_value(nums[0].title) != 1:
            heads = [h for h in heads if h.kind != "numeral"]

    # ToC typed as headings: a primary heading right before another of the same kind
    kept: list[Heading] = []
    for k, h in enumerate(heads):
        nxt = heads[k + 1] if k + 1 < len(heads) else None
        if (nxt and nxt.para == h.para + 1 and nxt.kind == h.kind and not h.is_container
                and h.kind != "title"):
            report.demoted_toc_headings += 1
            continue
        kept.append(h)
    report.headings = len(kept)
    return kept


@dataclass
class _Section:
    first_para: int
    title: str


def _sections(text: str, paragraphs: Sequence[Span], heads: list[Heading],
              para_words: list[int]) -> list[_Section]:
    """Unit start paragraphs and titles from the resolved headings."""
    has_primary = any(not h.is_container for h in heads)
    sections: list[_Section] = []
    container = ""
    pending: list[Heading] = []  # containers / merged headings waiting for the next primary

    def flush_pending_as_own() -> None:
        if pending:
            sections.append(_Section(pending[0].para, " / ".join(p.title for p in pending)))
            pending.clear()

    for k, h in enumerate(heads):
        nxt = heads[k + 1] if k + 1 < len(heads) else None
        gap = sum(para_words[h.para + 1:nxt.para]) if nxt else sum(para_words[h.para + 1:])
        if h.is_container and has_primary:
            container = h.title
            if nxt is not None and not nxt.is_container and gap <= CONTAINER_GAP_WORDS:
                flush_pending_as_own()
                pending.append(h)
            else:
                flush_pending_as_own()
                sections.append(_Section(h.para, h.title))
            continue
        if nxt is not None and nxt.para == h.para + 1 and not nxt.is_container:
            pending.append(h)  # e.g. "ACT I" right before "SCENE I" (different kinds)
            continue
        title = h.title
        if pending:
            title = " / ".join([p.title for p in pending] + [title])
            sections.append(_Section(pending[0].para, title))
            pending.clear()
        else:
            if container and has_primary and not h.is_container:
                title = f"{container} / {title}"
            sections.append(_Section(h.para, title))
    flush_pending_as_own()
    return sections


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
                sections: Sequence[tuple[int, str]] | None = None) -> list[Unit]:
    """Split a cleaned book into indexed units (see module docstring).

    ``sentences`` (spans into ``text``) are computed with ``sentence_splitter`` when not given.
    ``use_structure=False`` skips heading detection (the whole text is one section).
    ``sections`` — ``(first_paragraph, title)`` pairs given by the dataset (GutenQA chapters) —
    replace heading detection; their units get ``split="dataset"``.
    """
    if max_unit_words <= 0:
        raise ValueError(f"book {book_id!r}: max_unit_words must be positive, got {max_unit_words}")
    if not paragraphs or not text.strip():
        raise ValueError(f"book {book_id!r}: no text to split into units")
    report = report if report is not None else StructureReport()
    n = max_unit_words
    if sentences is None:
        sentences = split_paragraph_sentences(text, paragraphs, splitter=sentence_splitter)
    # cut sentences longer than n words (they could not fit any unit otherwise)
    sents: list[Span] = []
    for a, b in sentences:
        if _words(text[a:b]) > n:
            pieces = _cut_long_sentence(text, a, b, n)
            report.split_sentences += len(pieces) - 1
            sents.extend(pieces)
        else:
            sents.append((a, b))
    sent_starts = [a for a, _ in sents]
    para_words = [_words(text[a:b]) for a, b in paragraphs]

    given = sections is not None
    if given:
        sections = [_Section(p, t) for p, t in sections]
        if not sections or sections[0].first_para != 0:
            raise ValueError(f"book {book_id!r}: given sections must start at paragraph 0")
    else:
        heads = detect_headings(text, paragraphs, report) if use_structure else []
        sections = _sections(text, paragraphs, heads, para_words)
    if not sections:
        sections = [_Section(0, whole_title)]
        whole = True
    elif given:
        whole = False
    else:
        whole = False
        if sections[0].first_para > 0:
            sections.insert(0, _Section(0, FRONT_MATTER))
            report.front_matter = True

    units: list[Unit] = []

    def add_unit(uid: str, title: str, start: int, end: int, split: str) -> None:
        lo = bisect.bisect_left(sent_starts, start)
        hi = bisect.bisect_left(sent_starts, end)
        ss = tuple(Sentence(i + 1, a, b) for i, (a, b) in enumerate(sents[lo:hi]))
        if ss and ss[-1].end > end:
            raise AssertionError(f"book {book_id!r}: sentence crosses the end of unit {uid}")
        pspans = tuple((max(a, start), min(b, end)) for a, b in paragraphs if a < end and b > start)
        units.append(Unit(book_id=book_id, unit_id=uid, ordinal=len(units), title=title, start=start,
                          end=end, sentences=ss, paragraphs=pspans, split=split))

    for k, sec in enumerate(sections):
        p0 = sec.first_para
        p1 = sections[k + 1].first_para if k + 1 < len(sections) else len(paragraphs)
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


def check_unit_coverage(text: str, paragraphs: Sequence[Span], units: Sequence[Unit]) -> None:
    """Raise if units overlap, leave a paragraph character uncovered or a sentence misplaced."""
    pos = 0
    for u in units:
        gap = text[pos:u.start]
        if gap.strip():
            raise AssertionError(f"unit {u.unit_id}: text before it is in no unit: {gap[:60]!r}")
        if u.start < pos:
            raise AssertionError(f"unit {u.unit_id} overlaps the previous unit")
        for s in u.sentences:
            if not u.start <= s.start < s.end <= u.end:
                raise AssertionError(f"unit {u.unit_id}: sentence {s.index} outside the unit")
        pos = u.end
    if text[pos:].strip():
        raise AssertionError(f"text after the last unit is in no unit: {text[pos:pos + 60]!r}")
