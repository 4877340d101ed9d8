"""Committed notebooks are clean: valid, no outputs, no execution counts, one parameters cell."""
import json

import nbformat
import pytest

from litseg_nb.core.paths import NOTEBOOKS_DIR
from litseg_nb.front.runner import declared_parameters

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs for c in code), f"{path.name} has outputs"
    assert all(c.execution_count is None for c in code), f"{path.name} has execution counts"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters'"
    params = declared_parameters(path)
    assert params.get("profile") == "test" and "seed" in params, f"{path.name}: parameters {params}"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), "title first"
    src = "\n".join(c.source for c in code)
    assert "class " not in src, f"{path.name} defines a class; logic belongs in litseg_nb"
    assert json.loads(path.read_text())["metadata"]["kernelspec"]["name"] == "python3"
    # headings are real text: no escaped newline left over from an editing script (the runner's
    # progress lines quote the section headings)
    for c in nb.cells:
        if c.cell_type == "markdown":
            for line in c.source.splitlines():
                assert not (line.startswith("#") and "\\n" in line), f"{path.name}: literal \\n in {line[:60]!r}"
