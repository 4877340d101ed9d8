"""Notebooks stay output-free in git: .gitattributes names the nbstripout filter for notebooks/*.ipynb,
scripts/setup.sh configures it (cell ids kept), and the filter turns an executed notebook back into the committed
one (so saving a notebook in JupyterLab never puts outputs into git)."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_gitattributes_and_setup_configure_the_filter():
    attrs = (ROOT / ".gitattributes").read_text(encoding="utf-8").splitlines()
    assert "notebooks/*.ipynb filter=nbstripout diff=ipynb" in attrs
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert 'git config filter.nbstripout.clean "\\"$PWD/$VPY\\" -m nbstripout --keep-id"' in setup
    assert "git config filter.nbstripout.smudge cat" in setup
    assert any(d.startswith("nbstripout") for d in _extra("notebooks"))


def _extra(name):
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"][name]


@pytest.mark.parametrize("nb_path", sorted((ROOT / "notebooks").glob("0*.ipynb")), ids=lambda p: p.name[:2])
def test_the_filter_strips_an_executed_notebook_back_to_the_committed_one(tmp_path, nb_path):
    pytest.importorskip("nbstripout", reason="nbstripout (extra `notebooks`) is not installed")
    committed = nb_path.read_text(encoding="utf-8")
    nb = json.loads(committed)
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x\n"]}]
    executed = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    clean = setup.split('git config filter.nbstripout.clean "', 1)[1].split('"\n', 1)[0]
    cmd = shlex.split(clean.replace('\\"$PWD/$VPY\\"', shlex.quote(sys.executable)))
    out = subprocess.run(cmd, input=executed, capture_output=True, text=True, check=True).stdout
    assert out == committed
