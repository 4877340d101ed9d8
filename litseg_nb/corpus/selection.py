"""Which units the LLM-based methods segment: one rule, one function.

Every stage that runs an LLM segmenter — LitSeg (notebook 02), LitSeg-Lite's chunk set (03), the
LLM baselines (04) and the ablations (07) — calls :func:`select_units` with its config's
:class:`~litseg_nb.config.UnitSelection` (the ``selection`` sub-config, set once per profile in
:data:`~litseg_nb.config.SHARED_PROFILE_DEFAULTS`), so they all see the same units and the RAG
evaluation (05) compares them on the same questions.
"""
from __future__ import annotations

from typing import Sequence

from ..config import UnitSelection
from ..core.schema import Book, Unit, word_count
from ..errors import UsageError
from ..metrics.retrieval import normalize_for_match


class SelectionError(UsageError, ValueError):
    """A unit selection that matches nothing or names units the corpus does not have."""


def book_matches(book: Book, wanted: Sequence[str]) -> bool:
    """Whether ``book`` is named in ``wanted`` (its id, or a substring of its title; case-insensitive)."""
    bid, title = book.book_id.lower(), book.title.lower()
    return any(w.lower() == bid or w.lower() in title for w in wanted)


def question_cover(book: Book, unit: Unit) -> set[str]:
    """Ids of the book's questions whose evidence string lies in ``unit`` (GutenQA): the test of
    :func:`~litseg_nb.metrics.retrieval.is_relevant`, with the unit's text normalised once for all the
    book's questions (not once per question: ``select_units`` runs this on every unit of the book, once
    per LLM method and per length-matching step in notebook 04)."""
    asked = [q for q in book.questions if q.evidence]
    if not asked:
        return set()
    text = normalize_for_match(unit.text(book.text))
    out = set()
    for q in asked:
        ev = normalize_for_match(q.evidence)
        if not ev:
            raise ValueError(f"{book.book_id}: question {q.qid} has an empty evidence string: relevance is undefined")
        if ev in text:
            out.add(q.qid)
    return out


def _fewest_covering(pairs: list[tuple[Book, Unit]], need: int) -> list[tuple[Book, Unit]]:
    """Greedy set cover: repeatedly the unit answering the most uncovered questions (fewer sentences
    first on ties, then corpus order) until ``need`` questions are covered."""
    cover = {i: {(b.book_id, q) for q in question_cover(b, u)} for i, (b, u) in enumerate(pairs)}
    cover = {i: c for i, c in cover.items() if c}
    got: set[tuple[str, str]] = set()
    chosen: list[int] = []
    while len(got) < need:
        gain = {i: len(c - got) for i, c in cover.items() if i not in chosen}
        if not gain or max(gain.values()) == 0:
            raise SelectionError(f"the selected units hold the evidence of only {len(got)} question(s); "
                                 f"min_questions={need}")
        best = min(gain, key=lambda i: (-gain[i], pairs[i][1].n_sentences, i))
        chosen.append(best)
        got |= cover[best]
    return [pairs[i] for i in sorted(chosen)]


def select_units(books: Sequence[Book], sel: UnitSelection) -> list[tuple[Book, Unit]]:
    """The ``(book, unit)`` pairs ``sel`` picks from ``books``, in corpus order (see :class:`UnitSelection`)."""
    candidates: list[tuple[Book, Unit]] = []
    for b in books:
        if sel.books and not book_matches(b, sel.books):
            continue
        units = [u for u in b.units if u.n_sentences
                 and not (sel.skip_units_over_words is not None
                          and word_count(u.text(b.text)) > sel.skip_units_over_words)]
        if sel.strategy == "questions":
            holding = [u for u in units if question_cover(b, u)]
            units = holding + [u for u in units if u not in holding]
        candidates.extend((b, u) for u in units)
    if sel.books and not candidates:
        raise SelectionError(f"selection.books={list(sel.books)} matches no unit of the books "
                             f"{[b.book_id for b in books]} (ids or title substrings; check skip_units_over_words)")
    if sel.units:
        named = {f"{b.book_id}/{u.unit_id}": (b, u) for b, u in candidates}
        missing = [k for k in sel.units if k not in named]
        if missing:
            raise SelectionError(f"selection.units not in the corpus: {missing}")
        candidates = [named[k] for k in sel.units]
    if sel.min_questions:
        candidates = _fewest_covering(candidates, sel.min_questions)
    if sel.max_units:
        candidates = candidates[:sel.max_units]
    order = {(b.book_id, u.unit_id): i for i, (b, u) in enumerate((b, u) for b in books for u in b.units)}
    return sorted(candidates, key=lambda p: order[(p[0].book_id, p[1].unit_id)])


def describe_selection(pairs: Sequence[tuple[Book, Unit]]) -> str:
    """``"8 unit(s), 147 sentences of gutenqa:Emma_-_Jane_Austen"`` for labels."""
    books = sorted({b.book_id for b, _ in pairs})
    return (f"{len(pairs)} unit(s), {sum(u.n_sentences for _, u in pairs)} sentences of "
            f"{', '.join(books) or 'no book'}")
