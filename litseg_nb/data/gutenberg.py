"""Cleaning raw Project Gutenberg plain-text books into paragraphs joined by ``"\\n\\n"``."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Iterable

from ..errors import UsageError

log = logging.getLogger(__name__)

Span = tuple[int, int]
PARAGRAPH_SEP = "\n\n"


def join_paragraphs(paragraphs: Iterable[str]) -> tuple[str, list[Span]]:
    """``("a\\n\\nb", [(0, 1), (3, 4)])`` for ``["a", "b"]``: ``text[s:e]`` gives each paragraph back."""
    paragraphs = list(paragraphs)
    starts = accumulate((len(p) + len(PARAGRAPH_SEP) for p in paragraphs), initial=0)
    return PARAGRAPH_SEP.join(paragraphs), [(a, a + len(p)) for a, p in zip(starts, paragraphs)]


class GutenbergFormatError(UsageError, ValueError):
    """A raw Gutenberg file that cannot be cleaned (empty, undecodable, no licence markers)."""


class NoStartMarker(GutenbergFormatError):
    """No licence START marker (new or old format): plain text rather than a Gutenberg file."""


_START_RE = re.compile(r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK", re.I)
_END_RE = re.compile(r"^\s*\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK", re.I)
# the old licence format (about 3% of a public mirror): the body starts after the small print ends
_OLD_START_RE = re.compile(r"^\s*\*+\s*(?:END\s*\**\s*THE\s+SMALL\s+PRINT|SMALL\s+PRINT!\s+FOR\s+_*\s*COMPLETE)", re.I)
_OLD_END_RE = re.compile(r"^\s*End of (?:this |the )?(?:Project Gutenberg'?s? )?E-?text\b", re.I)
#: paragraphs that are Gutenberg or transcriber notes, never the book (dropped, counted)
_NOTE_RE = re.compile(
    r"^(?:\*{2,}\s*THIS EBOOK WAS ONE OF PROJECT GUTENBERG'?S EARLY FILES|<<THIS ELECTRONIC VERSION|"
    r"\[?\s*Note:\s*Project Gutenberg also has an HTML version|Project Gutenberg also has an HTML version|"
    r"\[\s*Transcriber[’']?s?\s+Notes?\b|Transcriber[’']?s?\s+Notes?\s*:\s*\S|HTML version (?:by|produced)|"
    r"\*+\s*This file should be named|This etext was prepared by)", re.I)
_CHARSET_RE = re.compile(rb"Character set encoding:\s*([A-Za-z0-9_\-]+)")
_CREDIT_RE = re.compile(
    r"^(?:Produced by|This e-?text was produced|E-?text prepared by|Transcribed (?:from|by))", re.I
)
_EPILOGUE_RE = re.compile(r"^End of (?:the )?Project Gutenberg", re.I)


_ITEM_RE = re.compile(r"^(?P<num>[IVXLC]{1,7}|\d{1,3})\.\s+\S")


def _roman(n: int) -> str:
    out = ""
    for value, numeral in ((100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"),
                           (1, "I")):
        out += numeral * (n // value)
        n %= value
    return out


def _counted_items(lines: list[str]) -> int:
    """Lines that start a list item numbered ``I.``, ``II.``, ... (or ``1.``, ``2.``, ...) counting up from one."""
    nums = [m.group("num") for ln in lines if (m := _ITEM_RE.match(ln))]
    expected = [str(k) if nums and nums[0].isdigit() else _roman(k) for k in range(1, len(nums) + 1)]
    return len(nums) if nums == expected else 0


_ANCHOR_LINE_RE = re.compile(r"^[A-Z]+_\d+\|[A-Z]+_\d+$")


def _is_listed(line: str) -> bool:
    """A contents line with its page number at the margin (``Title      25``, ``Title . . . 25``)."""
    s = line.rstrip()
    if not s or not (s[-1].isdigit() or s[-1] in "ivxlcIVXLC"):
        return s.strip().lower() == "page"
    return "   " in s.strip() or ". ." in s or "..." in s

_WS_RE = re.compile(r"[ \t\f\v\u00a0]+")


@dataclass
class CleanReport:
    """What :func:`clean_gutenberg_text` did to one file (kept in ``Book.meta``)."""

    source: str
    decode: str = "utf-8"
    markers_found: bool = True
    body_lines: Span = (0, 0)  # raw line range of the body between the markers
    dropped_paragraphs: list[str] = field(default_factory=list)
    n_paragraphs: int = 0
    n_verse_blocks: int = 0
    wrap_width: int = 0
    licence: str = "modern"  # modern | old (``*END*THE SMALL PRINT!``)
    title: str | None = None  # the header's ``Title:`` and ``Author:`` fields
    author: str | None = None
    dropped_notes: list[str] = field(default_factory=list)  # Gutenberg/transcriber notes (first 80 chars)
    dropped_chars: int = 0  # characters of dropped credits, epilogue lines and notes


@dataclass
class CleanedText:
    text: str
    paragraphs: list[Span]  # char spans of paragraphs in ``text``
    source_map: list[Span]  # raw line ranges [a, b) of each paragraph
    report: CleanReport


_BINARY_MAGIC = ((b"PK\x03\x04", "zip (xlsx, docx, epub or zip)"), (b"\x1f\x8b", "gzip-compressed"),
                 (b"%PDF", "PDF"), (b"\xd0\xcf\x11\xe0", "MS Office (xls, doc)"),
                 (b"\xfd7zXZ", "xz-compressed"))
_C1_RE = re.compile("[\u0080-\u009f]")
_LATIN1 = ("iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "iso-latin-1")


def decode_gutenberg(data: bytes, source: str) -> tuple[str, str]:
    """Decode raw bytes; returns ``(text, how)``."""
    if not data.strip():
        raise GutenbergFormatError(f"{source}: file is empty")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError as err:
            raise GutenbergFormatError(f"{source}: UTF-16 byte-order mark but undecodable ({err})") from err
    if data[:4000].count(b"\x00") > len(data[:4000]) // 4:
        raise GutenbergFormatError(f"{source}: looks like UTF-16 without a byte-order mark (NUL bytes); "
                                   "re-save it as UTF-8")
    for magic, kind in _BINARY_MAGIC:
        if data.startswith(magic):
            raise GutenbergFormatError(f"{source}: this is a {kind} file, not a plain text (.txt) file; "
                                       "extract or export the text first")
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError as err:
        m = _CHARSET_RE.search(data[:5000])
        declared = m.group(1).decode("ascii").lower() if m else None
        if declared and declared.replace("-", "").replace("_", "") != "utf8":
            try:
                text = data.decode(declared)
            except (LookupError, UnicodeDecodeError):
                pass
            else:
                # Windows-1252 bytes (curly quotes, dashes: 0x80-0x9F) in a file declaring Latin-1 decode
                # to C1 control characters, which no Latin-1 text contains: the file is cp1252
                if declared.replace("_", "-") in _LATIN1 and _C1_RE.search(text):
                    try:
                        return data.decode("cp1252"), f"cp1252 (declared:{declared}; its bytes 0x80-0x9f are cp1252)"
                    except UnicodeDecodeError:  # 0x81/0x8d/0x8f/0x90/0x9d are undefined in cp1252
                        pass
                return text, f"declared:{declared}"
        if b"\x00" in data[:4000] or sum(b < 9 or 13 < b < 32 for b in data[:4000]) > len(data[:4000]) // 100 + 1:
            raise GutenbergFormatError(f"{source}: binary data (control bytes), not a text file")
        raise GutenbergFormatError(
            f"{source}: not valid UTF-8 (byte {err.start}: {data[err.start:err.start + 1]!r}) and no "
            f"usable 'Character set encoding' declared in the header (declared: {declared}); "
            "re-save it as UTF-8 (e.g. `iconv -f cp1252 -t utf-8`)"
        ) from err


def _find_markers(lines: list[str], source: str, missing_markers: str, report: CleanReport) -> Span:
    starts = [i for i, ln in enumerate(lines) if _START_RE.match(ln)]
    ends = [i for i, ln in enumerate(lines) if _END_RE.match(ln)]
    if len(starts) > 1 or len(ends) > 1:
        raise GutenbergFormatError(
            f"{source}: several books in one file: START markers at lines {[i + 1 for i in starts]}, END "
            f"markers at lines {[i + 1 for i in ends]}; split the file into one book per file")
    start = starts[0] if starts else None
    old = False
    if start is None:
        # old licence format: "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver...*END*"
        head = lines[:max(400, len(lines) * 2 // 5)]
        olds = [i for i, ln in enumerate(head) if _OLD_START_RE.match(ln)]
        if olds:
            start, old = olds[-1], True
            report.licence = "old"
    if start is None:
        msg = f"{source}: no '*** START OF THE PROJECT GUTENBERG EBOOK' marker (nor the old '*END*THE SMALL PRINT!')"
        if missing_markers == "error":
            raise NoStartMarker(msg + " (pass missing_markers='keep' to keep the whole text)")
        log.warning("%s; keeping the whole text", msg)
        report.markers_found = False
        return 0, len(lines)
    body_start = start + 1
    # the marker may wrap: "*** START OF THIS PROJECT GUTENBERG EBOOK\nTHE STRANGE CASE ... ***"
    if not old and lines[start].rstrip().count("*") < 6:
        body_start = next((j + 1 for j in range(start + 1, min(start + 3, len(lines)))
                           if lines[j].rstrip().endswith("***")), body_start)
    if old:
        end = next((i for i in range(len(lines) - 1, body_start - 1, -1) if _OLD_END_RE.match(lines[i])
                    or _EPILOGUE_RE.match(lines[i].strip())), None)
    else:
        end = next((i for i in range(body_start, len(lines)) if _END_RE.match(lines[i])), None)
    if end is None:
        msg = f"{source}: START marker found but no '*** END OF THE PROJECT GUTENBERG EBOOK' marker"
        if missing_markers == "error":
            raise GutenbergFormatError(msg + " (pass missing_markers='keep' to keep the rest)")
        log.warning("%s; keeping everything after START", msg)
        report.markers_found = False
        end = len(lines)
    return body_start, end


MIN_WRAP_WIDTH = 66


def _is_verse_block(block: list[str], width: int) -> bool:
    """A multi-line block whose non-final lines are mostly far shorter than the wrap width."""
    if len(block) < 2 or width <= 0:
        return False
    lines = [ln.strip() for ln in block]
    # a prose paragraph that ends in a letter's signature ("Yours truly," / "Mr. Clayton") is prose
    k = len(lines)
    while k > 0 and len(lines) - k < 3 and len(lines[k - 1]) < 0.6 * width:
        k -= 1
    if k >= 2 and k < len(lines) and all(len(ln) >= 0.6 * width for ln in lines[:k - 1]):
        return False
    body = lines[:-1]
    # mostly short lines; an enumerated list ("I. THE CLOACA ...", "II. EXPLANATION") keeps one item per line,
    # and so does a contents list typed with page numbers at the right margin ("The Happy Prince      25")
    return (sum(1 for ln in body if len(ln) < 0.6 * width) * 2 >= len(body)
            or sum(1 for ln in lines if _ITEM_RE.match(ln)) * 3 >= len(lines) * 2
            or _counted_items(lines) >= 3 and _counted_items(lines) * 2 >= len(lines)  # items over two lines
            or sum(1 for ln in block if _is_listed(ln)) * 2 >= len(block))


def clean_gutenberg_text(raw: str | bytes, source: str = "<text>", missing_markers: str = "error",
                         decode: str | None = None) -> CleanedText:
    """Clean a raw Gutenberg book (str or bytes) into paragraphs with a source-line map."""
    report = CleanReport(source=source)
    if isinstance(raw, bytes):
        raw, report.decode = decode_gutenberg(raw, source)
    elif decode:
        report.decode = decode
    if not raw.strip():
        raise GutenbergFormatError(f"{source}: file is empty")
    lines = raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    body_start, body_end = _find_markers(lines, source, missing_markers, report)
    report.body_lines = (body_start, body_end)
    header = "\n".join(lines[:min(body_start, 400)])
    report.title, report.author = gutenberg_title(header), gutenberg_author(header)

    blocks: list[tuple[int, int]] = []  # raw line ranges of non-blank blocks
    i = body_start
    while i < body_end:
        if not lines[i].strip():
            i += 1
            continue
        j = i + 1
        # an anchor tag line ("ACT_3|SC_1", markup of some play e-texts) starts a new paragraph: the
        # heading under it is not glued to the speech above it
        while j < body_end and lines[j].strip() and not _ANCHOR_LINE_RE.match(lines[j].strip()):
            j += 1
        blocks.append((i, j))
        i = j

    def joined(block: tuple[int, int], sep: str = " ") -> str:
        return sep.join(_WS_RE.sub(" ", x.strip()) for x in lines[block[0]:block[1]])

    # drop the producer credit right after START and the "End of the Project Gutenberg" line
    if report.markers_found:
        while len(blocks) > 1 and _CREDIT_RE.match(lines[blocks[0][0]].strip()):
            report.dropped_paragraphs.append(joined(blocks.pop(0)))
        while len(blocks) > 1 and _EPILOGUE_RE.match(lines[blocks[-1][0]].strip()):
            report.dropped_paragraphs.append(joined(blocks.pop()))
    # Gutenberg banners and notes anywhere in the body ("<<THIS ELECTRONIC VERSION ...>>")
    if len(blocks) > 1:
        notes = [joined(blk) for blk in blocks if _NOTE_RE.match(lines[blk[0]].strip())]
        blocks = [blk for blk in blocks if not _NOTE_RE.match(lines[blk[0]].strip())]
        report.dropped_notes += [para[:80] for para in notes]
        report.dropped_chars += sum(map(len, notes))
    report.dropped_chars += sum(len(p) for p in report.dropped_paragraphs)
    if not blocks:
        raise GutenbergFormatError(f"{source}: no text between the Project Gutenberg markers")

    # a book of verse has only short lines: its 90th percentile is no wrap width (prose wraps at ~70)
    lengths = sorted(len(ln.strip()) for ln in lines[body_start:body_end] if ln.strip())
    width = lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0
    if body_end - body_start >= 200:  # a whole book, not a snippet
        width = max(width, MIN_WRAP_WIDTH)
    report.wrap_width = width
    verse = [_is_verse_block(lines[a:b], width) for a, b in blocks]
    report.n_verse_blocks = sum(verse)
    report.n_paragraphs = len(blocks)
    text, spans = join_paragraphs(joined(blk, "\n" if v else " ") for blk, v in zip(blocks, verse))
    return CleanedText(text, spans, blocks, report)


def clean_gutenberg_file(path: Path | str) -> CleanedText:
    """Read and clean one raw Gutenberg ``.txt`` file; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Gutenberg text {path} does not exist")
    return clean_gutenberg_text(path.read_bytes(), source=str(path))


def gutenberg_title(raw_header: str) -> str | None:
    """The ``Title:`` field of a Gutenberg header (continuation lines joined), if any."""
    m = re.search(r"^Title:[ \t]*(.+(?:\n[ \t]+\S.*)*)", raw_header, re.M)
    return " ".join(x.strip() for x in m.group(1).split("\n")) if m else None


def gutenberg_author(raw_header: str) -> str | None:
    """The ``Author:`` field of a Gutenberg header, if any."""
    m = re.search(r"^Author:[ \t]*(.+)$", raw_header, re.M)
    return m.group(1).strip() if m else None


def read_manifest(folder: Path) -> dict[str, str]:
    """``<data>/gutenberg/MANIFEST.tsv``: Gutenberg id -> GutenQA book name."""
    path = Path(folder) / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    rows = path.read_text(encoding="utf-8").splitlines()
    header = rows[0].split("\t") if rows else []
    if "pg_id" not in header or "gutenqa_book" not in header:
        raise GutenbergFormatError(f"{path}: expected columns gutenqa_book and pg_id, got {header}")
    ib, ip = header.index("gutenqa_book"), header.index("pg_id")
    return {cols[ip].strip(): cols[ib].strip() for cols in (row.split("\t") for row in rows[1:] if row.strip())}
