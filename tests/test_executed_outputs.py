"""An executed notebook shows results, not plumbing: no progress bars (the runner's kernels run with
``TQDM_DISABLE=1``), a few stderr lines at most, no path, config or figure object as a cell's value (the run
context's saves return the table, or nothing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from checks import executed_output_problems
from litseg_nb.front.runner import discover_notebooks, kernel_env_for_run

NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07", "08")


def _nb(tmp_path, *outputs):
    cells = [{"cell_type": "code", "source": "x", "metadata": {}, "execution_count": 1, "outputs": [o]}
             for o in outputs]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _result(plain, **more):
    return {"output_type": "execute_result", "execution_count": 1, "metadata": {},
            "data": {"text/plain": plain, **more}}


def test_the_check_names_each_kind_of_plumbing(tmp_path):
    bars = {"output_type": "stream", "name": "stderr",
            "text": "\rlib:chonkie-token:  12%|█▏        | 3/25 [00:01<00:09, 2.2it/s]\n"}
    path = _nb(tmp_path, bars, _result("PosixPath('/o/manifests/01.json')"),
               _result("{'png': PosixPath('/o/f.png'), 'pdf': PosixPath('/o/f.pdf')}"),
               _result("RagConfig(profile='smoke', seed=0)"), _result("<Figure size 640x480 with 0 Axes>"))
    problems = executed_output_problems(path)
    assert [p.split(":")[0] for p in problems] == [f"code cell {k}" for k in range(1, 6)], problems
    assert "progress bar" in problems[0]
    # a drawn figure (its text twin names the Figure), a table and a warning line are results
    fine = _nb(tmp_path, _result("<Figure size 700x360 with 1 Axes>", **{"image/png": "iVBO"}),
               _result("   a  b\n0  1  2", **{"text/html": "<table/>"}),
               {"output_type": "stream", "name": "stderr", "text": "literaryqa: skipped 1 book\n"})
    assert executed_output_problems(fine) == []
    wide = "<table><thead><tr><th></th>" + "".join(f"<th>c{i}</th>" for i in range(13)) + "</tr></thead></table>"
    assert executed_output_problems(_nb(tmp_path, _result("...", **{"text/html": wide}))) == [
        "code cell 1: shows a table of 13 columns (at most 12)"]
    many = _nb(tmp_path, {"output_type": "stream", "name": "stderr", "text": "warning\n" * 7})
    assert executed_output_problems(many) == ["7 stderr lines (at most 6)"]


def test_kernels_run_without_progress_bars(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    env = kernel_env_for_run()
    assert env["TQDM_DISABLE"] == "1" and "ignore:IProgress not found" in env["PYTHONWARNINGS"]
    # tqdm reads TQDM_DISABLE when it is imported: a fresh interpreter, as a kernel is. The package's bars
    # follow that switch when progress is asked for (tqdm's explicit disable=False would override it)
    code = ("from litseg_nb.core.progress import bar\n"
            "for _ in bar(range(3), progress=True, desc='books'): pass\n"
            "for _ in bar(range(3), progress=False, desc='never'): pass\n")
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    shown = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in os.environ.items()
                                                              if k != "TQDM_DISABLE"},
                           capture_output=True, text=True, timeout=120)
    assert "books: 100%" in shown.stderr and "never" not in shown.stderr  # outside a run: the bar as ever
    monkeypatch.setenv("TQDM_DISABLE", "0")  # a caller's own value stands
    assert kernel_env_for_run()["TQDM_DISABLE"] == "0"


@pytest.mark.slow
@pytest.mark.parametrize("number", NOTEBOOKS)
def test_executed_notebook_shows_no_plumbing(number, notebook_pipeline):
    root = notebook_pipeline(number)
    executed = root / "executed" / discover_notebooks((number,))[0].name
    assert executed_output_problems(executed) == []
