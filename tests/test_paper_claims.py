"""Sentences of the notebooks that state what the code does against the paper: claims the code does not
make true are absent (each phrase below was once in a notebook while the code did otherwise)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: phrase -> why it is wrong
WRONG = {
    "as the paper measures it": "the paper gives neither its batching nor its engine settings nor its teacher (§4.4)",
    "proxy for the expert study": "the E.3 judge is Lite's GRPO reward rubric on Lite's base model, not Table 1's experts",
    "else by the E.3\njudge": "Table 5's sheets are filled by the A.2 LLM raters",
    "else by the E.3 judge": "Table 5's sheets are filled by the A.2 LLM raters",
    "GutenQA question(s)": "the scope holds LiteraryQA's questions too; the label names the datasets from the data",
    "not interleaved (ledger ratio)": "the teacher is measured side by side (its own engine)",
}


def _sources():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            yield path.name, "".join(cell["source"])


@pytest.mark.parametrize("phrase", sorted(WRONG))
def test_no_notebook_makes_a_claim_the_code_does_not(phrase):
    hits = [name for name, src in _sources() if phrase in src]
    assert not hits, f"{hits}: {phrase!r}: {WRONG[phrase]}"


def test_notebook_08_names_the_teacher_ratio_as_the_headline():
    src = "".join(s for name, s in _sources() if name.startswith("08_"))
    assert "headline" in src and "37% of the teacher's compute" in src
