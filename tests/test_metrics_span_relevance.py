"""Span-based relevance: a chunk is relevant when its source spans in the cleaned book
text cover the evidence; it agrees with containment (the reference) on every verbatim chunk set and
credits rewritten chunks (propositions, completions) whose source holds the evidence."""
import random

import conftest
from litseg_nb.litseg.pipeline import reconstruct_unit
from litseg_nb.litseg.validate import Segment
from litseg_nb.metrics.retrieval import (evidence_char_spans, evidence_form, normalize_for_match, span_relevant,
                                         spans_cover)
from litseg_nb.core.schema import Book, Chunk, make_sentence_chunk

WORDS = ("Emma", "Harriet", "Knightley", "orchard", "letter", "carriage", "Mr.", "walked", "said", "never",
         "quite", "rain", "ball", "Highbury", "supper", "dance", "smiled", "away")
PUNCT = ("\u201cWell,\u201d", "\u2014", "it\u2019s", "Mrs.\u00a0Weston", "--", "\u2018No!\u2019")


def containment_relevant(chunks, evidence):
    """Indices of ``chunks`` whose text contains ``evidence`` (:func:`is_relevant`, the reference)."""
    ev = evidence_form(evidence)
    return {i for i, c in enumerate(chunks) if ev in normalize_for_match(c.text)}


def _book(seed=0, units=3, n=9):
    rng = random.Random(seed)

    def sentence(i: int, u: int, _book_id: str) -> str:
        words = [rng.choice(WORDS + PUNCT) for _ in range(rng.randint(4, 10))] + [f"w{u}x{i}"]
        return " ".join(words).capitalize() + rng.choice((".", "!", "?"))

    return conftest.make_book("b", units, n, sentence=sentence, sentence_sep=lambda: rng.choice((" ", "  ", "\n", " \n")),
                              unit_id="u{u}", title="Book b", dataset="gutenqa")


def _verbatim_sets(book):
    sets = {}
    for size, step in ((1, 1), (2, 2), (3, 2), (4, 3)):  # windows, some overlapping
        out = []
        for u in book.units:
            for k, lo in enumerate(range(1, u.n_sentences + 1, step)):
                out.append(make_sentence_chunk(book, u, f"w{size}", k, lo, min(u.n_sentences, lo + size - 1)))
        sets[f"window{size}/{step}"] = out
    lit = []  # LitSeg reconstruction: subtitles, overlaps, non-adjacent context sentences
    for u in book.units:
        segs = [Segment("The ball", 1, 4, [7]), Segment("Rain", 4, 6, [1, 2]), Segment("Supper", 7, 9, [5])]
        lit += reconstruct_unit(book, u, segs)
    sets["litseg"] = lit
    return sets


def test_span_relevance_agrees_with_containment_on_every_verbatim_chunk_set():
    """Contiguous verbatim chunks (windows, overlapping windows): identical relevant sets for 150 random
    evidence strings per book, inside and across sentences, with curly quotes, dashes, NBSP and
    irregular whitespace. LitSeg's reconstructed chunks: identical except at the junction of a
    non-adjacent context sentence (see below)."""
    for seed in range(3):
        book = _book(seed)
        rng = random.Random(seed)
        evidences = []
        for _ in range(150):  # substrings of the book text, inside a sentence or across sentences
            a = rng.randrange(len(book.text) - 5)
            ev = book.text[a:a + rng.randint(5, 120)]
            if ev.strip():
                evidences.append(ev)
        cache: dict = {}
        n_junction = 0
        for name, chunks in _verbatim_sets(book).items():
            for ev in evidences:
                by_span, by_text = span_relevant(chunks, book, ev, cache), containment_relevant(chunks, ev)
                if name != "litseg":
                    assert by_span == by_text, (name, ev)
                    continue
                # LitSeg joins a non-adjacent context sentence to the main text: containment may match a
                # string formed across that junction, which is not in the book; span relevance does not.
                # That is the only difference: the match lies in no single piece of the chunk's text.
                assert by_span <= by_text, (name, ev)
                for i in by_text - by_span:
                    pieces = chunks[i].text.split("\n")
                    assert not any(containment_relevant([Chunk("b", "", "", "", 1, 1, [], p, p)], ev) for p in pieces)
                    n_junction += 1
        assert n_junction <= 0.02 * len(evidences) * len(_verbatim_sets(book)["litseg"])


def test_rewritten_chunk_is_span_relevant_when_its_source_holds_the_evidence():
    book = _book(1)
    u = book.units[0]
    src = (u.sentences[2].start, u.sentences[4].end)
    evidence = book.text[u.sentences[3].start:u.sentences[3].end]
    prop = Chunk("b", u.unit_id, "p0", "proposition", 3, 5, [src], "Emma went to the ball.", "Emma went to the ball.",
                 is_source_span=False)
    other = Chunk("b", u.unit_id, "p1", "proposition", 6, 9, [(u.sentences[5].start, u.sentences[8].end)],
                  "It rained.", "It rained.", is_source_span=False)
    assert containment_relevant([prop, other], evidence) == set()  # the reference misses it
    assert span_relevant([prop, other], book, evidence) == {0}


def test_evidence_spans_tolerate_quotes_dashes_and_whitespace():
    text = "He said \u201cno\u201d \u2014 and  left.\nThen rain."
    assert evidence_char_spans(text, '"No" - and left. then') == [(8, 30)]  # \u201cno\u201d ... Then
    assert evidence_char_spans(text, "absent words") == []
    assert spans_cover([(0, 18), (20, 40)], 10, 30, text)  # a space-only gap between two spans
    assert not spans_cover([(0, 15), (25, 40)], 10, 30, text)
