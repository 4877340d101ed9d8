"""A sweep of every subcommand with empty, malformed, unwritable and traversal-shaped arguments.

Each case must end in a short error (exit 2 for usage, 1 for a failure; argparse's own usage + error
lines count as one message), never a traceback, and write nothing outside the test's outputs folder:
neither in the checkout nor in the working directory. No case starts real work (no notebook kernel,
no download, no model): every argument is checked before any."""
from __future__ import annotations

import subprocess

import pytest

from litseg_nb.cli import main

from fakes import stderr_lines

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _cases(tmp):
    afile = tmp / "a-file.txt"
    book = tmp / "book.txt"
    return [
        # run / config / list
        ["run", "--profile", "nope"],
        ["run", "--only", "99"],
        ["run", "--only", "../01"],
        ["run", "-p", "max_books"],
        ["run", "-p", "max_books=abc", "--only", "01"],
        ["run", "--set", "=", "--only", "01"],
        ["run", "--set", "no_such.field=1", "--only", "01"],
        ["config", "--notebook", "../../etc"],
        ["config", "--set", "llm.base_urls=[[["],
        # segment
        ["segment"],
        ["segment", ""],
        ["segment", str(tmp / "missing.txt")],
        ["segment", str(book), "--method", ""],
        ["segment", str(book), "--method", "../token"],
        ["segment", str(book), "--method", "token", "-o", str(afile / "x.jsonl")],
        ["segment", str(book), "--method", "token", "--max-units", "-1"],
        ["segment", str(book), "--method", "token", "--set", "=="],
        ["segment", str(book), "--method", "token", "--chunk-size", "0"],
        ["segment", str(book), "--method", "token", "--chunk-size", "-1"],
        ["segment", str(book), "--method", "token", "--chunk-size", "x"],
        ["segment", str(book), "--method", "token", "--chunk-size", ""],
        ["segment", str(book), "--method", "token", "--chunk-size", "1e9"],
        ["segment", str(book), "--method", "lumber", "--base-url", "ftp://x/v1"],
        ["segment", str(book), "--method", "lumber", "--base-url", ""],
        # segment --ray: bad addresses, secrets, traversal, sizing without --ray (refused before Ray starts)
        ["segment", str(book), "--method", "token", "--ray", "../../etc:1"],
        ["segment", str(book), "--method", "token", "--ray", "http://user:s3cret@head:6379"],
        ["segment", str(book), "--method", "token", "--ray", ""],
        ["segment", str(book), "--method", "token", "--ray", "head:70000"],
        ["segment", str(book), "--method", "token", "--ray-actors", "3"],
        ["segment", str(book), "--method", "token", "--ray", "--ray-gpus", "-1"],
        # boundaries
        ["boundaries", "--profile", "test", "--name", "../../../README"],
        ["boundaries", "--profile", "test", "--method", ","],
        ["boundaries", "--profile", "test", "--method", ""],
        ["boundaries", "--profile", "test", "--export-windows", str(afile / "w.jsonl")],
        ["boundaries", "--profile", "test", "--chunks", str(tmp / "missing.jsonl")],
        ["boundaries", "--profile", "test", "--llm-windows", "abc"],
        # import-chunks
        ["import-chunks", "--book", "", "--name", "x", "--from", str(afile)],
        ["import-chunks", "--book", "gutenqa:Emma_-_Jane_Austen", "--name", "../../x", "--from", str(afile)],
        ["import-chunks", "--book", "gutenqa:Emma_-_Jane_Austen", "--name", "ok-name", "--from", str(tmp / "none.jsonl")],
        ["import-chunks", "--book", "gutenqa:Emma_-_Jane_Austen", "--name", "ok-name", "--from", str(afile)],
        # gallery
        ["gallery", "--profile", "test", "--out", str(afile)],
        ["gallery", "--profile", "nope"],
        ["gallery", "--profile", "test", "--out", str(afile / "g")],
        # secrets in a query or fragment without '=': never echoed; a fragment is refused before any request
        ["segment", str(book), "--method", "lumber", "--base-url", "http://127.0.0.1:9/v1#SECRET789"],
        ["config", "--notebook", "04", "--set", "llm.backend=openai", "--set",
         "llm.base_urls=http://127.0.0.1:9/v1?SECRET789#x", "--explain", "llm.base_urls"],
        # methods, docs
        ["methods", "extra"],
        ["docs", "--out", str(afile)],
        ["import-chunks", "--book", str(tmp / "no-book.txt"), "--name", "ok-name", "--from", str(afile)],
        ["boundaries", "--profile", "test", "--method", "lib:../x"],
        # boundaries: damaged or clashing chunk files, a notebook's table name, an existing export folder
        ["boundaries", "--profile", "test", "--chunks", str(tmp / "bad-rows.jsonl")],
        ["boundaries", "--profile", "test", "--chunks", str(tmp / "a" / "x.jsonl"), "--chunks", str(tmp / "b" / "x.jsonl")],
        ["boundaries", "--profile", "test", "--method", "token", "--chunks", str(tmp / "token.jsonl")],
        ["boundaries", "--profile", "test", "--name", "06_boundary_ornament_census"],
        ["boundaries", "--profile", "test", "--export-windows", str(tmp)],
        # train-boundary-model: every output checked before any training
        ["train-boundary-model", "--out", str(afile / "m.json")],
        ["train-boundary-model", "--packaged", "--out", str(tmp / "m.json")],
        ["train-boundary-model", "--out", str(REPO_ROOT / "litseg_nb" / "weights" / "boundary_model.json")],
        ["train-boundary-model", "--max-books", "-3"],
        # rehearse: a damaged rows file, an unwritable work folder
        ["rehearse", "--estimate", "--work", str(tmp / "rows-bad")],
        ["rehearse", "--estimate", "--work", str(tmp / "rows-list")],
        ["rehearse", "--python", str(afile), "--work", str(afile / "w")],
        # import-chunks over a damaged set of that name
        ["import-chunks", "--book", str(book), "--name", "damaged", "--from", str(tmp / "rows.jsonl"), "--profile", "test"],
        # retrieval-benchmark
        ["retrieval-benchmark", "--books", ""],
        ["retrieval-benchmark", "--books", "../../etc"],
        ["retrieval-benchmark", "--profile", "nope"],
        ["retrieval-benchmark", "--seed", "x"],
        ["methods", "--profile", "test"],
        # download-data: arguments only (no network is reached)
        ["download-data", "--datasets", "nope"],
        ["download-data", "--datasets", ""],
        # rehearse: a python that does not exist
        ["rehearse", "--python", str(tmp / "no-python"), "--pieces-only"],
    ]


def _git_status() -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO_ROOT,
                         capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if "__pycache__" not in ln and ".pytest_cache" not in ln]


@pytest.fixture(scope="module")
def status_before():
    return _git_status()


def test_every_subcommand_refuses_hostile_arguments_in_one_line(tmp_path, monkeypatch, capsys, status_before):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    (tmp_path / "a-file.txt").write_text("just a file\n")
    (tmp_path / "book.txt").write_text("A sentence of the book. And another one.\n")
    (tmp_path / "bad-rows.jsonl").write_text('{"book_id": ["w"], "text": null}\n')
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.jsonl").write_text('{"book_id": "w", "text": "t"}\n')
    (tmp_path / "token.jsonl").write_text('{"book_id": "w", "text": "t"}\n')
    for d, rows in (("rows-bad", '[{"notebook / piece": "02", "LLM calls"'), ("rows-list", '[["02", 1]]')):
        (tmp_path / d).mkdir()
        (tmp_path / d / "rehearsal_rows.json").write_text(rows)
    (tmp_path / "rows.jsonl").write_text('{"Chunk": "A sentence of the book."}\n')
    damaged = tmp_path / "outputs" / "test" / "artifacts" / "chunks" / "damaged.jsonl"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"book_id": "x", "unit_id"\n')
    damaged.with_suffix(".import.json").write_text("{}")
    problems = []
    for argv in _cases(tmp_path):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse: usage + one error line, exit 2
            rc = exc.code
        out, err = capsys.readouterr()
        # argparse's usage block (its first line and indented continuations) + one error line count as one
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))
                 and ln in stderr_lines(err) + [x for x in err.splitlines() if ": error: " in x]]
        if rc not in (1, 2):
            problems.append(f"{argv}: exit {rc} (expected 1 or 2); stderr {err.strip()[:200]!r}")
        elif "Traceback" in err or len(lines) != 1:
            problems.append(f"{argv}: {len(lines)} error lines: {err.strip()[:300]!r}")
        if "SECRET789" in out + err:
            problems.append(f"{argv}: printed a URL secret: {(out + err).strip()[:200]!r}")
        if any(cwd.iterdir()):
            problems.append(f"{argv}: wrote into the working directory: {sorted(p.name for p in cwd.iterdir())}")
    assert not problems, "\n".join(problems)
    assert _git_status() == status_before, "a hostile argument wrote into the checkout"
