"""The README's "Just the splitter" quick start: five lines for LangChain and five for
LlamaIndex, run as written on a book file (``my_book.txt`` is a copy of a local Gutenberg book)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _blocks() -> list[str]:
    section = README.split("## Just the splitter", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_quick_start_is_five_lines_per_host_at_the_top():
    assert README.index("## Just the splitter") < README.index("## The framework")
    blocks = _blocks()
    assert [b.splitlines()[0] for b in blocks] == ["# LangChain", "# LlamaIndex"]
    assert all(len([ln for ln in b.splitlines() if ln.strip() and not ln.startswith("#")]) == 5 for b in blocks)


@pytest.mark.parametrize("i", [0, 1], ids=["langchain", "llamaindex"])
def test_the_quick_start_runs_as_written(i, data_dir, tmp_path):
    shutil.copy(data_dir / "gutenberg" / "11.txt", tmp_path / "my_book.txt")
    code = "import warnings; warnings.simplefilter('error')\n" + _blocks()[i]  # keep_outside_units: no warning
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    n, *rest = r.stdout.split()
    assert int(n) > 100 and int(rest[-1]) > 0
