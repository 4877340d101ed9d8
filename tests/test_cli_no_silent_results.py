"""Typos, clashes and small CLI traps
are errors naming what is wrong, never a stand-in result with exit code 0. Each failed before its fix."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from litseg_nb.front.chunk_import import ChunkImportError, import_chunk_file
from litseg_nb.core.schema import Book, Chunk, Sentence, Unit, save_chunks


def _book() -> Book:
    paras = ["Emma smiled at her father. He was pleased.", "Mr. Knightley came in late and sat by the fire.",
             "Harriet had never seen such a fine house."]
    text = "\n\n".join(paras)
    spans, pos = [], 0
    for p in paras:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    sents = tuple(Sentence(i + 1, a, b) for i, (a, b) in enumerate(spans))
    unit = Unit("x", "u0000", 0, "I", 0, len(text), sents, tuple(spans), "dataset")
    return Book("x", "X", "gutenqa", text, spans, [unit])


def _chunk_file(tmp_path, texts):
    p = tmp_path / "chunks.jsonl"
    p.write_text("".join(json.dumps({"Chunk": t}) + "\n" for t in texts), encoding="utf-8")
    return p


# ------------------------------------------------------------------ item 3
def test_requested_chunk_set_that_does_not_exist_is_an_error(fresh_dirs):
    # before: discover_chunk_sets returned {} + missing and notebook 05 evaluated 'fallback-sent5' (rc 0)
    from litseg_nb.core.artifacts import artifact_path
    from litseg_nb.chunk_sets import EvaluationError
    from litseg_nb.chunk_sets import discover as discover_chunk_sets

    book = _book()
    save_chunks(artifact_path("test", "chunks", "token.jsonl"),
                [Chunk("x", "u0000", "c0", "token", 1, 3, [(0, len(book.text))], book.text, book.text)])
    with pytest.raises(EvaluationError, match=r"langchian not found.*chunk sets there: token"):
        discover_chunk_sets("test", ("langchian",))
    found, missing = discover_chunk_sets("test", ())  # nothing requested: every set found, the rest listed
    assert list(found) == ["token"] and "litseg" in missing


# ------------------------------------------------------------------ item 9
def test_import_cannot_replace_a_method_set_and_is_labelled(tmp_path, fresh_dirs):
    # before: --name token replaced notebook 04's token set and labelled the chunks method "token"
    from litseg_nb.core.artifacts import artifact_path

    book = _book()
    src = _chunk_file(tmp_path, ["Emma smiled at her father. He was pleased.", "Harriet had never seen such a fine house."])
    for name in ("token", "litseg", "lumber+merge"):
        with pytest.raises(ChunkImportError, match="one of this project's methods"):
            import_chunk_file("x", name, src, book=book, profile="test")
    native = artifact_path("test", "chunks", "my-run.jsonl")
    save_chunks(native, [Chunk("x", "u0000", "c0", "my-run", 1, 3, [(0, 5)], "Emma ", "Emma ")])
    with pytest.raises(ChunkImportError, match="was not imported"):
        import_chunk_file("x", "my-run", src, book=book, profile="test")
    chunks, rep = import_chunk_file("x", "tool-set", src, book=book, profile="test")
    assert all(c.metadata["imported"] for c in chunks) and rep.summary().startswith("imported tool-set")
    import_chunk_file("x", "tool-set", src, book=book, profile="test")  # re-importing one's own set is fine
    for bad in (-1.0, 0.0, 1.5):  # before: -1 accepted any text as a "fuzzy" match
        with pytest.raises(ChunkImportError, match="min-score"):
            import_chunk_file("x", "tool-set", src, book=book, profile="test", min_score=bad)


# ------------------------------------------------------------------ item 10 (import-chunks)
def test_import_into_unwritable_outputs_is_one_line(tmp_path, monkeypatch, capsys):
    # before: the alignment ran, then a PermissionError traceback at the end (and a .tmp file)
    from litseg_nb.cli import main

    blocker = tmp_path / "afile"
    blocker.write_text("x")  # outputs below a file: not creatable, even by root
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(blocker / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    src = _chunk_file(tmp_path, ["Emma smiled."])
    import litseg_nb.front.chunk_import as ci

    monkeypatch.setattr(ci, "load_book", lambda *a: pytest.fail("work started before the destination check"))
    assert main(["import-chunks", "--book", "x", "--name", "tool-set", "--from", str(src), "--profile", "test"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "not writable" in err[0] and "afile" in err[0]


# ------------------------------------------------------------------ item 11: a step-cache entry with missing keys
def test_step_cache_entry_missing_keys_is_a_miss(fresh_dirs):
    # before: KeyError 'run' traceback from book_runs._run_base on a hand-edited / older entry
    from litseg_nb.core.cache import CacheWarning, StepCache

    c = StepCache("chunks-x", config={"a": 1}, inputs={"b": 2}, required=("chunks", "run"))
    c.save({"chunks": []})
    with pytest.warns(CacheWarning, match=r"missing key\(s\) run"):
        assert not c.exists()
    assert not c.path.exists()
    c.save({"chunks": [], "run": {}})
    assert c.exists() and c.load() == {"chunks": [], "run": {}}


# ------------------------------------------------------------------ item 12
def test_common_units_restriction_names_the_set_and_the_fix():
    # before: "restricting to the 0 common unit(s) leaves no chunk in [...]" with no way out
    from litseg_nb.rag.pipeline import EvaluationError
    from litseg_nb.rag.report import restrict_to_units

    sets = {"token": [Chunk("x", "u0001", "c", "token", 1, 1, [(0, 1)], "a", "a")],
            "tool-set": [Chunk("x", "u0000", "c", "tool-set", 1, 1, [(0, 1)], "a", "a")]}
    with pytest.raises(EvaluationError, match=r"tool-set.*question_scope=all"):
        restrict_to_units(sets, set())


# ------------------------------------------------------------------ item 16: --only
@pytest.mark.parametrize("only,error", [("1,01", "twice"), (" ", "no notebook number"), (",", "no notebook number")])
def test_only_duplicates_and_blank_are_errors(only, error, capsys):
    # before: "1,01" ran 01 twice; " " ran every notebook
    from litseg_nb.cli import main

    assert main(["run", "--profile", "test", "--only", only]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and error in err[0] and "--only" in err[0]


# ------------------------------------------------------------------ item 16: download-data cleans up
def test_failed_download_leaves_no_cache_folder(tmp_path, monkeypatch):
    # before: dest/gutenqa/.cache/huggingface stayed behind after a failed download
    import huggingface_hub

    from litseg_nb.data.download import download

    def failing(repo, name, repo_type=None, local_dir=None):
        (Path(local_dir) / ".cache" / "huggingface" / "download").mkdir(parents=True)
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing)
    dest = tmp_path / "data"
    (dest / "keep").mkdir(parents=True)
    with pytest.raises(OSError, match="unreachable"):
        download(["gutenqa"], dest)
    assert sorted(p.name for p in dest.rglob("*")) == ["keep"]
    with pytest.raises(ValueError, match="no dataset"):
        download([], dest)


# ------------------------------------------------------------------ item 16: semantic chunker progress
def test_semantic_chunker_on_a_book_shows_progress():
    # before: encode() was called without show_progress: a 170 s silent wait on a 488 KB book
    import numpy as np

    from litseg_nb.chunkers.splitters import PROGRESS_MIN_TEXTS, semantic_chunks_many

    n = PROGRESS_MIN_TEXTS + 10
    text = " ".join(f"Sentence number {i} is here." for i in range(n))
    sents, pos = [], 0
    for i in range(n):
        s = f"Sentence number {i} is here."
        sents.append(Sentence(i + 1, pos, pos + len(s)))
        pos += len(s) + 1
    unit = Unit("b", "u0", 0, "I", 0, len(text), tuple(sents), ((0, len(text)),))
    book = Book("b", "B", "text", text, [(0, len(text))], [unit])
    seen = []

    class Emb:
        def encode(self, texts, kind="passage", show_progress=False):
            seen.append(show_progress)
            return np.random.default_rng(0).normal(size=(len(texts), 4)).astype(np.float32)

    chunks = semantic_chunks_many([(book, unit)], Emb(), 95.0, 1)
    assert seen == [True] and chunks[0]
