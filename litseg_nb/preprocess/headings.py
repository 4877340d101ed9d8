"""Heading lexicon and classification: which short paragraph is which kind of heading (volume, book/part,
act, title, chapter-like, numbered title, scene, numeral, special, non-narrative) with its nesting rank
(:data:`RANKS`, lower = outer), and the structure report."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

from ..core.schema import Span, word_count

FRONT_MATTER = "Front matter"
CONTAINER_GAP_WORDS = 150
FRONT_NARRATIVE_WORDS = 150
CONTAINER_KINDS = frozenset({"volume", "book", "part", "act"})

_WORD_VALUES = {w: i for words in (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty", "zeroth first second third fourth fifth sixth seventh eighth ninth tenth "
    "eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth")
    for i, w in enumerate(words.split())}
_TENS = {w: 10 * i for words in ("twenty thirty forty fifty sixty seventy eighty ninety",
                                 "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth")
         for i, w in enumerate(words.split(), 2)}
_TENS.update({"hundred": 100, "hundredth": 100})
_WORD_VALUES.update(_TENS)
_WORDNUM = "|".join(sorted(set(_WORD_VALUES) | {"last", "final"}, key=len, reverse=True))
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
_SEPARATORS = " .:;—–-~=|/\\·•#+"  # between a heading's keyword and number and its title
_KEYWORD_RE = re.compile(
    rf"^(?:[\w'’ ]{{1,30}}:\s+)?(?P<kw>{_KW})\.?\s+(?P<num>{_NUM})\b\.?(?P<rest>(?:[\s:.—–~=|·•-].*)?)$", re.I)
_ORDINAL_KW_RE = re.compile(
    rf"^(?P<num>(?:the\s+)?(?:{_WORDNUM})(?:[\s-](?:{_WORDNUM}))?)\s+"
    rf"(?P<kw>part|book|volume|act|canto|story|chapter|letter|stave|lecture|tale)\.?$", re.I)  # THE FIRST CHAPTER
_SPECIAL_RE = re.compile(
    r"^(?:the\s+)?(?:author[’']?s\s+)?(?P<kw>preface|prologue|epilogue|introduction|conclusion|afterword|"
    r"postscript|foreword|proem|envoi|l[’']envoi|prelude|finale|interlude|introductory|prefatory|(?:dedicatory\s+)?epistle)"
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
    r"(?:introduction|preface|foreword)(?:\s+and\s+\w+)?\s+by\b(?!\s+the\s+author).*)[.:]?$", re.I)  # whose "PREFACE TO THE FIRST EDITION" is: its signature
_CONTENTS_RE = re.compile(r"^(?:(?:table\s+of\s+)?contents?|list\s+of\s+(?:chapters|stories|poems))[.:]?$", re.I)
_NUMBERED_TITLE_RE = re.compile(rf"^(?P<num>{_ROMAN}|\d{{1,3}})(?:\.|:|\s*[—–-]+)?\s+(?P<rest>\S.{{1,110}})$")
_TITLE_PART_RE = re.compile(rf"^(?P<base>.*?\w.*?)[.,]?\s*[—–-]+\s*(?P<num>{_ROMAN}|\d{{1,3}})\.?$")
_BARE_NUM_RE = re.compile(rf"^(?:§+\s*)?(?P<num>{_ROMAN}|[1-9]\d{{0,2}})\.?$")  # "§ 3"; not "01" (a figure label)
_QUOTE_START = "“‘\"'«„"
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
_NN = frozenset({"nonnarrative", "resume"})
_ANCHOR_RE = re.compile(r"^\S*\|\S*$")
_DECOR_RE = re.compile(r"[_*\[\]{}]")
_FOOTNOTE_MARK_RE = re.compile(r"(?<=\w)\[\d{1,3}\]")  # "A RECKLESS CHARACTER[1]": a footnote's mark
_SMALL_WORDS = frozenset("a an and as at by for from in into of on or the to with de la le du des el von van".split())


def _numeral_value(num: str) -> int | None:
    num = num.strip().rstrip(".").lower()
    if num.isdigit():
        return int(num)
    num = re.sub(r"^the\s+", "", num)
    if num in _WORD_VALUES:
        return _WORD_VALUES[num]
    parts = re.split(r"[\s-]+", num)  # "twenty-third", "forty two"
    unit = _WORD_VALUES.get(parts[-1]) if len(parts) == 2 else None
    if unit is not None and 1 <= unit <= 9 and parts[0] in _TENS and _TENS[parts[0]] < 100:
        return _TENS[parts[0]] + unit
    num = num.upper()  # a Roman numeral ("last", "final": none)
    if not num or any(ch not in _ROMAN_VALUES for ch in num):
        return None
    total, prev = 0, 0
    for ch in reversed(num):
        v = _ROMAN_VALUES[ch]
        total = total - v if v < prev else total + v
        prev = max(prev, v)
    return total


@dataclass(frozen=True)
class Heading:
    para: int  # paragraph index
    kind: str  # chapter | ... | volume | book | part | act | scene | special | numbered | numeral | title
    title: str
    value: int | None = None  # its number, when numbered

    @property
    def rank(self) -> int:
        return RANKS[self.kind]


@dataclass
class StructureReport:
    """How a book was split (kept in ``Book.meta['structure']``)."""

    headings: int = 0
    heading_kinds: dict[str, int] = field(default_factory=dict)  # kind -> headings used
    levels: list[str] = field(default_factory=list)  # kinds from outer to inner, e.g. [book, numeral]
    unit_level: list[str] = field(default_factory=list)  # kinds of the unit and parent headings
    section_kinds: list[str] = field(default_factory=list)  # kinds recorded as sections inside units
    sections: int = 0  # section headings recorded on units (not units)
    level_notes: list[str] = field(default_factory=list)  # why each level was chosen or rejected
    toc_entries: int = 0
    toc_matched: int = 0
    demoted_toc_headings: int = 0
    rejected_numbering: int = 0  # numbered headings that broke their series
    front_matter: bool = False  # narrative before the first heading became a unit
    front_prose_words: int = 0  # prose words before the first narrative heading
    front_decision: str = ""  # what was decided about them, and why
    preface_decision: str = ""  # where an opening preface that held the whole book was ended (kind 4)
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


def _strip_decor(s: str) -> str:
    """Emphasis and bracket marks off: ``[CHAPTER I] _To Mrs._ SAVILLE`` -> ``CHAPTER I To Mrs. SAVILLE``."""
    return " ".join(_DECOR_RE.sub("", _FOOTNOTE_MARK_RE.sub("", s)).split())


def _norm_title(s: str) -> str:
    """Contents/body heading key: no accents, case, punctuation, decoration or page number."""
    s = re.sub(r"(?<=[a-z]{2})\d{1,4}\s*$", "", _strip_leader(s))  # a page number glued on: "Opinions47"
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


_SIGNATURE_RE = re.compile(r"^[“‘\"'«„]+\s*([A-Z][A-Z.\s'’-]*?)\s*(?:\.[”’\"'»]+|[”’\"'»]+\.)$")


def quoted_signature(para: str) -> bool:
    """A name in capitals inside quotation marks, ending in a full stop (``"JOHN SMITH."``,
    ``“P. T. RENAULD.”``): the signature of a letter quoted inside a chapter, not a heading."""
    m = _SIGNATURE_RE.match(para.strip())
    return bool(m) and 1 <= word_count(m.group(1)) <= 4 and any(c.isalpha() for c in m.group(1))


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
    return (len(lines) <= 3 and len(para) <= 120 and word_count(para) <= 18
            and (para.lstrip()[:1] not in _QUOTE_START or (len(lines) == 1 and _quoted_title(para)))
            or _long_titled_keyword(lines))


def _long_titled_keyword(lines: list[str]) -> bool:
    """``CHAPTER THE FIRST.`` over a long title in capitals set on two or three more lines of the same
    paragraph (``IN WHICH THE HISTORY BEGINS ...``, over 120 characters in all): a heading."""
    lines = [ln.strip() for ln in lines if ln.strip()]
    if not 2 <= len(lines) <= 4 or sum(len(ln) for ln in lines) > 300 or any(len(ln) > 90 for ln in lines):
        return False
    first = _strip_decor(lines[0])
    m = _KEYWORD_RE.match(first)
    if not m or m.group("rest").strip(_SEPARATORS) or m.group("kw").lower() in ("volume", "vol", "book", "part", "act"):
        return False
    return all(ln.isupper() for ln in lines[1:])


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
        rest = m.group("rest").strip(_SEPARATORS)  # "CHAPTER THE FIRST ~~ THE BOY GROWS UP"
        # "Letter I received ..." is prose: a heading's title is short and starts with a capital
        if rest and (word_count(rest) > 14 or not (rest[0].isupper() or rest[0].isdigit() or rest[0] in "(“‘\"'")):
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


def is_keyword_heading(line: str) -> bool:
    """``line`` is a keyword heading (``CHAPTER II. The Letter``, ``Stave One``): one sentence, however its
    numeral's dot looks to a sentence splitter."""
    return _keyword(_strip_decor(line.strip())) is not None


def _classify(para: str) -> list[Heading]:
    """The heading(s) a short paragraph is (empty when it is none); ``para`` index left at -1."""
    # an anchor tag line ("ACT_3|SC_1") is markup, not text
    lines = [_strip_decor(ln) for ln in para.split("\n") if not _ANCHOR_RE.match(ln.strip())]
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
        if len(lines) > 1 and word_count(lines[1]) <= 12 and _title_like(lines[1]):
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
    # "Conclusion, general" (an index entry: a word, a comma, a sub-entry) is not a heading
    if m and first[0].isupper() and (not m.group("rest").strip(" .:") or word_count(m.group("rest")) <= 6) and not (
            m.group("rest").lstrip().startswith(",")):
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
    m = _BARE_NUM_RE.match(first) if len(lines) == 2 else None
    if m and _numeral_value(m.group("num")) and word_count(lines[1]) <= 12 and _title_like(lines[1]) \
            and not re.search(r"[,;]$", lines[1]):
        return [Heading(-1, "numbered", full, _numeral_value(m.group("num")))]  # "I" over "THE RIVER"
    m = _NUMBERED_TITLE_RE.match(full)
    if m and _title_like(m.group("rest")) and not re.search(r"[,;]$", full):
        v = _numeral_value(m.group("num"))
        # "I saw him." / "I DESIRE AFFECTIONATELY TO" is prose: a bare "I" needs a dot, colon or dash
        if v and not (m.group("num") in ("I", "i") and not re.match(r"^I\s*[.:—–-]", full, re.I)):
            return [Heading(-1, "numbered", full, v)]
    return []


def _verse_share(paras: list[str], words: list[int]) -> float:
    return sum(w for p, w in zip(paras, words) if p.count("\n") >= 2) / (sum(words) or 1)


def _prose_words(para: str) -> int:
    """Words of a paragraph that reads as prose (not a title-page line, list or heading)."""
    if "\n" in para or word_count(para) < 12 or para.isupper():
        return 0
    return word_count(para)


_INITIAL_RE = re.compile(r"\b[A-Z]\.")
_TITLE_WORDS = frozenset("a an and as at by for from in into of on or the to with".split())


def _signature_name(line: str) -> str | None:
    """The name a signature line gives (``E. A. V. MERTON`` of ``E. A. V. MERTON, SURREY: August, 1898.``),
    else None: a name in capitals or with initials, up to five words; a place and a date after a comma
    only follow a name with initials (``LONDON, May 1850.`` is a dated place, not a name)."""
    s = line.strip().rstrip(".,;:")
    if re.search(r"\d", s):
        head = s.split(",", 1)[0].strip().rstrip(".")
        if head == s or not _INITIAL_RE.search(head + "."):
            return None
        s = head
    if _SPECIAL_RE.match(s) or _keyword(s) or _BARE_NUM_RE.match(s):
        return None
    if 1 <= word_count(s) <= 5 and re.fullmatch(r"[A-Z][A-Za-z.\s'’-]*", s) and (s.isupper() or "." in s):
        return s
    return None


def _signature_author(author: str | None, lines: Sequence[str]) -> bool | None:
    """Whether a signature line names the book's author (None: no signature found). A signature of initials
    or names matches when its first and last initials are the author's first and last (``J. C. H.``, a pen
    name with the same initials) and its initials are the author's in order (``H. M.`` is not Horace
    Walpole); a one-word signature is the author's surname; ``THE AUTHOR`` is the author."""
    seen = 0
    for ln in reversed(lines):
        words = re.findall(r"[A-Za-z][A-Za-z'’-]*", ln)
        if not words or ln.isupper() and any(len(w) > 1 and w.lower() in _TITLE_WORDS for w in words):
            continue  # a rule, or a title set after the signature ("THE BANQUET OF DANTE", "ON THE PLANTATION.")
        seen += 1
        if seen > 4:
            return None
        name = _signature_name(ln)
        if name is None:
            if re.search(r"\d", ln) or word_count(ln) <= 4 or re.fullmatch(r"\[.*\]", ln.strip()):
                continue  # a date, a place, a closing word or a bracketed note after the signature
            return None  # text after it: a name above is no signature at the end
        if not author:
            return None
        words = re.findall(r"[A-Za-z][A-Za-z'’-]*", name)
        if any(w.lower() == "author" for w in words):
            return True
        names = [w for w in re.findall(r"[^\W\d_][\w'’-]*", author) if len(w) == 1 or w.lower() not in _SMALL_WORDS]
        if not names:
            return None
        if len(words) == 1 and len(words[0]) > 1:
            return words[0].lower() == names[-1].lower()
        sig, own = [w[0].upper() for w in words], [w[0].upper() for w in names]
        it = iter(own)
        return sig[0] == own[0] and sig[-1] == own[-1] and all(c in it for c in sig)
    return None
