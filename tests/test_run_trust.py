"""Runs a user can trust: progress, quiet output, honest executed copies, clear stops."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from litseg_nb import cli
from litseg_nb.front import runner

REPO = Path(__file__).resolve().parents[1]
NOISE = ("Unable to parse line", "Passed unknown parameter", "without encryption", "IProgress",
         "Traceback")


def _write_nb(path: Path, params_src: str, *cells: tuple[str, str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {path.stem}"),
                nbformat.v4.new_code_cell(params_src, metadata={"tags": ["parameters"]})]
    for kind, src in cells:
        nb.cells.append(nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


# a parameters cell with comments papermill's line parser cannot read ("=" in a comment)
PARAMS = 'profile: str = "test"\nseed: int = 0\nk: int = 1  # 0 = the profile default, k = steps'


@pytest.fixture
def nbdir(tmp_path, monkeypatch):
    d = tmp_path / "nbs"
    d.mkdir()
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", d)
    return d


def _all_output_text(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            parts.append("".join(o.get("text", "")) + json.dumps(o.get("data", {})) + "".join(o.get("traceback", [])))
    return "\n".join(parts)


def test_run_reports_sections_and_heartbeats_without_progress_bars(nbdir, fresh_dirs, capfd):
    _write_nb(nbdir / "01_demo.ipynb", PARAMS,
              ("md", "## Loading the corpus"),
              ("code", "from tqdm.auto import tqdm\nimport time\n"
                       "for _ in tqdm(range(3), desc='books'):\n    time.sleep(0.2)"),
              ("md", "## Slow step"),
              ("code", "time.sleep(2.5)\nprint('k =', k)"))
    runs = runner.run_notebooks("test", parameters={"k": 3}, heartbeat_s=1.0)
    out, err = capfd.readouterr()
    console = out + err
    assert "01_demo: Loading the corpus (cell 3/4" in console   # section, cell (of the executed copy), elapsed
    assert "01_demo: Slow step (cell 4/4" in console
    assert "still running cell 4/4 (Slow step)" in console       # heartbeat on a long cell
    assert "books:" not in console                                # no kernel progress bar (TQDM_DISABLE) ...
    for noise in NOISE:
        assert noise not in console, f"noise on the console: {noise}"
    executed = runs[0].executed
    assert executed.name == "01_demo.ipynb" and "k = 3" in _all_output_text(executed)
    assert "IProgress" not in _all_output_text(executed)
    assert "books:" not in _all_output_text(executed)             # ... in the executed copy either
    assert sorted(p.name for p in executed.parent.iterdir()) == ["01_demo.ipynb"]


def test_failed_notebook_copy_is_marked_failed(nbdir, fresh_dirs):
    _write_nb(nbdir / "01_ok.ipynb", PARAMS, ("code", "x = 1"))
    _write_nb(nbdir / "02_boom.ipynb", PARAMS, ("code", "raise ValueError('boom in book X')"))
    executed = fresh_dirs / "outputs" / "test" / "executed"
    executed.mkdir(parents=True)
    (executed / "02_boom.ipynb").write_text("{}")  # a finished copy from an earlier run
    with pytest.raises(runner.NotebookFailed, match=r"02_boom.FAILED.ipynb") as info:
        runner.run_notebooks("test")
    assert info.value.executed == executed / "02_boom.FAILED.ipynb"
    assert "boom in book X" in _all_output_text(info.value.executed)
    names = sorted(p.name for p in executed.iterdir())
    assert names == ["01_ok.ipynb", "02_boom.FAILED.ipynb"]  # nothing that looks finished for 02


def test_outputs_folder_not_writable_is_one_line(nbdir, tmp_path, monkeypatch, capsys):
    _write_nb(nbdir / "01_ok.ipynb", PARAMS, ("code", "x = 1"))
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    immutable = False
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root ignores permissions; make it immutable
        immutable = subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode == 0
    try:
        try:
            (ro / "probe").write_text("x")
            pytest.skip("cannot make a read-only folder here")
        except OSError:
            pass
        monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(ro))
        assert cli.main(["run", "--profile", "test"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(ro) in err[0] and "not writable" in err[0], err
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(ro)])
        os.chmod(ro, 0o755)


DRIVER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may ignore SIGINT
from pathlib import Path
from litseg_nb import cli
from litseg_nb.front import runner
runner.NOTEBOOKS_DIR = Path(sys.argv[1])
sys.exit(cli.main(sys.argv[2:]))
"""


def test_ctrl_c_prints_one_line_and_leaves_nothing_half_written(nbdir, fresh_dirs, tmp_path):
    _write_nb(nbdir / "01_slow.ipynb", PARAMS, ("md", "## Sleeping"),
              ("code", "import time\nprint('started', flush=True)\ntime.sleep(120)"))
    driver = tmp_path / "drive.py"
    driver.write_text(DRIVER)
    executed = fresh_dirs / "outputs" / "test" / "executed"
    proc = subprocess.Popen([sys.executable, str(driver), str(nbdir), "run", "--profile", "test"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=dict(os.environ))
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # wait until the slow cell runs
            running = executed / "01_slow.RUNNING.ipynb"
            if running.exists() and "started" in running.read_text(errors="replace"):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the notebook never started")
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "interrupted 01_slow.ipynb" in lines[0], err
    assert sorted(p.name for p in executed.iterdir()) == ["01_slow.FAILED.ipynb"]
    nbformat.validate(nbformat.read(executed / "01_slow.FAILED.ipynb", as_version=4))


def test_help_states_default_profile_and_duration(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    assert "default: smoke" in text and "min" in text


def test_config_prints_every_resolved_field(capsys):
    assert cli.main(["config", "--profile", "smoke", "--notebook", "05"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("== 05_rag_evaluation: RagConfig")
    assert "llm.model = 'smollm2-135m-instruct'" in text and "embedding.model = " in text
    assert "corpus.datasets = " in text
    assert cli.main(["config", "--profile", "test"]) == 0
    text = capsys.readouterr().out
    assert text.count("\n== ") == len(runner.discover_notebooks()) - 1


def test_lab_command_works_as_root():
    from litseg_nb.cli import lab_command
    from litseg_nb.core.paths import NOTEBOOKS_DIR

    cmd = lab_command(["--", "--no-browser"])
    # rooted at the checkout, so outputs/ opens too; the browser starts on notebooks/
    assert cmd[1:4] == ["-m", "jupyter", "lab"] and f"--ServerApp.root_dir={NOTEBOOKS_DIR.parent}" in cmd
    assert "--LabApp.default_url=/lab/tree/notebooks" in cmd
    assert cmd[-1] == "--no-browser"
    if os.geteuid() == 0:
        assert "--allow-root" in cmd


@pytest.mark.slow
def test_lab_starts_as_this_user(tmp_path):
    """`python -m litseg_nb lab` really starts a server (as root too) at the checkout and serves the notebooks."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.Popen([sys.executable, "-m", "litseg_nb", "lab", "--", "--no-browser", f"--port={port}",
                             "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=t0k"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    try:
        deadline, body = time.time() + 90, None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=t0k", timeout=5) as r:
                    body = json.loads(r.read())
                break
            except OSError:
                time.sleep(1)
        assert proc.poll() is None, proc.stdout.read()
        assert body is not None
        names = {c["name"] for c in body["content"]}
        assert {"notebooks", "outputs"} <= names  # rooted at the checkout: the outputs open too
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks?token=t0k", timeout=5) as r:
            assert "01_preprocessing.ipynb" in {c["name"] for c in json.loads(r.read())["content"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_outputs_dir_that_cannot_be_created_is_one_clear_error(tmp_path, monkeypatch):
    from litseg_nb.core.paths import outputs_dir
    from litseg_nb.core.safe_io import OutputsNotWritable

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(blocker / "outputs"))
    with pytest.raises(OutputsNotWritable, match=str(blocker / "outputs" / "test")):
        outputs_dir("test")


def test_log_output_streams_printed_output(nbdir, fresh_dirs, capfd):
    _write_nb(nbdir / "01_p.ipynb", PARAMS, ("code", "print('hello from the kernel')"))
    runner.run_notebooks("test", log_output=True)
    out, err = capfd.readouterr()
    assert "hello from the kernel" in out
    runner.run_notebooks("test")
    out, err = capfd.readouterr()
    assert "hello from the kernel" not in out + err


def test_kernel_sockets_stay_out_of_the_notebooks_folder(nbdir, fresh_dirs):
    _write_nb(nbdir / "01_s.ipynb", PARAMS,
              ("code", "import json, os, sys\nfrom ipykernel.kernelapp import IPKernelApp\n"
                       "app = IPKernelApp.instance()\nprint(json.dumps([app.transport, app.ip]))"))
    runs = runner.run_notebooks("test")
    transport, ip = json.loads(_all_output_text(runs[0].executed).splitlines()[0])
    assert transport == "ipc" and os.path.isabs(ip) and not ip.startswith(str(nbdir))
    assert sorted(p.name for p in nbdir.iterdir()) == ["01_s.ipynb"]
    assert not os.path.exists(os.path.dirname(ip))  # the private socket folder is removed afterwards
