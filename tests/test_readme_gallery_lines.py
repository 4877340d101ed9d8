"""The README lines issue #34 found wrong stay right: the smoke timing on the first line matches the
measured table, the subcommand list names every subcommand, the gallery is said to run no notebook,
and the adapters' LitSeg example states that calibration runs the stages again (and how to skip it)."""
import re

from litseg_nb import cli
from litseg_nb.core.paths import PACKAGE_DIR

README = (PACKAGE_DIR.parent / "README.md").read_text(encoding="utf-8")


def test_first_line_timing_is_the_range_of_the_measured_table():
    first = re.search(r"smoke` profile \((\d+)(?:-(\d+))? min measured on 2 (?:idle )?CPU cores, "
                      r"see \"What the smoke run takes\"\)", README)
    assert first, "the first command's timing line"
    section = README.split("## What the smoke run takes", 1)[1].split("\n## ", 1)[0]
    totals = [float(m) for m in re.findall(r"\| [\d,]+ s \(([\d.]+) min;", section)]
    assert totals, "the measured table's total column"
    low, high = int(first.group(1)), int(first.group(2) or first.group(1))
    assert (low, high) == (round(min(totals)), round(max(totals)))
    said = f"{low} min" if low == high else f"{low}-{high} min"
    assert cli._SMOKE_DURATION.startswith(said + " "), "`python -m litseg_nb --help` states the same smoke time"


def test_subcommand_list_names_every_subcommand():
    para = README.split("lists the subcommands:", 1)[1].split("gives each one's options", 1)[0]
    listed = re.findall(r"`([a-z-]+)`", para)
    assert [c for c in cli.COMMANDS if c not in listed] == []


def test_gallery_and_adapter_timing_lines():
    assert "without running anything" not in README
    assert "the gallery runs no notebook" in README
    assert "about a minute" not in README
    assert "runs the three stages on a calibration sample before segmenting" in README
    assert "`calibrate=False`" in README
