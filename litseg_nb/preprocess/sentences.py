"""Sentence splitting with exact character offsets."""
from __future__ import annotations

import re
from typing import Sequence

from .headings import is_keyword_heading

Span = tuple[int, int]

#: title abbreviations after which a sentence never ends (lower-case, without the dot)
TITLE_ABBREVIATIONS = frozenset(
    "mr mrs ms messrs mme mlle dr st rev capt col gen lt lieut maj sgt prof hon gov".split()
)
_ABBREV_END_RE = re.compile(r"(?:^|[\s“‘\"'(\[—-])([A-Za-z]{1,6})\.$")
_INITIAL_END_RE = re.compile(r"(?:^|[\s“‘\"'(\[])([A-HJ-Z])\.$")  # single capital initial, not "I."
_LINE_RE = re.compile(r"[^\n]+")
_LOWER_START_RE = re.compile(r"^[“‘\"'(\[]*[a-z]")
_INNER_END_RE = re.compile(r"[.!?…]")
#: verbs of a dialogue tag: ``“But why?” Taylor asked`` is one sentence
SAID_VERBS = frozenset(
    "said says asked asks cried cries replied replies answered exclaimed shouted whispered murmured "
    "called added continued demanded inquired enquired returned rejoined repeated muttered screamed "
    "sobbed laughed began observed remarked retorted snapped yelled declared suggested protested "
    "urged pleaded sighed groaned gasped stammered faltered interrupted thought wondered roared "
    "growled breathed panted insisted explained agreed admitted cried".split())
_QUOTE_END_RE = re.compile(r"[?!][”’\"']\s*$")
_TAG_START_RE = re.compile(r"^((?:[A-Z][\w'’.-]*\s+){1,3})([a-z]+)\b")


def _ends_with_abbreviation(s: str) -> bool:
    """``s`` (ending in a dot) ends with a title abbreviation (``Mr.``) or a single capital initial."""
    m = _ABBREV_END_RE.search(s)
    return bool(m and m.group(1)[0].isupper() and m.group(1).lower() in TITLE_ABBREVIATIONS
                or _INITIAL_END_RE.search(s))


def _trim(text: str, spans: Sequence[Span], offset: int) -> list[Span]:
    """Strip whitespace from each span; drop empty ones; shift by ``offset``."""
    out = []
    for a, b in spans:
        a += len(text[a:b]) - len(text[a:b].lstrip())
        b = a + len(text[a:b].rstrip())
        if b > a:
            out.append((a + offset, b + offset))
    return out


def _repair(text: str, spans: list[Span], offset: int) -> list[Span]:
    """Re-join a split made after a title abbreviation or an initial, before a lower-case word, or
    between ``?”``/``!”`` and its dialogue tag (``“But why?” Taylor asked.``)."""
    out: list[Span] = []
    for span in spans:
        if out:
            pa, pb = out[-1][0] - offset, out[-1][1] - offset
            last = text[pb - 2:pb]
            nxt = text[span[0] - offset:span[0] - offset + 60]
            if ((last.endswith(".") and _ends_with_abbreviation(text[max(pa, pb - 12):pb]))
                    or _LOWER_START_RE.match(nxt)
                    or (last[:1] in "?!" and _QUOTE_END_RE.search(last) and (m := _TAG_START_RE.match(nxt))
                        and m.group(2) in SAID_VERBS)):
                out[-1] = (out[-1][0], span[1])
                continue
        out.append(span)
    return out


_REGEX_BOUNDARY = re.compile(r"(?:[.!?…]+|\.\s\.\s\.)[”’\"')\]]*(?=\s+[“‘\"'(\[]?[A-Z0-9])")


def _regex_spans(text: str) -> list[Span]:
    ends = [m.end() for m in _REGEX_BOUNDARY.finditer(text)] + [len(text)]
    return list(zip([0] + ends[:-1], ends))


def _line_blocks(text: str, offset: int) -> list[tuple[str, int]]:
    """The non-blank lines of ``text`` with their offsets (line breaks are hard boundaries)."""
    return [(m.group(), offset + m.start()) for m in _LINE_RE.finditer(text) if m.group().strip()]


def _split_blocks(blocks: Sequence[tuple[str, int]], splitter: str, repair: bool) -> list[Span]:
    if splitter not in ("nupunkt", "regex"):
        raise ValueError(f"unknown sentence splitter {splitter!r}; expected 'nupunkt' or 'regex'")
    if splitter == "nupunkt":
        from nupunkt import sent_spans as spans_of
    else:
        spans_of = _regex_spans
    out: list[Span] = []
    for block, offset in blocks:
        # no end mark before the end, or a heading line ("CHAPTER II. The Letter"): one sentence
        if not _INNER_END_RE.search(block, 0, max(len(block.rstrip()) - 3, 0)) or is_keyword_heading(block):
            out.extend(_trim(block, [(0, len(block))], offset))
            continue
        trimmed = _trim(block, spans_of(block), offset)
        out.extend(_repair(block, trimmed, offset) if repair else trimmed)
    return out


def split_sentences(text: str, splitter: str = "nupunkt", repair: bool = True,
                    offset: int = 0) -> list[Span]:
    """Sentence spans of ``text`` (shifted by ``offset``); line breaks are hard boundaries, and a keyword
    heading line is one sentence."""
    return _split_blocks(_line_blocks(text, offset), splitter, repair)


def split_paragraph_sentences(text: str, paragraphs: Sequence[Span], splitter: str = "nupunkt",
                              repair: bool = True) -> list[Span]:
    """Sentence spans of every paragraph ``text[a:b]``, in order, as offsets into ``text``."""
    blocks = [blk for a, b in paragraphs for blk in _line_blocks(text[a:b], a)]
    return _split_blocks(blocks, splitter, repair)


#: hard cases with their gold sentences (used by the tests and the measurement above)
HARD_CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("“I shall go,” said Mr. Knightley. “Mrs. Weston will come too.”",
     ("“I shall go,” said Mr. Knightley.", "“Mrs. Weston will come too.”")),
    ("“Go!” cried he. “Now!” She ran.", ("“Go!” cried he.", "“Now!”", "She ran.")),
    ("“Well, Mrs. Weston,” said Emma, “what do you think?” No answer came.",
     ("“Well, Mrs. Weston,” said Emma, “what do you think?”", "No answer came.")),
    ("Dr. Jekyll lived near St. Paul’s with Mrs. Poole. Mr. Utterson called.",
     ("Dr. Jekyll lived near St. Paul’s with Mrs. Poole.", "Mr. Utterson called.")),
    ("The Time Machine was written by H. G. Wells in 1895. It sold well.",
     ("The Time Machine was written by H. G. Wells in 1895.", "It sold well.")),
    ("She paused... then went on. He waited.", ("She paused... then went on.", "He waited.")),
    ("I wonder... What could it be? Nobody knew.",
     ("I wonder...", "What could it be?", "Nobody knew.")),
    ("He waited . . . and waited. Then he left.", ("He waited . . . and waited.", "Then he left.")),
    ("“He told me, ‘Never come back,’ and shut the door,” she said. I wept.",
     ("“He told me, ‘Never come back,’ and shut the door,” she said.", "I wept.")),
    ("“She cried, ‘Help!’ and fled.” He nodded.", ("“She cried, ‘Help!’ and fled.”", "He nodded.")),
    ("‘What?’ asked Alice. ‘Why not?’ The end.", ("‘What?’ asked Alice.", "‘Why not?’", "The end.")),
    ("Did I request thee, Maker, from my clay\nTo mould me man? Did I solicit thee\n"
     "From darkness to promote me",
     ("Did I request thee, Maker, from my clay", "To mould me man?", "Did I solicit thee",
      "From darkness to promote me")),
    ("Twinkle, twinkle, little star\nHow I wonder what you are\nUp above the world so high",
     ("Twinkle, twinkle, little star", "How I wonder what you are", "Up above the world so high")),
    ("“Is it you, Capt. Brown?” “It is,” he said. They shook hands.",
     ("“Is it you, Capt. Brown?”", "“It is,” he said.", "They shook hands.")),
    ("He saw e.g. Paris and i.e. London. Then home.",
     ("He saw e.g. Paris and i.e. London.", "Then home.")),
    ("The U.S. Navy came. It was late.", ("The U.S. Navy came.", "It was late.")),
    ("St. Petersburgh, Dec. 11th, 17--. You will rejoice to hear it.",
     ("St. Petersburgh, Dec. 11th, 17--.", "You will rejoice to hear it.")),
    ("She was—oh! so happy. He said no. Then he went.",
     ("She was—oh! so happy.", "He said no.", "Then he went.")),
    ("“No.” He left. “Yes,” she said.", ("“No.”", "He left.", "“Yes,” she said.")),
    ("“But why?” Taylor asked, dazed. Nobody answered.",
     ("“But why?” Taylor asked, dazed.", "Nobody answered.")),
    ("“Stop!” He ran. “Really?” she whispered.", ("“Stop!”", "He ran.", "“Really?” she whispered.")),
)


def measure_splitters(cases=HARD_CASES) -> list[dict]:
    """Exact-case accuracy and boundary F1 of each splitter variant on ``cases``."""
    variants = {"nupunkt (raw)": ("nupunkt", False), "nupunkt + repair": ("nupunkt", True),
                "regex": ("regex", True)}
    rows = []
    for name, (splitter, repair) in variants.items():
        exact, tp, n_pred, n_gold = 0, 0, 0, 0
        for text, gold in cases:
            spans = split_sentences(text, splitter=splitter, repair=repair)
            exact += [text[a:b] for a, b in spans] == list(gold)
            gold_ends, pos = set(), 0
            for g in gold:
                pos = text.index(g, pos) + len(g)
                gold_ends.add(pos)
            pred_ends = {b for _, b in spans}
            tp += len(gold_ends & pred_ends)
            n_pred += len(pred_ends)
            n_gold += len(gold_ends)
        p, r = tp / max(n_pred, 1), tp / max(n_gold, 1)
        rows.append({"splitter": name, "exact_cases": f"{exact}/{len(cases)}",
                     "boundary_f1": round(2 * p * r / max(p + r, 1e-9), 3)})
    return rows

