"""The one way the loaders build a book text: paragraphs joined by a blank line, with exact spans."""
from __future__ import annotations

from typing import Iterable

Span = tuple[int, int]

PARAGRAPH_SEP = "\n\n"


def join_paragraphs(paragraphs: Iterable[str]) -> tuple[str, list[Span]]:
    """``("a\\n\\nb", [(0, 1), (3, 4)])`` for ``["a", "b"]``: ``text[s:e]`` gives each paragraph back."""
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    for k, p in enumerate(paragraphs):
        if k:
            parts.append(PARAGRAPH_SEP)
            pos += len(PARAGRAPH_SEP)
        spans.append((pos, pos + len(p)))
        parts.append(p)
        pos += len(p)
    return "".join(parts), spans
