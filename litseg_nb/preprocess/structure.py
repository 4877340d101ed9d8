"""Structure-driven splitting of a cleaned book into narrative units (paper §3.1.2).

Input: the cleaned text and its paragraph spans (see :mod:`litseg_nb.data.gutenberg`). Output:
:class:`~litseg_nb.core.schema.Unit` records over the book's *narrative* paragraphs, with sentences
indexed 1..N. Non-narrative matter (title pages, contents, editors' and translators' prefaces,
indexes, addenda, notes) is kept in the text but belongs to no unit; it is listed, with character
spans, in :attr:`StructureReport.dropped` and :func:`check_unit_coverage` checks that every other
character is in exactly one unit.

**Headings** are short paragraphs (at most 3 lines, 120 characters, 18 words; or a keyword line
such as ``CHAPTER THE FIRST.`` over up to three lines of title in capitals) that do not start
with a quotation mark, of these kinds, each with a nesting rank (lower = outer):

====================  ====  ===========================================================
kind                  rank  examples
====================  ====  ===========================================================
volume                0     ``VOLUME I``, ``VOL. II.``
book / part           1     ``BOOK I.``, ``PART ONE``, ``FIRST PART``, ``Book the Second``
act                   2     ``ACT I.``, ``FIRST ACT`` (plays)
title                 2     a contents entry found in the body (``THE SISTERS``), a titled
                            part (``THE RED CAPTAIN.—II.``), capitals inside a part
chapter-like          3     ``CHAPTER I``, ``LETTER II.``, ``STAVE I: ...``, ``CANTO IV``,
                            ``LECTURE I``, ``[CHAPTER I]``, ``Purgatorio: Canto I``
numbered title        3     ``I. A SCANDAL IN BOHEMIA``, ``I. LOUISE ... TO RENEE ...``
scene                 4     ``SCENE II.`` (``ACT I. SCENE I.`` is an act and a scene)
numeral               5     a bare ``I``, ``II.``, ``3``
special               -     ``PREFACE``, ``PROLOGUE``, ``EPILOGUE``, ``INTRODUCTION``,
                            ``POSTSCRIPT``, ... (a narrative unit of its own, never a parent)
non-narrative         -     ``CONTENTS``, ``INDEX``, ``ADDENDUM``, ``TRANSLATOR'S PREFACE``,
                            ``EDITOR'S NOTE``, ``Introduction by <name>``, ``FOOTNOTES``, ...
====================  ====  ===========================================================

**Contents-aware search.** A contents block (``CONTENTS``, ``LIST OF CHAPTERS`` ... and its
entries) never yields units. Its entries are normalised (case, accents, punctuation, page numbers)
and looked up, in order, among the short paragraphs after the block through a dictionary (linear
time): a match makes that paragraph a heading (kind ``title`` unless it already has a kind), so
``I. THE OLD PYNCHEON FAMILY`` finds ``I The Old Pyncheon Family``. The load report counts entries
and matches.

**Numbering continuity.** Numbered headings of one kind and rank form series that count up (a
series restarts at one under a new parent or goes on from its last number, as chapters numbered
across books do; a repeated number is kept). A numbered heading that
breaks its series is not a heading (``L. FRANK BAUM`` after nothing numbered). A run of headings
that is followed by a restart of the same numbering without a parent between them, and has almost
no text between its members, is a table of contents typed as headings and is dropped.

**Unit level.** The unit is the *chapter-like* level (the paper's "top-level narrative
units", its prompts' ``[Chapter Text Content]``): a chapter inside a BOOK/PART, a story in a
collection, an act of a play. Numbered sections inside a unit (bare numerals, ``1. THE FIRST WEEK``,
scenes under an act, numerals under a story's title, Arabic sections inside Roman ``I. TITLE``
chapters, sections not listed by a contents list that lists the chapters) are not units: they are
recorded on the unit (:attr:`~litseg_nb.core.schema.Unit.sections`, start offset and title) and are the
preferred cut points of a recursive split. A preface/note/introduction is never a parent. A title
heading that would hold every section of the book is the book's title repeated: a parent. Two to
four word headings (no ``PART``) that each hold a run of at least five numerals restarting at 1 are
a novel's parts: parents, and the numerals are the chapters (more titles, or titles with a few
numbered sections each, are a collection's stories and stay the units); in a book whose only
headings are numerals, the capital lines right above two to four such restarting ``I`` are those
parts' titles. The
rules and the report's ``level_notes`` (chosen level, rejected levels and why) are in
:mod:`.levels` and :mod:`.detect`.

**Nesting.** A heading is a parent when the next narrative heading is inner to it (a higher rank).
A unit's title carries its parents (``BOOK I / CHAPTER III``); the text between a parent heading
and its first child belongs to the first child unless it is longer than
:data:`CONTAINER_GAP_WORDS` (then the parent's introduction is a unit of its own). A heading
immediately followed by a short title paragraph takes it into its title. In verse-dominated books
(poetry) bare numerals under a title are sections of one poem; a poetry book without headings
gets one unit per capitalised title over verse, a prose book without headings divided by capital
lines over story-sized prose one unit per story. Inside a PART/BOOK without child headings,
capitalised short lines are its chapters (not a quoted name in capitals ending in a full stop,
``"JOHN SMITH."``: a letter's signature). A PART/BOOK line between a chapters-only contents list
and the first chapter opens the body (PART I keeps its chapters). A heading with no text under it
(a repeated title, ``Volume II.`` on a title page) is not a unit.

**Front matter.** Before the first heading, narrative prose (at least :data:`FRONT_NARRATIVE_WORDS`
words in paragraphs that read as prose, outside contents and non-narrative sections) is a unit
titled by the book (``whole_title``), starting at its first prose paragraph. Prose before a
contents list or a preface is front matter unless it is long (``LONG_FRONT_WORDS`` = 500 prose
words: an author's sketch before the contents, a first chapter whose heading was missed): then it
is a unit, titled by the title lines right above it; so is shorter prose there (at least
:data:`FRONT_NARRATIVE_WORDS` words) that reads as the story's opening: at least two quoted speeches
and not one word about books, authors, editions, readers or tales. An opening preface that is the only heading
and holds most of the book ends at a paragraph-level cue (its signature or a dated line, a rule,
the book's title); the narrative after it is a unit. A ``Contents`` header standing over the
first heading and its title line, then prose, is no list: that heading opens the narrative. A
preface signed by one of the story's people (the signer's surname recurs in the story) that never
names the author is part of the fiction and a unit, as a framing introduction that never names the
author already is; other prefaces signed by someone else are an editor's. ``front_decision`` and ``preface_decision`` in
the report say what was decided. A book without headings is one unit (``split="whole"``) over the
same narrative span.

**Recursive splitting.** A unit longer than ``max_unit_words`` (the paper's *n*) is split greedily:
its sections are packed whole while the piece stays within *n* words; a section longer than *n* is
packed by atoms — whole paragraphs, or, for a paragraph longer than *n*, its sentences
(``split="recursive"``, ids ``<unit>.<k>``). A single sentence longer than *n* words is cut at
whitespace into pieces of at most *n* words, and the pieces are indexed as sentences (counted in the
unit's sentence list; nothing is lost).

Modules: :mod:`.headings` (lexicon, classification, report), :mod:`.contents` (contents lists and
matching), :mod:`.detect` (heading filters), :mod:`.levels` (the unit level), :mod:`.sections`
(section planning in phases), :mod:`.units` (unit building, coverage, structure table); this module
re-exports the public names.
"""
from __future__ import annotations

from .contents import _contents_blocks, _match_contents  # noqa: F401
from .detect import detect_headings  # noqa: F401
from .headings import (CONTAINER_GAP_WORDS, CONTAINER_KINDS, FRONT_MATTER, FRONT_NARRATIVE_WORDS,  # noqa: F401
                       RANKS, Heading, StructureReport, _classify, roman_to_int)
from .sections import plan_sections  # noqa: F401
from .units import build_units, check_unit_coverage, structure_table  # noqa: F401

__all__ = ["FRONT_MATTER", "Heading", "StructureReport", "build_units", "check_unit_coverage",
           "detect_headings", "plan_sections", "structure_table"]
