"""Lines found wrong once stay right (README and the documentation pages): the smoke timing on the first
line matches the measured table, the subcommand list names every subcommand, the gallery is said to run no notebook,
and the adapters' LitSeg example states that calibration runs the stages again (and how to skip it)."""
import re

import pytest

from litseg_nb import cli
from litseg_nb.core.paths import PACKAGE_DIR

DOCS = PACKAGE_DIR.parent / "docs"
README = (PACKAGE_DIR.parent / "README.md").read_text(encoding="utf-8")
SETUP = (DOCS / "guide" / "setup.md").read_text(encoding="utf-8")
MEASURED = (DOCS / "measurements.md").read_text(encoding="utf-8")
NOTEBOOKS = (DOCS / "guide" / "notebooks.md").read_text(encoding="utf-8")
ADAPTERS = (DOCS / "guide" / "adapters.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", [README, SETUP], ids=["README", "setup"])
def test_first_line_timing_is_the_range_of_the_measured_table(page):
    first = re.search(r"smoke` profile \((\d+)(?:-(\d+))? min measured on 2 (?:idle )?CPU cores, "
                      r"see \"What the smoke run takes\"\)", page)
    assert first, "the first command's timing line"
    section = MEASURED.split("## What the smoke run takes", 1)[1].split("\n## ", 1)[0]
    totals = [float(m) for m in re.findall(r"\| [\d,]+ s \(([\d.]+) min;", section)]
    assert totals, "the measured table's total column"
    low, high = int(first.group(1)), int(first.group(2) or first.group(1))
    assert (low, high) == (round(min(totals)), round(max(totals)))
    said = f"{low} min" if low == high else f"{low}-{high} min"
    assert cli._SMOKE_DURATION.startswith(said + " "), "`python -m litseg_nb --help` states the same smoke time"


def test_subcommand_list_names_every_subcommand():
    para = NOTEBOOKS.split("lists the subcommands:", 1)[1].split("gives each one's options", 1)[0]
    listed = re.findall(r"`([a-z-]+)`", para)
    assert [c for c in cli.COMMANDS if c not in listed] == []


def test_gallery_and_adapter_timing_lines():
    assert "without running anything" not in README + NOTEBOOKS
    assert "the gallery runs no notebook" in NOTEBOOKS
    assert "about a minute" not in README + ADAPTERS
    assert "runs the three stages on a calibration sample before segmenting" in ADAPTERS
    assert "`calibrate=False`" in ADAPTERS
