"""Notebooks side by side (``run --jobs 2``): the needs graph, the schedule, its record, its failures."""
from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from litseg_nb import cli
from litseg_nb.config import ConfigError
from litseg_nb.core.paths import NOTEBOOKS_DIR
from litseg_nb.core import run_record
from litseg_nb.front import runner
from litseg_nb.llm import threads as torch_threads

PARAMS = 'profile: str = "test"\nseed: int = 0'


def _nb(path: Path, code: str, needs: list[str] | None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}"),
                nbformat.v4.new_code_cell(PARAMS, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_markdown_cell("## Work"), nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if needs is not None:
        nb.metadata["litseg_nb"] = {"needs": needs}
    nbformat.write(nb, path)
    return path


@pytest.fixture
def nbdir(tmp_path, monkeypatch):
    d = tmp_path / "nbs"
    d.mkdir()
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", d)
    monkeypatch.delenv("LITSEG_TORCH_THREADS", raising=False)
    return d


def _outputs_text(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(o.get("text", "")) + "".join(o.get("traceback", []))
                     for c in nb["cells"] for o in c.get("outputs", []))


def test_plan_follows_the_declared_needs_and_keeps_order_where_none_is_declared(tmp_path):
    a = _nb(tmp_path / "01_a.ipynb", "x = 1", [])
    b = _nb(tmp_path / "02_b.ipynb", "x = 1", ["01"])
    c = _nb(tmp_path / "03_c.ipynb", "x = 1", ["01"])
    d = _nb(tmp_path / "04_d.ipynb", "x = 1", None)  # undeclared: every earlier selected notebook
    assert runner.plan([a, b, c, d]) == {"01": (), "02": ("01",), "03": ("01",), "04": ("01", "02", "03")}
    assert runner.plan([b, c]) == {"02": (), "03": ()}  # a need outside the selection: an earlier run's


@pytest.mark.parametrize("needs, match", [(["1"], "two-digit"), ("01", "two-digit"), (["02"], "not an earlier"),
                                          (["05"], "not an earlier")])
def test_bad_needs_metadata_is_an_error_naming_the_notebook(tmp_path, needs, match):
    nb = _nb(tmp_path / "02_b.ipynb", "x = 1", needs)
    with pytest.raises(ConfigError, match=match) as info:
        runner.plan([nb])
    assert "02_b.ipynb" in str(info.value)


SLEEP = ("import os, time\nprint('threads', os.environ.get('LITSEG_TORCH_THREADS', 'unset'))\n"
         "time.sleep(4)\nprint('slept')")


def test_independent_notebooks_run_side_by_side_and_the_record_says_so(nbdir, fresh_dirs, capfd):
    _nb(nbdir / "01_a.ipynb", "print('a')", [])
    _nb(nbdir / "02_b.ipynb", SLEEP, ["01"])
    _nb(nbdir / "03_c.ipynb", SLEEP, ["01"])
    _nb(nbdir / "04_d.ipynb", "print('d')", ["02", "03"])
    runs = runner.run_notebooks("test", jobs=2, heartbeat_s=1.0)
    console = "".join(capfd.readouterr())
    assert sorted(r.notebook for r in runs) == ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb", "04_d.ipynb"]
    executed = fresh_dirs / "outputs" / "test" / "executed"
    logs = fresh_dirs / "outputs" / "test" / "logs"
    rec = json.loads((logs / run_record.SCHEDULE_FILE).read_text())
    assert rec["02"]["ran_beside"] == ["03"] and rec["03"]["ran_beside"] == ["02"]
    assert rec["01"]["ran_beside"] == [] and rec["04"]["ran_beside"] == []
    assert {rec[n]["status"] for n in rec} == {"ok"}
    t = {n: datetime.fromisoformat(rec[n]["started"]).timestamp() for n in rec}
    assert t["04"] >= max(t["02"] + rec["02"]["seconds"], t["03"] + rec["03"]["seconds"]) - 1  # after both
    assert t["02"] >= t["01"] + rec["01"]["seconds"] - 1
    # two notebooks on the cores: cores // 2 torch threads each; alone: every core. The record keeps each
    # notebook's budgets in order (the one that ends second may have finished alone: "1→2")
    cores = os.cpu_count()
    for n, name in (("02", "02_b"), ("03", "03_c")):
        first = rec[n]["torch_threads"].split("→")[0]
        assert first == str(runner.threads_for(2))
        assert f"threads {first}" in _outputs_text(executed / f"{name}.ipynb")
    assert rec["01"]["torch_threads"] == rec["04"]["torch_threads"] == str(cores)
    assert not (logs / runner.THREADS_FILE).exists()  # the budget file goes with the run
    # the children's section lines reach the console; their stderr goes to a log per notebook
    assert "02_b: Work (cell" in console and "03_c: Work (cell" in console and "beside" in console
    assert (logs / "02_b.log").is_file() and "slept" not in (logs / "02_b.log").read_text()  # stderr only
    assert sorted(p.name for p in executed.glob("*.ipynb")) == ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb",
                                                                "04_d.ipynb"]


def test_a_failure_starts_nothing_that_needs_it_and_lets_the_others_finish(nbdir, fresh_dirs):
    _nb(nbdir / "01_a.ipynb", "raise ValueError('bad unit 7 of book X')", [])
    _nb(nbdir / "02_b.ipynb", "import time\ntime.sleep(3)\nprint('b done')", [])
    _nb(nbdir / "03_c.ipynb", "print('c')", ["01"])
    with pytest.raises(runner.NotebookFailed, match=r"01_a\.ipynb failed: ValueError: bad unit 7 of book X") as info:
        runner.run_notebooks("test", jobs=2)
    executed = fresh_dirs / "outputs" / "test" / "executed"
    assert info.value.executed == executed / "01_a.FAILED.ipynb" and info.value.executed.is_file()
    assert "b done" in _outputs_text(executed / "02_b.ipynb")  # ran beside, finished, kept
    assert not list(executed.glob("03_c*"))  # needs the failed one: never started
    logs = fresh_dirs / "outputs" / "test" / "logs"
    rec = json.loads((logs / run_record.SCHEDULE_FILE).read_text())
    assert rec["01"]["status"] == "failed" and rec["02"]["status"] == "ok" and "03" not in rec


def test_sequential_runs_are_recorded_too(nbdir, fresh_dirs):
    _nb(nbdir / "01_a.ipynb", "x = 1", [])
    _nb(nbdir / "02_b.ipynb", "x = 2", [])
    runner.run_notebooks("test", jobs=1)
    rec = run_record.read_schedule("test")
    assert rec["01"]["jobs"] == 1 and rec["01"]["ran_beside"] == [] and rec["02"]["status"] == "ok"


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_jobs_must_be_a_whole_number(nbdir, fresh_dirs, jobs):
    _nb(nbdir / "01_a.ipynb", "x = 1", [])
    with pytest.raises(ConfigError, match="jobs"):
        runner.run_notebooks("test", jobs=jobs)


@pytest.mark.parametrize("text", ["0", "two", "-3"])
def test_cli_jobs_rejects_bad_values(text, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--profile", "test", "--jobs", text])
    assert info.value.code == 2 and "--jobs" in capsys.readouterr().err


def test_profile_defaults():
    assert runner.DEFAULT_JOBS == {"test": 1, "smoke": 2, "full": 1}  # full: each notebook holds a GPU engine
    assert runner.default_jobs("full") == 1 and 1 <= runner.default_jobs("smoke") <= 2


def test_every_notebook_states_what_it_reads():
    """Each numbered notebook declares its needs, says them in its first cell, and the tests' own
    prerequisites (conftest.NOTEBOOK_NEEDS) are among them."""
    from conftest import NOTEBOOK_NEEDS

    notebooks = runner.discover_notebooks(notebooks_dir=NOTEBOOKS_DIR)
    graph = runner.plan(notebooks)
    for nb in notebooks:
        n = run_record.number(nb)
        assert runner.declared_needs(nb) is not None, f"{nb.name}: no metadata litseg_nb.needs"
        first = nbformat.read(nb, as_version=4).cells[0]
        assert first.cell_type == "markdown" and "\nReads: " in first.source, nb.name
        assert set(NOTEBOOK_NEEDS.get(n, ())) <= set(graph[n]), nb.name
    # what the smoke run overlaps: 04 beside 02->03; 05, 06 and 07 two at a time; 08 alone after all
    assert graph["04"] == ("01",) and graph["07"] == ("02", "03") and graph["06"] == ("02", "03", "04")
    assert graph["05"] == ("02", "03", "04")
    assert graph["08"] == ("02", "03", "04", "05", "06", "07")


def test_lane_stderr_logs_everything_and_prints_whole_lines():
    import io

    log, console = io.StringIO(), io.StringIO()
    err = runner._LaneStderr(log, console, "04_baselines", every_s=3600)
    for part in ("\rbooks:   0%| 0/3", "\rbooks:  33%| 1/3", "\x1b[A\rbooks: 100%| 3/3\n", "UserWarning: x\n"):
        err.write(part)
    assert log.getvalue().count("books:") == 3  # the log keeps every redraw
    lines = console.getvalue().splitlines()
    # the first redraw (nothing printed yet), then finished lines only, without cursor codes
    assert lines == ["  04_baselines: books:   0%| 0/3", "  04_baselines: books: 100%| 3/3",
                     "  04_baselines: UserWarning: x"]


FOLLOW = """import time
from litseg_nb.llm.threads import thread_budget, follow_thread_budget
seen = [thread_budget()]
t0 = time.time()
while time.time() - t0 < 60 and seen[-1] == seen[0]:
    time.sleep(0.1)
    seen.append(thread_budget())
import torch
follow_thread_budget()
print('seen', seen[0], seen[-1], 'torch', torch.get_num_threads())"""


def test_a_notebook_left_alone_takes_the_freed_cores(nbdir, fresh_dirs, monkeypatch):
    # 4 cores as the runner counts them: 2 threads each while two run, 4 for the one left running
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    _nb(nbdir / "01_a.ipynb", "import time\ntime.sleep(2)", [])
    _nb(nbdir / "02_b.ipynb", FOLLOW, [])
    runner.run_notebooks("test", jobs=2)
    executed = fresh_dirs / "outputs" / "test" / "executed"
    assert "seen 2 4 torch 4" in _outputs_text(executed / "02_b.ipynb")
    rec = run_record.read_schedule("test")
    assert rec["01"]["torch_threads"] == "2" and rec["02"]["torch_threads"] == "2→4"


def test_a_fixed_thread_count_is_left_to_the_caller(nbdir, fresh_dirs, monkeypatch):
    monkeypatch.setenv("LITSEG_TORCH_THREADS", "1")
    _nb(nbdir / "01_a.ipynb", "import os\nprint('file', os.environ.get('LITSEG_TORCH_THREADS_FILE'))", [])
    _nb(nbdir / "02_b.ipynb", "import os\nprint('threads', os.environ['LITSEG_TORCH_THREADS'])", [])
    runner.run_notebooks("test", jobs=2)
    executed = fresh_dirs / "outputs" / "test" / "executed"
    assert "file None" in _outputs_text(executed / "01_a.ipynb")
    assert "threads 1" in _outputs_text(executed / "02_b.ipynb")
    assert {r["torch_threads"] for r in run_record.read_schedule("test").values()} == {"1"}


def test_the_budget_file_is_rewritten_only_when_the_budget_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    budget = runner.ThreadBudget(tmp_path / "torch_threads")
    assert budget.update(2) and (tmp_path / "torch_threads").read_text() == "1\n"
    assert not budget.update(2)
    assert budget.update(1) and (tmp_path / "torch_threads").read_text() == "2\n"
    assert budget.child_env() == {"LITSEG_TORCH_THREADS_FILE": str(tmp_path / "torch_threads"),
                                  "LITSEG_TORCH_THREADS": "2"}
    assert [runner.threads_for(n, cores=2) for n in (1, 2, 3)] == [2, 1, 1]


def test_follow_thread_budget_reads_the_file_then_the_variable(tmp_path, monkeypatch):
    import torch

    before = torch.get_num_threads()
    f = tmp_path / "budget"
    monkeypatch.setenv("LITSEG_TORCH_THREADS_FILE", str(f))
    monkeypatch.setenv("LITSEG_TORCH_THREADS", "1")
    try:
        assert torch_threads.thread_budget() == 1  # no file (the run ended): the variable
        f.write_text("2\n")
        assert torch_threads.follow_thread_budget() == 2 and torch.get_num_threads() == 2
        f.write_text("1")
        assert torch_threads.follow_thread_budget() == 1 and torch.get_num_threads() == 1
        for bad in ("0", "two", ""):
            f.write_text(bad)
            with pytest.raises(ConfigError, match=str(f)):
                torch_threads.follow_thread_budget()
        f.unlink()
        f.mkdir()  # a folder where the file should be: named, not a bare IsADirectoryError
        with pytest.raises(ConfigError, match="unreadable torch-thread budget"):
            torch_threads.thread_budget()
        f.rmdir()
        monkeypatch.setenv("LITSEG_TORCH_THREADS", "x")
        with pytest.raises(ConfigError, match="LITSEG_TORCH_THREADS"):
            torch_threads.thread_budget()
        monkeypatch.delenv("LITSEG_TORCH_THREADS")
        assert torch_threads.thread_budget() is None and torch_threads.follow_thread_budget() is None
    finally:
        torch.set_num_threads(before)
