import pytest

from litseg_nb.core.schema import (Book, Chunk, CoverageError, Sentence, Unit, assert_full_coverage,
                              check_coverage, load_chunks, make_sentence_chunk, make_span_chunk,
                              save_chunks)

TEXT = "Title\n\nOne. Two two. Three!\n\nFour? Five."


def _book():
    # sentences of the unit starting after the title
    spans = [(7, 11), (12, 20), (21, 27), (29, 34), (35, 40)]
    sents = tuple(Sentence(i + 1, a, b) for i, (a, b) in enumerate(spans))
    unit = Unit("b", "u0", 0, "Title", 7, len(TEXT), sents)
    return Book("b", "B", "test", TEXT, units=[unit])


def test_sentence_offsets_slice_exactly():
    book = _book()
    u = book.units[0]
    assert [u.sentence_text(book.text, i) for i in range(1, 6)] == ["One.", "Two two.", "Three!", "Four?", "Five."]
    assert u.indexed_text(book.text).splitlines()[0] == "[1] One."


def test_coverage_reports_exact_missing_sentences():
    book = _book()
    u = book.units[0]
    chunks = [make_sentence_chunk(book, u, "m", 0, 1, 2), make_sentence_chunk(book, u, "m", 1, 4, 5)]
    rep = check_coverage(u, chunks)
    assert not rep.ok and rep.missing == (3,)
    with pytest.raises(CoverageError, match=r"unit u0: missing sentences \[3\]"):
        assert_full_coverage(book, chunks, "m")
    chunks.append(make_sentence_chunk(book, u, "m", 2, 2, 3))  # overlap is allowed
    assert check_coverage(u, chunks).ok
    assert_full_coverage(book, chunks, "m")


def test_coverage_flags_invalid_indices():
    book = _book()
    u = book.units[0]
    bad = Chunk("b", "u0", "x", "m", 1, 5, [(7, 40)], "t", "t", context_idx=[9])
    rep = check_coverage(u, [bad])
    assert rep.out_of_range == (9,) and not rep.ok


def test_span_chunk_computes_sentence_range_and_rejects_outside_spans():
    book = _book()
    u = book.units[0]
    c = make_span_chunk(book, u, "tok", 0, 15, 30)  # mid "Two two." to the start of "Four?"
    assert (c.from_idx, c.to_idx) == (2, 4)
    assert c.text == TEXT[15:30]
    with pytest.raises(ValueError, match="outside unit u0"):
        make_span_chunk(book, u, "tok", 0, 0, 10)


def test_chunks_round_trip(tmp_path):
    book = _book()
    u = book.units[0]
    chunks = [make_sentence_chunk(book, u, "m", 0, 1, 3, {"k": 1}), make_sentence_chunk(book, u, "m", 1, 3, 5)]
    chunks[0].context_idx = [5]
    chunks[0].subtitle = "A “quoted” subtitle"
    path = tmp_path / "chunks.jsonl"
    save_chunks(path, chunks)
    assert load_chunks(path) == chunks


def test_every_chunk_row_is_checked_naming_file_line_and_field(tmp_path):
    """One strict validator for every row read from a JSONL file: a chunk set and a chunker's text rows."""
    import json

    from litseg_nb.core.schema import RowError, TextRow, load_chunks, read_rows, save_chunks

    good = Chunk("b", "u1", "u1.c0000", "m", 1, 2, [(0, 5)], "hello", "hello")
    path = tmp_path / "set.jsonl"
    save_chunks(path, [good])
    assert load_chunks(path) == [good]
    for row, field in [({**good.to_json(), "from_idx": 1.5}, "from_idx"), ({**good.to_json(), "text": None}, "text"),
                       ({**good.to_json(), "spans": [[0, "5"]]}, "spans"), (5, "object")]:
        path.write_text(json.dumps(good.to_json()) + "\n\n" + json.dumps(row) + "\n")
        with pytest.raises(RowError, match=rf"set.jsonl: line 3: .*{field}"):
            load_chunks(path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"book_id": "b", "text": "x", "extra": 1}\n{"book_id": "b", "text": "y"}\n')
    seen = []
    assert [r.text for r in read_rows(rows, TextRow, progress=seen.append)] == ["x", "y"]
    assert sum(seen) == rows.stat().st_size  # progress: every byte read is reported
