"""Notebook 01 runs end to end in the test profile through the runner and writes what it promises."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from litseg_nb.core.paths import outputs_dir
from litseg_nb.front.runner import run_notebooks


@pytest.mark.slow
def test_notebook_01_runs_in_test_profile(data_dir):
    run_notebooks("test", only=("01",))
    root = outputs_dir("test")
    stats = pd.read_csv(root / "tables" / "01_corpus_statistics.csv")
    assert {"dataset", "book_id", "narrative_units", "units", "paragraphs", "sentences", "words",
            "tokens", "units_structure", "units_recursive", "split_method"} <= set(stats.columns)
    assert set(stats["dataset"]) == {"gutenqa", "gutenberg"}
    assert (stats.loc[~stats["book_id"].str.startswith("TOTAL"), "units"] == 2).all()
    bench = pd.read_csv(root / "tables" / "01_benchmark.csv")
    assert {"seconds", "seconds_per_mb", "peak_rss_mb", "books", "big_book_seconds"} <= set(bench.columns)
    assert bench.loc[0, "books"] + bench.loc[0, "skipped"] >= 60  # every local raw book
    structure = pd.read_csv(root / "tables" / "01_structure_report.csv")
    assert {"levels", "contents_matched", "dropped", "dropped_chars"} <= set(structure.columns)
    gold = pd.read_csv(root / "tables" / "01_structure_gold.csv")
    assert list(gold["detector"].str.split(" ").str[0]) == ["before"] * 4 + ["now"] * 3
    assert list(gold["books_in"].iloc[-3:]) == ["all", "tuning", "held-out quarter"]
    assert {"sections_in_units", "level_notes", "front_decision"} <= set(structure.columns)
    for ext in ("png", "pdf"):
        assert (root / "figures" / f"01_unit_lengths.{ext}").stat().st_size > 0
    pages = list((root / "artifacts").glob("01_unit_*.html"))
    assert pages and 'class="i">1</span>' in pages[0].read_text(encoding="utf-8")
    manifest = json.loads((root / "manifests" / "01_preprocessing.json").read_text())
    assert manifest["parameters"]["profile"] == "test" and manifest["data_files"]
