"""Paragraph-level chunks (a row of LumberChunker's Table 1): one chunk per paragraph of the unit."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Options
from ..core.schema import Book, Chunk, Unit
from .base import chunks_from_spans, unit_paragraphs



def paragraph_chunks(book: Book, unit: Unit, method: str = "paragraph") -> list[Chunk]:
    return chunks_from_spans(book, unit, method, unit_paragraphs(book, unit))


@dataclass(frozen=True)
class ParagraphOptions(Options):
    """The ``paragraph`` method has no knob: one chunk per paragraph of the unit."""
