"""Aligning external chunk texts back to the cleaned book text (``import-chunks`` and the ``lib:`` methods).
"""
from __future__ import annotations

import difflib
import functools
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .schema import Book, Chunk, Unit
from ..errors import UsageError

#: quotes, apostrophes, dashes and hyphens to their ASCII form, soft hyphen dropped
QUOTE_MAP = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u0060": "'",
    "\u00b4": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u00ab": '"', "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
    "\u2010": "-", "\u2011": "-", "\u00ad": "",
}


def normalize_with_offsets(text: str, char_form: Callable[[str], str]) -> tuple[str, list[int]]:
    """``(normalised, offsets)``: each non-space character ``ch`` becomes ``char_form(ch)``, whitespace runs
    collapse to one space (leading/trailing dropped); ``offsets[k]`` is the index in ``text`` that gave
    ``normalised[k]``. Shared by the aligner and span-based relevance, each with its own ``char_form``."""
    out: list[str] = []
    pos: list[int] = []
    prev_space = True  # drops leading whitespace
    for i, ch in enumerate(text):
        for c in (" " if ch.isspace() else char_form(ch)):
            if c.isspace():
                if not prev_space:
                    out.append(" ")
                    pos.append(i)
                    prev_space = True
            else:
                out.append(c)
                pos.append(i)
                prev_space = False
    if out and out[-1] == " ":
        out.pop()
        pos.pop()
    return "".join(out), pos


class ChunkImportError(UsageError, ValueError):
    """The chunk file cannot be read, or the chunk set covers nothing of the book."""


def _align_form(ch: str) -> str:
    """The aligner's form of one character: quotes, dashes and hyphens (also ``\u2010``/``\u2011``)
    mapped before and after NFKC, lower-cased, soft hyphen dropped."""
    rep = QUOTE_MAP.get(ch)
    if rep is None:
        rep = unicodedata.normalize("NFKC", ch).lower()
        rep = "".join(QUOTE_MAP.get(c, c) for c in rep)
    return rep


# normalised text and, per normalised character, the index of the source character
normalize_with_map = functools.partial(normalize_with_offsets, char_form=_align_form)


@dataclass
class Alignment:
    index: int  # 0-based position in the chunk file
    quality: str  # exact | fuzzy | not_found
    method: str  # exact | normalised | anchored | none
    score: float
    start: int = -1
    end: int = -1
    out_of_order: bool = False


class BookAligner:
    """Locates chunk texts in one book's text (see the module docstring)."""

    def __init__(self, text: str, min_score: float = 0.8, probe_chars: int = 32, n_probes: int = 8):
        self.text = text
        self.norm, self.nmap = normalize_with_map(text)
        self.min_score = min_score
        self.probe_chars = probe_chars
        self.n_probes = n_probes

    def _n2o(self, nstart: int, nend: int) -> tuple[int, int]:
        """Normalised ``[nstart, nend)`` → source ``[start, end)`` (end after the last source char)."""
        return self.nmap[nstart], self.nmap[nend - 1] + 1

    def _anchored(self, nchunk: str, ncursor: int) -> tuple[int, int, float] | None:
        L = len(nchunk)
        k = min(self.probe_chars, L)
        if k < 8:
            return None
        offsets = sorted({round(j * (L - k) / max(1, self.n_probes - 1)) for j in range(self.n_probes)})
        votes: list[int] = []
        for off in offsets:
            p = self.norm.find(nchunk[off:off + k], ncursor)
            if p >= 0:
                votes.append(p - off)
        if not votes:
            return None
        votes.sort()
        tol = max(16, L // 5)
        best, best_n = votes[0], 0
        for v in votes:  # the estimate most other probes agree with
            n = bisect_right(votes, v + tol) - bisect_left(votes, v - tol)
            if n > best_n:
                best, best_n = v, n
        slack = max(32, L // 4)
        lo, hi = max(0, best - slack), min(len(self.norm), best + L + slack)
        region = self.norm[lo:hi]
        sm = difflib.SequenceMatcher(None, nchunk, region, autojunk=False)
        blocks = [b for b in sm.get_matching_blocks() if b.size >= 3]
        if not blocks:
            return None
        a0, a1 = lo + blocks[0].b, lo + blocks[-1].b + blocks[-1].size
        # the chunk's first/last few characters outside the solid blocks (a dropped or changed letter
        # near an edge): walk outwards matching them in order, skipping at most 8 book characters
        head, tail = blocks[0].a, blocks[-1].a + blocks[-1].size
        if 0 < head <= 8:
            j, pos, skips = head - 1, a0 - 1, 0
            while j >= 0 and pos >= lo and skips <= 8:
                if self.norm[pos] == nchunk[j]:
                    a0, j = pos, j - 1
                else:
                    skips += 1
                pos -= 1
        if 0 < L - tail <= 8:
            j, pos, skips = tail, a1, 0
            while j < L and pos < hi and skips <= 8:
                if self.norm[pos] == nchunk[j]:
                    a1, j = pos + 1, j + 1
                else:
                    skips += 1
                pos += 1
        score = difflib.SequenceMatcher(None, nchunk, self.norm[a0:a1], autojunk=False).ratio()
        return a0, a1, score

    def align(self, chunks: Sequence[str]) -> list[Alignment]:
        out: list[Alignment] = []
        cursor = 0  # source offset from which the next chunk is searched
        for i, raw in enumerate(chunks):
            chunk = raw.strip()
            nchunk = normalize_with_map(chunk)[0]
            al = None
            for forward in (True, False):
                start_o = cursor if forward else 0
                p = self.text.find(chunk, start_o) if chunk else -1
                if p >= 0:
                    al = Alignment(i, "exact", "exact", 1.0, p, p + len(chunk))
                elif nchunk:
                    ncur = bisect_left(self.nmap, start_o)
                    p = self.norm.find(nchunk, ncur)
                    if p >= 0:
                        al = Alignment(i, "fuzzy", "normalised", 1.0, *self._n2o(p, p + len(nchunk)))
                    else:
                        ah = self._anchored(nchunk, ncur)
                        if ah and ah[2] >= self.min_score:
                            al = Alignment(i, "fuzzy", "anchored", round(ah[2], 4), *self._n2o(ah[0], ah[1]))
                if al is not None:
                    al.out_of_order = not forward
                    break
            if al is None:
                out.append(Alignment(i, "not_found", "none", 0.0))
                continue
            out.append(al)
            if not al.out_of_order:
                cursor = al.start + 1
        return out


def _unit_ranges(units: Sequence[Unit], start: int, end: int) -> list[tuple[Unit, int, int, int]]:
    """``(unit, from_idx, to_idx, overlap_chars)`` for every unit whose sentences overlap the span."""
    out = []
    for u in units:
        if u.end <= start or u.start >= end:
            continue
        idx = [s.index for s in u.sentences if s.start < end and s.end > start]
        if idx:
            out.append((u, idx[0], idx[-1], min(end, u.end) - max(start, u.start)))
    return out


@dataclass
class ImportReport:
    book_id: str
    name: str
    source: str
    n_chunks: int
    n_empty_rows_skipped: int
    n_exact: int
    n_fuzzy: int
    n_not_found: int
    n_normalised: int  # fuzzy matches that are exact after whitespace/quote/dash normalisation (score 1.0)
    n_out_of_order: int
    n_outside_units: int  # aligned, but the span overlaps no sentence of any unit
    coverage: float  # share of the book's non-whitespace characters inside some aligned span
    overlap: float  # share of covered non-whitespace characters inside more than one span
    not_found_chars: int
    min_fuzzy_score: float | None
    not_found_indices: list[int] = field(default_factory=list)

    def summary(self) -> str:
        fz = (f" ({self.n_normalised} exact after whitespace/quote/dash normalisation; lowest score "
              f"{self.min_fuzzy_score:.3f})" if self.min_fuzzy_score is not None else "")
        return (f"imported {self.name} -> {self.book_id}: {self.n_chunks} chunks | aligned exact {self.n_exact}, "
                f"fuzzy {self.n_fuzzy}{fz}, not found {self.n_not_found} ({self.not_found_chars} chars; kept "
                f"for retrieval, flagged) | book coverage {100 * self.coverage:.2f}% | overlap "
                f"{100 * self.overlap:.2f}% | out of order {self.n_out_of_order} | outside units "
                f"{self.n_outside_units} | empty rows skipped {self.n_empty_rows_skipped}")


def _coverage(text: str, spans: Sequence[tuple[int, int]]) -> tuple[float, float]:
    import numpy as np

    depth = np.zeros(len(text) + 1, dtype=np.int32)
    for a, b in spans:
        depth[a] += 1
        depth[b] -= 1
    depth = np.cumsum(depth[:-1])
    solid = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    nonws = ~np.isin(solid, [ord(c) for c in " \t\n\r\f\v\u00a0\u2028\u2029"])
    total = int(nonws.sum())
    covered = int((nonws & (depth > 0)).sum())
    multi = int((nonws & (depth > 1)).sum())
    return (covered / total if total else 0.0), (multi / covered if covered else 0.0)


def import_chunks(book: Book, texts: Sequence[str], name: str, source: str = "", min_score: float = 0.8,
                  n_empty_rows: int = 0) -> tuple[list[Chunk], ImportReport]:
    """Align ``texts`` (in order) to ``book`` and return shared-schema chunks plus a report."""
    if not texts:
        raise ChunkImportError(f"{source or name}: no chunk texts to import")
    aligner = BookAligner(book.text, min_score=min_score)
    als = aligner.align(texts)
    chunks: list[Chunk] = []
    outside = 0
    for al, raw in zip(als, texts):
        md: dict[str, Any] = {"imported": True, "source": source, "source_index": al.index, "alignment": al.quality,
                              "alignment_method": al.method, "alignment_score": al.score}
        if al.quality == "not_found":
            chunks.append(Chunk(book.book_id, "", f"import.c{al.index:05d}", name, 0, 0, [], raw, "",
                                is_source_span=False, metadata=md))
            continue
        # trim whitespace the source span may carry at its ends (never text)
        a, b = al.start, al.end
        while a < b and book.text[a].isspace():
            a += 1
        while b > a and book.text[b - 1].isspace():
            b -= 1
        md["out_of_order"] = al.out_of_order
        ranges = _unit_ranges(book.units, a, b)
        if ranges:
            main = max(ranges, key=lambda r: r[3])
            unit_id, lo, hi = main[0].unit_id, main[1], main[2]
            md["unit_ranges"] = [[u.unit_id, f, t] for u, f, t, _ in ranges]
        else:
            outside += 1
            unit_id, lo, hi = "", 0, 0
            md["unit_ranges"] = []
            md["outside_units"] = True
        chunks.append(Chunk(book.book_id, unit_id, f"{unit_id or 'nounit'}.i{al.index:05d}", name, lo, hi,
                            [(a, b)], raw, book.text[a:b], metadata=md))
    spans = [s for c in chunks for s in c.spans]
    if not spans:
        raise ChunkImportError(f"{source or name}: none of the {len(texts)} chunks could be aligned to book "
                               f"{book.book_id!r} (is it the right book? the text column?)")
    cov, ovl = _coverage(book.text, spans)
    fuzzy = [al.score for al in als if al.quality == "fuzzy"]
    nf = [al for al in als if al.quality == "not_found"]
    rep = ImportReport(book.book_id, name, source, len(texts), n_empty_rows,
                       sum(al.quality == "exact" for al in als), len(fuzzy), len(nf),
                       sum(al.method == "normalised" for al in als),
                       sum(al.out_of_order for al in als), outside, cov, ovl,
                       sum(len(texts[al.index]) for al in nf), min(fuzzy) if fuzzy else None,
                       [al.index for al in nf])
    return chunks, rep
