"""`segment` never gives a silent wrong result.

Each test here failed before its fix (stated per test). All run `main()` in-process on the test
profile with rule-based methods (no model), except where a stand-in LLM error is injected.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

import litseg_nb
from litseg_nb import api
from litseg_nb.segmenters import registry
from litseg_nb.config import ConfigError
from litseg_nb.data.gutenberg import decode_gutenberg
from litseg_nb.llm.base import LLMError
from litseg_nb.cli import main

from fakes import stderr_lines

PLAIN = "The Lighthouse\n\nIt was a cold morning. The wind pushed against the glass. She had not slept.\n\n" \
        "Below, the harbour was waking. Fishermen shouted to each other. A dog barked twice.\n"


def paths_of(base):  # imported here: the module is new, the tests must fail on their own before it
    from litseg_nb.front.batch_segment import paths_of as p

    return p(base)


def verify_outputs(base: Path) -> dict[str, Any]:
    """Re-read one book's outputs and check them: each span slices the chunk's main text, each raw span holds
    its words, every sentence of every unit lies in a chunk. Counts, and ``ok`` when all of it holds."""
    from litseg_nb.core.schema import load_chunks

    p = paths_of(base)
    meta = json.loads(p["meta"].read_text(encoding="utf-8"))
    text = p["text"].read_text(encoding="utf-8")
    raw = Path(meta["input"]).read_text(encoding=meta["encoding"]) if meta.get("encoding") else None
    chunks = load_chunks(p["chunks"])
    n = span_ok = raw_ok = raw_none = 0
    for c in chunks:
        if not c.is_source_span:
            continue
        n += 1
        span_ok += "".join(text[a:b] for a, b in c.spans).strip() == c.main_text.strip()
        rs = c.metadata.get("raw_spans")
        if raw is None or not rs:
            raw_none += 1
            continue
        raw_ok += " ".join(" ".join(raw[a:b] for a, b in rs).split()) == " ".join(c.main_text.split())
    covered: dict[str, set[int]] = {}
    for c in chunks:
        covered.setdefault(c.unit_id, set()).update(range(c.from_idx, c.to_idx + 1))
    uncovered = [u["unit_id"] for u in meta["units"]
                 if not covered.get(u["unit_id"], set()) >= set(range(1, u["sentences"] + 1))]
    return {"chunks": n, "spans_exact": span_ok, "raw_spans_exact": raw_ok, "raw_spans_missing": raw_none,
            "units": meta["n_units"], "units_not_covered": uncovered,
            "ok": n == span_ok == raw_ok and not raw_none and not uncovered}


def _story(folder: Path, name: str = "story.txt", text: str = PLAIN) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(text, encoding="utf-8")
    return p


def _err_lines(capsys) -> list[str]:
    return stderr_lines(capsys.readouterr().err)


# ------------------------------------------------------------------ item 1: fallbacks, dead server
def test_fallback_none_is_not_counted(tmp_path, fresh_dirs, capsys, monkeypatch):
    # before: every chunk with metadata fallback="none" (a truthy string) counted as a fallback unit
    real = registry.segment_units

    def fake(method, items, cfg, *a, **kw):
        result = real(method, items, cfg, *a, **kw)
        chunks = result.chunks
        for c in chunks:
            c.metadata["fallback"] = "whole_unit" if c.unit_id == chunks[0].unit_id else "none"
        return result

    monkeypatch.setattr(registry, "segment_units", fake)
    src = _story(tmp_path, text=PLAIN + "\n\nCHAPTER II\n\nAnother day came. It rained.\n")
    assert api.count_fallbacks([]) == {}
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "-o",
                 str(tmp_path / "o.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "1 unit(s) fell back (whole_unit 1" in out
    meta = json.loads((tmp_path / "o.meta.json").read_text())
    assert meta["fallbacks"] == {"whole_unit": 1}


def test_llm_error_stops_writes_finished_units_and_resumes(data_dir, tmp_path, fresh_dirs, capsys, monkeypatch):
    # before: the LLMError escaped as a traceback and nothing was written
    real = registry.segment_units
    calls = {"n": 0}

    def dying(method, items, cfg, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise LLMError("openai backend http://127.0.0.1:9/v1: connection refused after 3 retries")
        return real(method, items, cfg, *a, **kw)

    monkeypatch.setattr(registry, "segment_units", dying)
    monkeypatch.setattr(api, "checkpoint_units", lambda cfg, needs_llm: 2)
    out = tmp_path / "alice.jsonl"
    argv = ["segment", str(data_dir / "gutenberg" / "11.txt"), "--method", "paragraph", "--profile", "test",
            "--max-units", "9", "-o", str(out)]
    assert main(argv) == 1
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "connection refused" in lines[0] and "127.0.0.1:9" in lines[0]
    assert "4 finished unit(s)" in lines[0] and "rerun to resume" in lines[0]
    meta = json.loads(paths_of(tmp_path / "alice")["meta"].read_text())
    assert meta["complete"] is False and meta["n_units"] == 4
    assert len({json.loads(x)["unit_id"] for x in out.read_text().splitlines()} - {"outside"}) == 4
    monkeypatch.setattr(registry, "segment_units", real)
    assert main(argv) == 0  # same input and settings: redone without --force
    assert json.loads(paths_of(tmp_path / "alice")["meta"].read_text())["n_units"] == 9


# ------------------------------------------------------------------ item 4: negative counts
def test_negative_max_units_is_an_error(tmp_path, fresh_dirs, capsys):
    # before: units[:-1] silently dropped the last unit (rc 0)
    with pytest.raises(ConfigError, match="max_units"):
        litseg_nb.segment(text=PLAIN, method="paragraph", profile="test", max_units=-1)
    src = _story(tmp_path)
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "--max-units", "-1"]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "--max-units" in lines[0]


# ------------------------------------------------------------------ item 5: cp1252 declared as Latin-1
def test_cp1252_bytes_in_a_latin1_file(tmp_path):
    # before: decoded as ISO-8859-1, giving C1 controls U+0093/U+0094 in the text
    data = (b"Title: X\r\nCharacter set encoding: ISO-8859-1\r\n\r\nShe said \x93caf\xe9\x94 \x97 twice.\r\n")
    text, how = decode_gutenberg(data, "x.txt")
    assert "\u201ccaf\u00e9\u201d \u2014" in text and not any("\x80" <= ch <= "\x9f" for ch in text)
    assert how.startswith("cp1252") and "declared:iso-8859-1" in how
    p = tmp_path / "x.txt"
    p.write_bytes(data)
    book = litseg_nb.load_text(p)
    assert book.meta["clean"]["decode"].startswith("cp1252") and book.meta["clean"]["encoding"] == "cp1252"
    # a real Latin-1 file (no C1 bytes) stays declared:iso-8859-1
    assert decode_gutenberg(b"Character set encoding: ISO-8859-1\n\ncaf\xe9\n", "y")[1] == "declared:iso-8859-1"


# ------------------------------------------------------------------ item 6: a path that does not exist
def test_missing_path_string_is_an_error_not_a_text(tmp_path, fresh_dirs):
    # before: segment("my_bok.txt") returned one chunk whose text was "my_bok.txt"
    for missing in ("my_bok.txt", str(tmp_path / "nope" / "book"), "books/emma.md"):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            litseg_nb.segment(missing, "paragraph", profile="test")
    with pytest.raises(FileNotFoundError):
        litseg_nb.segment(tmp_path / "book", "paragraph", profile="test")  # a Path is always a path
    chunks = litseg_nb.segment(text="my_bok.txt", method="paragraph", profile="test")  # explicit text
    assert chunks[0].main_text == "my_bok.txt"
    assert litseg_nb.segment("He said yes and/or no. Then left.", "paragraph", profile="test")  # a text
    with pytest.raises(TypeError):
        litseg_nb.segment(str(_story(tmp_path)), "paragraph", text=PLAIN, profile="test")


# ------------------------------------------------------------------ item 7: cleaned text, raw spans, titles
@pytest.mark.parametrize("method", ["paragraph", "token"])
def test_outputs_hold_text_raw_spans_and_titles(data_dir, tmp_path, fresh_dirs, method):
    # before: only the chunks were written; 0 spans sliced the input file; no unit titles
    books = [data_dir / "gutenberg" / f"{n}.txt" for n in ("11", "43", "46")]
    assert main(["segment", *map(str, books), "--method", method, "--profile", "test", "-o", str(tmp_path)]) == 0
    for b in books:
        base = tmp_path / f"{b.stem}.{method}"
        res = verify_outputs(base)
        assert res["ok"] and res["chunks"] > 50, res
        meta = json.loads(paths_of(base)["meta"].read_text())
        assert meta["complete"] and meta["encoding"] == "utf-8-sig" and all(u["title"] for u in meta["units"])
        rows = [json.loads(x) for x in paths_of(base)["chunks"].read_text().splitlines()[:5]]
        assert all(r["metadata"]["unit_title"] for r in rows if r["unit_id"] != "outside")  # title page: no unit


# ------------------------------------------------------------------ item 8: overwrites, collisions
def test_never_overwrites_input_or_foreign_output(tmp_path, fresh_dirs, capsys):
    # before: -o book.txt replaced the book; any output was replaced silently; same default name
    src = _story(tmp_path)
    before = src.read_bytes()
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "-o", str(src)]) == 2
    assert src.read_bytes() == before and "is an input book" in _err_lines(capsys)[0]
    named = _story(tmp_path, "c2.text.txt")  # -o c2.jsonl would write the cleaned text over it
    assert main(["segment", str(named), "--method", "paragraph", "--profile", "test", "-o",
                 str(tmp_path / "c2.jsonl")]) == 2
    assert "is an input book" in _err_lines(capsys)[0] and named.read_text() == PLAIN
    out = tmp_path / "c.jsonl"
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 0
    other = _story(tmp_path / "b", text="A different story. It is short.\n")
    assert main(["segment", str(other), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 2
    assert "--force" in _err_lines(capsys)[0]
    assert main(["segment", str(other), "--method", "paragraph", "--profile", "test", "-o", str(out),
                 "--force"]) == 0
    assert "different story" in out.read_text()
    # two story.txt in different folders: distinct default outputs, in one run and in two
    a, b = _story(tmp_path / "x"), _story(tmp_path / "y", text="Other words here. Yes.\n")
    assert main(["segment", str(a), str(b), "--method", "paragraph", "--profile", "test"]) == 0
    seg = Path(os.environ["LITSEG_OUTPUTS_DIR"]) / "test" / "segment"
    assert len(list(seg.glob("story-*.paragraph.jsonl"))) == 2
    assert main(["segment", str(a), str(b), "--method", "paragraph", "--profile", "test", "-o",
                 str(tmp_path / "lib")]) == 0
    assert len(list((tmp_path / "lib").glob("story-*.paragraph.jsonl"))) == 2


# ------------------------------------------------------------------ item 10: destination checked first
def test_unwritable_destination_before_work(tmp_path, fresh_dirs, capsys, monkeypatch):
    # before: the destination was first touched after all the work (a traceback at the end)
    src = _story(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("x")  # a folder below a file cannot be created, even by root
    called = []
    monkeypatch.setattr(api, "prepare_book", lambda *a, **k: called.append(1))
    assert main(["segment", str(src), "--method", "paragraph", "--profile", "test", "-o",
                 str(blocker / "sub" / "c.jsonl")]) == 2
    lines = _err_lines(capsys)
    assert not called and len(lines) == 1 and "not writable" in lines[0] and "afile" in lines[0]


def test_failed_write_leaves_no_tmp(tmp_path, fresh_dirs, monkeypatch):
    # a write that fails half-way (full disk) leaves no *.tmp* file and no complete meta
    from litseg_nb.core import safe_io

    src = _story(tmp_path)
    real = safe_io.write_text_atomic

    def full(path, text, encoding="utf-8"):
        with safe_io.atomic_path(path) as tmp:
            tmp.write_text(text[:5], encoding=encoding)
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_io, "write_text_atomic", full)
    with pytest.raises(OSError):
        from litseg_nb.front.batch_segment import _write_book

        _write_book(tmp_path / "o.paragraph", litseg_nb.load_text(src), [], {})
    monkeypatch.setattr(safe_io, "write_text_atomic", real)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]
    assert not (tmp_path / "o.paragraph.meta.json").exists()


# ------------------------------------------------------------------ item 11 / 16: one line, rc 2
def _bad_inputs(folder: Path) -> dict[str, Path]:
    import gzip

    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "empty": b"",
        "binary": bytes(range(256)) * 8,
        "xlsx": b"PK\x03\x04\x14\x00\x06\x00" + bytes(range(200)),
        "gz": gzip.compress(PLAIN.encode()),
        "cp1252": "Caf\u00e9 na\u00efve \u201cquoted\u201d. Another sentence.\n".encode("cp1252"),
        "utf16": ("Hello there. This is UTF-16.\n\nMore text.\n" * 5).encode("utf-16-le"),
        "twobooks": (b"*** START OF THE PROJECT GUTENBERG EBOOK A ***\nText one.\n*** END OF THE PROJECT GUTENBERG "
                     b"EBOOK A ***\n*** START OF THE PROJECT GUTENBERG EBOOK B ***\nText two.\n*** END OF THE "
                     b"PROJECT GUTENBERG EBOOK B ***\n"),
    }
    out = {}
    for k, v in files.items():
        out[k] = folder / f"{k}.txt"
        out[k].write_bytes(v)
    return out


BAD_INPUTS = ["empty", "binary", "xlsx", "gz", "cp1252", "utf16", "twobooks"]
BAD_OPTIONS = [
    (["--method", "nosuch"], "nosuch"),
    (["--method", "token", "--set", "token_chunk_size=0"], "token_chunk_size"),
    (["--method", "token", "--set", "token_chunk_size=10", "--set", "token_chunk_overlap=10"], "token_chunk_overlap"),
    (["--method", "recursive", "--set", "recursive_chunk_overlap=5000"], "recursive_chunk_overlap"),
    (["--method", "semantic", "--set", "semantic_breakpoint_percentile=150"], "semantic_breakpoint_percentile"),
    (["--method", "litseg", "--llm-backend", "openai"], "--base-url"),
    (["--method", "paragraph", "--set", "nosuch=1"], "nosuch"),
    (["--method", "paragraph", "-o", "x.csv"], "x.csv"),
]


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_is_one_line_rc2(kind, tmp_path, fresh_dirs, capsys):
    # before: an 18-64 line traceback (GutenbergFormatError escaped main), rc 1
    path = _bad_inputs(tmp_path)[kind]
    assert main(["segment", str(path), "--method", "paragraph", "--profile", "test",
                 "-o", str(tmp_path / "o.jsonl")]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and str(path) in lines[0], lines
    assert not list(tmp_path.glob("o.*"))


@pytest.mark.parametrize("argv,name", BAD_OPTIONS, ids=[n for _, n in BAD_OPTIONS])
def test_bad_option_is_one_line_rc2(argv, name, tmp_path, fresh_dirs, capsys):
    src = _story(tmp_path)
    assert main(["segment", str(src), "--profile", "test", *argv]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and name in lines[0], lines


# ------------------------------------------------------------------ a library
def test_library_run_lists_failures_and_resumes_after_interruption(data_dir, tmp_path, fresh_dirs, capsys,
                                                                   monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    for n in ("11", "43", "46"):
        shutil.copy(data_dir / "gutenberg" / f"{n}.txt", lib / f"{n}.txt")
    (lib / "broken.txt").write_bytes(b"")
    out = tmp_path / "out"
    from litseg_nb.core import schema
    from litseg_nb.core.safe_io import atomic_path

    real = schema.save_chunks
    seen = []

    def killed(path, chunks):  # the run is killed while writing the third book's chunks
        seen.append(path)
        if len(seen) == 3:
            with atomic_path(path) as tmp:
                tmp.write_text("partial", encoding="utf-8")
                raise KeyboardInterrupt
        return real(path, chunks)

    monkeypatch.setattr(schema, "save_chunks", killed)
    assert main(["segment", str(lib), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
    monkeypatch.setattr(schema, "save_chunks", real)
    assert json.loads((out / "46.paragraph.meta.json").read_text())["complete"] is False
    capsys.readouterr()
    assert main(["segment", str(lib), "--method", "paragraph", "--profile", "test", "-o", str(out)]) == 1
    cap = capsys.readouterr()
    table = cap.out
    assert table.count("skipped") == 2 and "46.txt" in table and "4 book(s): 1 segmented, 2 already complete, 1 failed" in table
    assert "broken.txt: GutenbergFormatError" in cap.err and "file is empty" in cap.err
    for n in ("11", "43", "46"):
        assert verify_outputs(out / f"{n}.paragraph")["ok"]
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
    # outputs written into the input folder are not taken for books on the next run
    assert main(["segment", str(out), "--method", "token", "--profile", "test", "-o", str(tmp_path / "o2")]) == 2
    assert "no such file, folder or matching .txt file" in capsys.readouterr().err


def test_registry_litseg_counter_ignores_fallback_none(monkeypatch):
    # before: sum(1 for r in records if r["fallback"]) counted the string "none" as a fallback
    import types

    from litseg_nb.litseg import segmenter  # binds annotate_units / records_to_chunks by name
    from litseg_nb.litseg.config import LitSegConfig
    from litseg_nb.segmenters.registry import Models

    records = [{"book_id": "b", "unit_id": str(i), "fallback": f, "segments": [], "fallback_types": [],
                "length_reference": None} for i, f in enumerate(["none", "whole_unit", "none"])]
    monkeypatch.setattr(segmenter, "annotate_units", lambda *a, **k: types.SimpleNamespace(records=records))
    monkeypatch.setattr(segmenter, "records_to_chunks", lambda books, recs: [])
    cfg = LitSegConfig.for_profile("test", calibrate=False)
    result = registry.REGISTRY["litseg"].run([], segmenter.LitSegOptions.of(cfg), Models())
    assert result.fallbacks == 1 and [r.fallback for r in segmenter.segment_units([], segmenter.LitSegOptions.of(cfg), None)[1]] == ["none", "whole_unit", "none"]


def test_library_units_of_several_books_share_a_batch(tmp_path, fresh_dirs, monkeypatch):
    # requests of several books in flight (bounded by the batch size), one file per book
    real = registry.segment_units
    calls = []

    def spy(method, items, cfg, *a, **kw):
        calls.append(sorted({b.source for b, _ in items}))
        return real(method, items, cfg, *a, **kw)

    monkeypatch.setattr(registry, "segment_units", spy)
    lib = tmp_path / "lib"
    for i in range(3):
        _story(lib, f"s{i}.txt", text=f"Story {i}. It was short.\n\nThe end came soon. Nobody minded.\n")
    assert main(["segment", str(lib), "--method", "paragraph", "--profile", "test", "-o", str(tmp_path / "o")]) == 0
    assert len(calls) == 1 and len(calls[0]) == 3
    for i in range(3):
        assert verify_outputs(tmp_path / "o" / f"s{i}.paragraph")["ok"]


@pytest.mark.slow
def test_library_resumes_after_kill_9(data_dir, tmp_path, fresh_dirs):
    # a real kill -9 of the command while it writes books; the rerun skips finished books
    import signal
    import subprocess
    import sys
    import time

    lib = data_dir / "gutenberg"
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(litseg_nb.__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "litseg_nb", "segment", str(lib), "--method", "paragraph", "--profile", "test",
           "-o", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if any(json.loads(m.read_text()).get("complete") for m in out.glob("*.meta.json")
               if m.stat().st_size):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert int(re.search(r"(\d+) already complete", res.stdout).group(1)) >= 1 and "11 book(s)" in res.stdout
    assert not [p for p in out.iterdir() if ".tmp" in p.name]
    for b in sorted(lib.glob("*.txt")):
        assert verify_outputs(out / f"{b.stem}.paragraph")["ok"]


def test_a_resumed_run_counts_the_words_outside_units_of_the_books_it_skips(fresh_dirs, capsys):
    from litseg_nb.cli import main

    text = "THE BOOK OF TESTS\n\nby A. Writer\n\nA dedication line for someone.\n\n" + "\n\n".join(
        f"CHAPTER {r}\n\n" + "\n\n".join("The man walked along the road and saw a tree. He sat down." for _ in range(8))
        for r in ("I", "II", "III"))
    books = [fresh_dirs / f"book{i}.txt" for i in (1, 2)]
    for b in books:
        b.write_text(text)
    totals = []
    for _ in range(2):  # the second run skips both books (complete)
        assert main(["segment", *map(str, books), "--method", "token", "--profile", "test"]) == 0
        line = [ln for ln in capsys.readouterr().out.splitlines() if "book(s):" in ln][0]
        totals.append(line.split("; ")[-1])
    assert "word(s) outside the narrative units" in totals[0] and totals[1] == totals[0]
