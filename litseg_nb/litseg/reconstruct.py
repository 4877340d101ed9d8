"""Text reconstruction of LitSeg segments into :class:`~litseg_nb.core.schema.Chunk` records (3.1.2).

For each segment: context sentences outside the main range are ordered by their original
positions; those before the main range are prepended and those after it appended to the main
text; the subtitle is prepended to the result. The plain main text (a verbatim span of the book
text) and all character spans are kept:

* ``Chunk.text`` = ``subtitle`` + ``"\\n"`` + [context before] + ``"\\n"`` + main text + ``"\\n"`` +
  [context after] (empty parts and their separators are omitted; sentences inside a context
  group are joined with a space);
* ``Chunk.main_text`` = ``book.text[main_start:main_end]``;
* ``Chunk.spans`` = the spans of the context sentences before, the main span, the spans of the
  context sentences after, in source order (adjacent context sentences merged into one span);
  ``metadata["main_span"]`` is the main span alone.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..core.schema import Book, Chunk, Span, Unit, chunk_id
from .validate import Segment

METHOD = "litseg"


def _merge_spans(unit: Unit, indices: Sequence[int]) -> list[Span]:
    spans: list[Span] = []
    prev = None
    for i in indices:
        s = unit.sentences[i - 1]
        if prev is not None and i == prev + 1:
            spans[-1] = (spans[-1][0], s.end)
        else:
            spans.append((s.start, s.end))
        prev = i
    return spans


def reconstruct_segment(book: Book, unit: Unit, seg: Segment, ordinal: int, method: str = METHOD,
                        metadata: dict[str, Any] | None = None) -> Chunk:
    """One chunk from a *valid* segment (range inside the unit; see ``finalize_segments``)."""
    n = unit.n_sentences
    if not 1 <= seg.from_idx <= seg.to_idx <= n:
        raise ValueError(f"{method}: segment {seg.from_idx}-{seg.to_idx} invalid for unit "
                         f"{unit.unit_id} of book {book.book_id} ({n} sentences)")
    ctx = sorted({c for c in seg.context_idx if not seg.from_idx <= c <= seg.to_idx})
    bad = [c for c in ctx if not 1 <= c <= n]
    if bad:
        raise ValueError(f"{method}: context indices {bad} invalid for unit {unit.unit_id} of book {book.book_id}")
    before = [c for c in ctx if c < seg.from_idx]
    after = [c for c in ctx if c > seg.to_idx]
    main_start = unit.sentences[seg.from_idx - 1].start
    main_end = unit.sentences[seg.to_idx - 1].end
    main_text = book.text[main_start:main_end]

    def ctx_text(indices: list[int]) -> str:
        return " ".join(unit.sentence_text(book.text, i) for i in indices)

    body = "\n".join(p for p in (ctx_text(before), main_text, ctx_text(after)) if p)
    subtitle = seg.subtitle.strip()
    text = f"{subtitle}\n{body}" if subtitle else body
    spans = _merge_spans(unit, before) + [(main_start, main_end)] + _merge_spans(unit, after)
    meta = {"main_span": [main_start, main_end], **(metadata or {})}
    return Chunk(
        book_id=book.book_id,
        unit_id=unit.unit_id,
        chunk_id=chunk_id(unit.unit_id, ordinal),
        method=method,
        from_idx=seg.from_idx,
        to_idx=seg.to_idx,
        spans=spans,
        text=text,
        main_text=main_text,
        context_idx=ctx,
        subtitle=subtitle or None,
        metadata=meta,
    )


def reconstruct_unit(book: Book, unit: Unit, segments: Sequence[Segment], method: str = METHOD,
                     metadata: dict[str, Any] | None = None) -> list[Chunk]:
    """Chunks for all segments of one unit, in the given (source) order."""
    return [reconstruct_segment(book, unit, s, k, method, metadata) for k, s in enumerate(segments)]
