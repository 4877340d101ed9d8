"""A write that fails midway (full disk, kill) leaves the previous complete file or none."""
from __future__ import annotations

import errno
import json

import nbformat
import pandas as pd
import pytest

from litseg_nb.core import artifacts
from litseg_nb.front import runner
from litseg_nb.core.safe_io import atomic_path, write_text_atomic


def _disk_full(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_failed_table_write_keeps_the_previous_table(fresh_dirs, monkeypatch):
    df = pd.DataFrame({"a": [1, 2]})
    paths = artifacts.save_table(df, "t", "test", "label one")
    before = paths["csv"].read_text()

    def half_then_fail(self, path, *a, **k):
        open(path, "w").write("a\n1")  # a truncated table ...
        _disk_full()                   # ... then the disk is full

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_fail)
    with pytest.raises(OSError):
        artifacts.save_table(pd.DataFrame({"a": [3, 4, 5]}), "t", "test", "label two")
    assert paths["csv"].read_text() == before
    assert [p.name for p in paths["csv"].parent.iterdir() if ".tmp-" in p.name] == []


def test_atomic_helpers_leave_no_partial_file(tmp_path):
    target = tmp_path / "m.json"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text('{"half": ')
            raise KeyboardInterrupt
    assert not target.exists() and list(tmp_path.iterdir()) == []
    write_text_atomic(target, json.dumps({"ok": 1}))
    assert json.loads(target.read_text()) == {"ok": 1}


def test_manifest_is_written_atomically(fresh_dirs, monkeypatch):
    path = artifacts.write_manifest("test", "99_x", {"profile": "test"})
    good = path.read_text()
    monkeypatch.setattr(artifacts, "git_commit", lambda: "abc")
    import litseg_nb.core.safe_io as sio

    monkeypatch.setattr(sio.os, "replace", _disk_full)
    with pytest.raises(OSError):
        artifacts.write_manifest("test", "99_x", {"profile": "changed"})
    assert path.read_text() == good


def test_executed_notebook_never_looks_finished_when_the_last_write_fails(tmp_path, fresh_dirs, monkeypatch):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# x"),
                nbformat.v4.new_code_cell('profile: str = "test"\nseed: int = 0', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbdir / "01_x.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nbdir)
    import papermill.execute

    def truncated_write(nb, path, **kw):
        open(path, "w").write('{"cells": [')  # the disk filled up mid-write
        _disk_full()

    monkeypatch.setattr(papermill.execute, "write_ipynb", truncated_write)
    with pytest.raises(runner.NotebookFailed, match="No space left"):
        runner.run_notebooks("test")
    executed = fresh_dirs / "outputs" / "test" / "executed"
    assert sorted(p.name for p in executed.iterdir()) == ["01_x.FAILED.ipynb"]


def test_shown_path_hides_the_checkout_of_an_outputs_path(tmp_path, monkeypatch):
    """Tables and labels show a path under the outputs root as ``<outputs>/...`` (08's trained-student model,
    06/07's rating-sheet folders): two runs in two checkouts then write equal tables."""
    from litseg_nb.core.paths import outputs_root, shown_path

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "out"))
    inside = outputs_root() / "smoke" / "artifacts" / "lite" / "merged" / "merged-abc"
    assert shown_path(inside) == "<outputs>/smoke/artifacts/lite/merged/merged-abc"
    assert shown_path(str(inside)) == shown_path(inside)
    assert shown_path(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")  # outside: as given
    assert shown_path("smollm2-135m-instruct") == "smollm2-135m-instruct" and shown_path("?") == "?"
    outputs_root().mkdir(parents=True)
    monkeypatch.chdir(outputs_root())  # a relative name is never resolved against the cwd
    assert shown_path("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
