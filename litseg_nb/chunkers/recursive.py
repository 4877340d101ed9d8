"""Recursive character splitter: LangChain's ``RecursiveCharacterTextSplitter`` with exact spans.

LangChain produces the chunk *texts*; its own ``add_start_index`` guesses each start with
``text.find(chunk, previous_start + previous_len - overlap)``, which is wrong when the overlap is
not exactly reproduced or text repeats. Here each chunk is located by construction bounds:

* chunks come out in document order and, with ``keep_separator`` set, each is a contiguous
  substring of the input (whitespace-stripped);
* the next chunk starts strictly after the previous chunk's start and no earlier than the previous
  chunk's end minus the overlap (the merge step keeps at most ``chunk_overlap`` characters of the
  previous chunk);

so the first occurrence at or after ``max(prev_start + 1, prev_end - overlap)`` is its position.
Every located span is verified (``text[span] == chunk``) and the whole unit is checked for gaps
containing anything but whitespace; a violation raises instead of silently losing text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..config import ConfigError, Options, at_least
from ..core.schema import Book, Chunk, Span, Unit
from .base import ChunkerError, chunks_from_spans, where



def make_recursive_splitter(chunk_size: int, chunk_overlap: int, separators: Sequence[str]):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=list(separators),
        keep_separator="end", strip_whitespace=True, length_function=len,
    )


def locate_chunks(text: str, pieces: Sequence[str], overlap: int) -> list[Span]:
    """Exact ``[start, end)`` of each chunk text in ``text`` (see the module docstring)."""
    spans: list[Span] = []
    prev_start, prev_end = -1, 0
    for k, piece in enumerate(pieces):
        if not piece:
            continue
        lo = max(prev_start + 1, prev_end - overlap, 0)
        pos = text.find(piece, lo)
        if pos < 0:
            raise ChunkerError(f"recursive: chunk {k} ({piece[:40]!r}...) not found after offset {lo}")
        if text[prev_end:pos].strip() and pos > prev_end:
            raise ChunkerError(f"recursive: text between chunks {k - 1} and {k} would be lost: "
                               f"{text[prev_end:pos][:60]!r}")
        spans.append((pos, pos + len(piece)))
        prev_start, prev_end = pos, max(prev_end, pos + len(piece))
    if text[prev_end:].strip():
        raise ChunkerError(f"recursive: trailing text would be lost: {text[prev_end:][:60]!r}")
    return spans


def recursive_chunks(book: Book, unit: Unit, splitter, chunk_overlap: int,
                     method: str = "recursive") -> list[Chunk]:
    text = unit.text(book.text)
    pieces = splitter.split_text(text)
    try:
        spans = locate_chunks(text, pieces, chunk_overlap)
    except ChunkerError as e:
        raise ChunkerError(f"{e} ({where(book, unit)})") from e
    return chunks_from_spans(book, unit, method, [(unit.start + a, unit.start + b) for a, b in spans])


@dataclass(frozen=True)
class RecursiveOptions(Options):
    """Options of the ``recursive`` method (LangChain's RecursiveCharacterTextSplitter, characters)."""

    recursive_chunk_size: int = at_least(1800, 1)  # characters (LangChain measures len())
    recursive_chunk_overlap: int = at_least(200, 0)  # < recursive_chunk_size
    # LitSeg App. H: "paragraph breaks, newlines, punctuation, and whitespace"
    recursive_separators: tuple[str, ...] = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ", "")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recursive_chunk_overlap >= self.recursive_chunk_size:
            raise ConfigError(f"{type(self).__name__}.recursive_chunk_overlap: {self.recursive_chunk_overlap} must be "
                              f"below recursive_chunk_size ({self.recursive_chunk_size})")
