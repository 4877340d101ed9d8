import json

import nbformat
import pytest

from litseg_nb import cli
from litseg_nb.front import runner
from litseg_nb.config import ConfigError


def _write_nb(path, params_src, body_src):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# demo"),
                nbformat.v4.new_code_cell(params_src, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body_src)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_declared_parameters_and_discovery(tmp_path):
    _write_nb(tmp_path / "01_a.ipynb", 'profile: str = "test"\nseed: int = 0\nmax_books: int = 2', "x = 1")
    _write_nb(tmp_path / "02_b.ipynb", 'profile: str = "test"', "x = 1")
    (tmp_path / "notes.ipynb").write_text("{}")
    assert runner.declared_parameters(tmp_path / "01_a.ipynb") == {"profile": "test", "seed": 0, "max_books": 2}
    found = runner.discover_notebooks(notebooks_dir=tmp_path)
    assert [p.name for p in found] == ["01_a.ipynb", "02_b.ipynb"]
    assert [p.name for p in runner.discover_notebooks(["2"], notebooks_dir=tmp_path)] == ["02_b.ipynb"]
    with pytest.raises(ConfigError, match="no notebook numbered 07"):
        runner.discover_notebooks(["07"], notebooks_dir=tmp_path)


def test_run_injects_parameters_and_stops_on_failure(tmp_path, monkeypatch, fresh_dirs):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _write_nb(nbdir / "01_ok.ipynb", 'profile: str = "test"\nseed: int = 0\nk: int = 1',
              "import json, os, pathlib\n"
              "pathlib.Path(os.environ['LITSEG_OUTPUTS_DIR'], 'k.json').write_text(json.dumps([profile, k]))")
    _write_nb(nbdir / "02_boom.ipynb", 'profile: str = "test"', "raise ValueError('boom in book X')")
    _write_nb(nbdir / "03_never.ipynb", 'profile: str = "test"', "raise SystemExit(3)")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nbdir)
    runs = runner.run_notebooks("test", only=("01",), parameters={"k": 5})
    assert json.loads((fresh_dirs / "outputs" / "k.json").read_text()) == ["test", 5]
    assert runs[0].executed.is_file()
    with pytest.raises(runner.NotebookFailed, match="02_boom.ipynb failed.*boom in book X") as failed:
        runner.run_notebooks("test")
    assert "\n" not in str(failed.value) and "02_boom.FAILED.ipynb" in str(failed.value)  # one console line
    assert not (fresh_dirs / "outputs" / "test" / "executed" / "03_never.ipynb").exists()
    with pytest.raises(ConfigError, match="not declared"):
        runner.run_notebooks("test", only=("01",), parameters={"kk": 5})
    assert cli.main(["run", "--profile", "test", "--only", "02"]) == 1
