"""Normalising a text while keeping, for every character of the result, the offset of the source
character it came from — the shared loop of the chunk aligner (:func:`litseg_nb.core.chunk_align.normalize_with_map`)
and of span-based relevance (:func:`litseg_nb.metrics.retrieval.evidence_char_spans`). Each caller
gives its own per-character rule (they differ: see those functions)."""
from __future__ import annotations

from typing import Callable


def normalize_with_offsets(text: str, char_form: Callable[[str], str]) -> tuple[str, list[int]]:
    """``(normalised, offsets)``: every non-whitespace character ``ch`` of ``text`` becomes
    ``char_form(ch)`` (no, one or several characters); whitespace — in ``text`` and inside the forms —
    collapses to one space per run, mapped to the run's first character; leading and trailing
    whitespace is dropped. ``offsets[k]`` is the index in ``text`` of the character that gave
    ``normalised[k]``."""
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
