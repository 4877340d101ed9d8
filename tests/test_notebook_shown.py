"""What an executed notebook shows a reader: tables of at most 12 columns (the paper's; the CSV keeps every
column) and no repr of a path, a config or a figure object standing in for content."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from litseg_nb.core.display import MAX_COLUMNS

#: a repr that stands in for content: a path, a stage config, a figure object shown as text only
PLUMBING = re.compile(r"^(PosixPath\(|WindowsPath\(|\w+Config\(|<Figure size [^>]*>$|\{'(png|csv)': PosixPath)")


def shown_problems(executed: Path) -> list[str]:
    """Per output of an executed notebook: an HTML table wider than :data:`MAX_COLUMNS` columns, or a text-only
    output that is a repr of a path, a config or a figure."""
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    out = []
    for i, cell in enumerate(cells):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            html = "".join(data.get("text/html", ""))
            if "<table" in html:
                for table in re.findall(r"<table.*?</table>", html, re.S):
                    head = re.search(r"<tr.*?</tr>", table, re.S)
                    n = len(re.findall(r"<th[ >]", head.group(0))) - 1 if head else 0  # less the index column
                    if n > MAX_COLUMNS:
                        out.append(f"cell {i}: a table of {n} columns")
            elif "image/png" not in data:
                text = "".join(data.get("text/plain", "")).strip()
                if PLUMBING.search(text):
                    out.append(f"cell {i}: {text[:80]!r}")
    return out


def test_the_check_sees_wide_tables_and_reprs(tmp_path):
    wide = "<table><thead><tr><th></th>" + "<th>c</th>" * 13 + "</tr></thead></table>"
    ok = "<table><thead><tr><th></th>" + "<th>c</th>" * 12 + "</tr></thead></table>"
    outputs = [{"output_type": "execute_result", "data": {"text/html": wide, "text/plain": "x"}},
               {"output_type": "execute_result", "data": {"text/html": ok, "text/plain": "x"}},
               {"output_type": "execute_result", "data": {"text/plain": "PosixPath('/x/manifests/05.json')"}},
               {"output_type": "execute_result", "data": {"text/plain": "RagConfig(profile='smoke', seed=0)"}},
               {"output_type": "display_data", "data": {"text/plain": "<Figure size 950x763 with 0 Axes>"}},
               {"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure size 9x7 with 1 Axes>"}}]
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": outputs}]}))
    assert shown_problems(nb) == ["cell 0: a table of 13 columns", "cell 0: \"PosixPath('/x/manifests/05.json')\"",
                                  "cell 0: \"RagConfig(profile='smoke', seed=0)\"",
                                  "cell 0: '<Figure size 950x763 with 0 Axes>'"]


@pytest.mark.slow
@pytest.mark.parametrize("number", ["05", "06", "07", "08"])
def test_executed_notebook_shows_no_wide_table_and_no_repr(number, notebook_pipeline):
    from litseg_nb.front.runner import discover_notebooks

    out = notebook_pipeline(number)
    executed = out / "executed" / discover_notebooks((number,))[0].name
    assert shown_problems(executed) == []


@pytest.mark.parametrize("number", ["05", "06", "07", "08"])
def test_notebook_opens_with_its_claim_and_teaches_one_idea(number):
    """d2l's shape: an opening cell of at most 120 words naming the paper's table, the idea as a displayed
    formula, a closing cell that reads this run's tables with one labelled small-model line; no history."""
    from litseg_nb.core.paths import NOTEBOOKS_DIR

    path = next(NOTEBOOKS_DIR.glob(f"{number}_*.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    md = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    opening = md[0]
    assert len(opening.split()) <= 120, f"{path.name}: opening cell of {len(opening.split())} words"
    assert "**Claim.**" in opening and re.search(r"Table \d|§4\.\d", opening), path.name
    assert any("$$" in m for m in md), f"{path.name}: no displayed formula"
    closing = md[-1]
    assert closing.startswith("## What it says at this scale") and closing.count("**Small models:**") == 1, path.name
    text = "\n".join("".join(c["source"]) for c in cells)
    assert not re.search(r"(?<![\w&])#\d+\b|\bissue \d+|\b[0-9a-f]{7,40}\b(?=.*commit)", text), path.name
