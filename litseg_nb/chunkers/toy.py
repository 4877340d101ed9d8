"""Toy :class:`~litseg_nb.core.schema.Book` construction from plain text (tests and demos only).

Units are separated by lines of ``###``; paragraphs by blank lines; sentences by a simple regex
(end punctuation followed by whitespace). Real runs use :func:`litseg_nb.corpus.load_corpus`.
"""
from __future__ import annotations

import re

from ..core.schema import Book, Sentence, Unit

_SENT = re.compile(r"\S.*?(?:[.!?]+[\"'’”)]*(?=\s|$)|$)", re.S)


def toy_book(text: str, book_id: str = "toy", title: str = "Toy Book") -> Book:
    units, paragraphs = [], []
    pos = 0
    parts = re.split(r"(\n###\n)", text)
    chunks, offset = [], 0
    for p in parts:
        if p != "\n###\n":
            chunks.append((offset, offset + len(p)))
        offset += len(p)
    for k, (a, b) in enumerate(chunks):
        sents, paras = [], []
        for pm in re.finditer(r"(?:[^\n]|\n(?![ \t]*\n))+", text[a:b]):
            pa, pb = a + pm.start(), a + pm.end()
            if not text[pa:pb].strip():
                continue
            paras.append((pa, pb))
            for sm in _SENT.finditer(text, pa, pb):
                s_end = sm.end()
                while s_end > sm.start() and text[s_end - 1].isspace():
                    s_end -= 1
                if s_end > sm.start():
                    sents.append(Sentence(len(sents) + 1, sm.start(), s_end))
        paragraphs.extend(paras)
        units.append(Unit(book_id, f"u{k:04d}", k, f"Unit {k}", a, b, tuple(sents), tuple(paras)))
    del pos
    return Book(book_id, title, "toy", text, paragraphs, units)
