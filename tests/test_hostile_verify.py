"""Hostile probes of the newer entry points (segment, API, lib: methods, adapters, import-chunks):
each case returned a wrong result with exit code 0 (or lost data) before its fix."""
from __future__ import annotations

import pytest

import litseg_nb
from litseg_nb.llm.base import BackendUnavailableError


class _DeadBackend:
    """A backend whose server is gone: every request raises, as the openai backend does after its retries."""
    model_id = "dead"

    def __init__(self):
        self.calls = 0

    def chat(self, *args, **kwargs):
        self.calls += 1
        raise BackendUnavailableError("openai server http://127.0.0.1:9/v1 (dead) unavailable: connection refused")


@pytest.fixture(scope="module")
def alice(data_dir):
    return litseg_nb.load_text(data_dir / "gutenberg/11.txt", max_unit_words=300)


def test_chonkie_slumber_with_a_dead_server_raises_not_whole_windows(alice):
    """chonkie's SlumberChunker catches every exception of its genie and keeps the window together:
    a dead server gave full-coverage chunks, 'no fallbacks' and exit 0."""
    from litseg_nb.chunkers.library import LibraryConfig
    from litseg_nb.segmenters.registry import chunk_units

    cfg = LibraryConfig.for_profile("test", chunk_size=60)
    dead = _DeadBackend()
    items = [(alice, u) for u in alice.units if u.n_sentences][:1]
    with pytest.raises(BackendUnavailableError, match="127.0.0.1:9"):
        chunk_units("lib:chonkie-slumber", items, cfg, backend=dead)
    assert dead.calls == 1  # the failed server is not asked again for every window and retry


@pytest.mark.parametrize("missing", ["my_bok.epub", "my_book", "Moby Dick.epub"])
def test_a_missing_file_name_without_txt_suffix_is_an_error_not_a_text(missing):
    # before: segment("my_bok.epub") / segment("my_book") returned one chunk whose text was the name
    with pytest.raises(FileNotFoundError, match="does not exist"):
        litseg_nb.segment(missing, "paragraph", profile="test")


def test_a_folder_is_named_as_a_folder(tmp_path):
    # before: "text file DIR does not exist" for a folder that exists
    for src in (str(tmp_path), tmp_path):
        with pytest.raises(IsADirectoryError, match="is a folder"):
            litseg_nb.load_text(src)


class _NoIndexBackend:
    """A live server whose replies never hold a passage index (as the test profile's random model)."""
    model_id = "noindex"

    def chat(self, convs, *args, **kwargs):
        from litseg_nb.llm.base import Generation

        return [Generation("I cannot tell.", 5, 4, 0.0) for _ in convs]


def test_library_fallbacks_reach_the_chunks_and_the_segment_summary(alice):
    """The library counted gap chunks, lost pieces and chonkie's kept-together windows as fallbacks,
    but no chunk said so: count_fallbacks (the segment summary and meta file) reported 'no fallbacks'."""
    from litseg_nb.api import count_fallbacks
    from litseg_nb.chunkers.library import AlignmentCounts, LibraryConfig, align_unit
    from litseg_nb.segmenters.registry import chunk_units

    cfg = LibraryConfig.for_profile("test", chunk_size=60)
    items = [(alice, u) for u in alice.units if u.n_sentences][:1]
    chunks, extra = chunk_units("lib:chonkie-slumber", items, cfg, backend=_NoIndexBackend())
    assert extra["genie_fallbacks"] > 0
    assert count_fallbacks(chunks) == {"genie_kept_together": 1}
    u = items[0][1]
    piece = alice.text[u.sentences[0].start:u.sentences[0].end]
    got = align_unit(alice, u, "lib:x", [piece, "words that are nowhere in this book at all"], AlignmentCounts())
    assert set(count_fallbacks(got)) == {"gap", "not_found"}


def test_import_of_a_second_book_keeps_the_first_books_report_and_an_empty_file_is_named(tmp_path, fresh_dirs):
    # before: <name>.import.json held only the last book's report; an empty file said "no column 'Chunk'"
    import json

    from litseg_nb.core.artifacts import artifact_path
    from litseg_nb.front.chunk_import import ChunkImportError, import_chunk_file

    books = {bid: litseg_nb.load_text(text=t, book_id=bid) for bid, t in
             (("b1", "Emma smiled at her father. He was pleased.\n\nThe end came soon."),
              ("b2", "Harriet had never seen such a fine house. She stared.\n\nThen she left."))}
    for bid, book in books.items():
        src = tmp_path / f"{bid}.jsonl"
        src.write_text(json.dumps({"Chunk": book.text.split("\n\n")[0]}) + "\n")
        import_chunk_file(bid, "tool-set", src, book=book, profile="test")
    rep = json.loads(artifact_path("test", "chunks", "tool-set.import.json").read_text())
    assert rep["book_id"] == "b2" and set(rep["books"]) == {"b1", "b2"}
    assert rep["books"]["b1"]["n_chunks"] == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ChunkImportError, match="no rows"):
        import_chunk_file("b1", "tool-set", empty, book=books["b1"], profile="test")


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_adapters_see_the_structure_of_a_windows_text(newline):
    # before: a CRLF (or CR) document passed to the adapters was one paragraph: no chapter found
    from litseg_nb.integrations import Segmenter

    body = " ".join(f"Body sentence number {i} goes on." for i in range(20))
    lf = "CHAPTER I\n\n" + body + "\n\nCHAPTER II\n\n" + body + "\n\nA last paragraph here."
    seg = Segmenter("paragraph", "test")
    want = [u.title for u in seg.book(lf).units]
    assert want == ["CHAPTER I", "CHAPTER II"]
    win = lf.replace("\n", newline)
    book = seg.book(win)
    assert [u.title for u in book.units] == want
    assert len(book.paragraphs) == len(seg.book(lf).paragraphs)


def test_text_outside_every_unit_is_chunked_or_reported_never_silently_dropped(tmp_path):
    """Words before the first heading that the structure rules call front matter are in no unit: they are
    chunked (unit ``outside``), or left out with ``--no-keep-outside-units``; either way the summary says how
    many and the meta lists their spans."""
    import json
    import subprocess
    import sys

    body = " ".join(f"Body {i} goes on." for i in range(60))
    book = tmp_path / "fm.txt"
    book.write_text(f"The treasure is under the oak. Remember it well, my son.\n\nCHAPTER I\n\n{body}\n\n"
                    f"CHAPTER II\n\n{body}\n", encoding="utf-8")
    out = tmp_path / "out" / "fm.jsonl"
    r = subprocess.run([sys.executable, "-m", "litseg_nb", "segment", str(book), "--method", "paragraph",
                        "--profile", "test", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "11 word(s) of the cleaned text are outside the narrative units" in r.stdout
    meta = json.loads(out.with_name("fm.meta.json").read_text())
    text = out.with_name("fm.text.txt").read_text(encoding="utf-8")
    (a, b), = meta["outside_units"]["spans"]
    assert meta["outside_units"]["words"] == 11 and "treasure" in text[a:b]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["unit_id"] for r in rows if "treasure" in r["text"]] == ["outside"]  # chunked, in a unit of its own
    r = subprocess.run([sys.executable, "-m", "litseg_nb", "segment", str(book), "--method", "paragraph",
                        "--profile", "test", "--no-keep-outside-units", "--force", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "11 word(s) of the cleaned text are outside the narrative units" in r.stdout and "not chunked" in r.stdout
    assert not any("treasure" in line for line in out.read_text().splitlines())  # left out on request: reported
