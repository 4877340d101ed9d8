"""Notebook 02 (LitSeg annotation) end to end in the test profile through the runner."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from litseg_nb.corpus import load_corpus
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.core.paths import outputs_dir
from litseg_nb.front.runner import run_notebooks
from litseg_nb.core.schema import assert_full_coverage, load_chunks


@pytest.mark.slow
def test_notebook_02_runs_in_test_profile(data_dir):
    run_notebooks("test", only=("02",))
    out = outputs_dir("test")
    tables = out / "tables"
    summary = pd.read_csv(tables / "02_litseg_summary.csv")
    assert {"book_id", "model", "units", "segments", "len_sent_mean", "len_sent_std", "len_tok_mean",
            "len_tok_std", "share_overlap", "share_context", "first_try_valid_stage3", "retries",
            "fallback_none", "fallback_coverage_repair", "fallback_whole_unit", "tokens_in", "tokens_out",
            "wall_s"} <= set(summary.columns)
    assert summary["model"].str.contains("tiny-random").all()
    assert (tables / "02_litseg_summary.md").read_text().startswith("**02_litseg_summary** — profile=test")
    comparison = pd.read_csv(tables / "02_structured_comparison.csv")
    assert sorted(comparison["structured_output"]) == [False, True]
    assert (tables / "02_length_calibration.csv").is_file() and (tables / "02_units.csv").is_file()
    assert (out / "figures" / "02_segment_lengths.png").is_file()
    assert "<h3>" in (out / "figures" / "02_rendered_unit.html").read_text()
    usage = pd.read_csv(out / "artifacts" / "usage" / "02.csv")
    # the test profile runs LitSeg constrained (llm.structured_output): the comparison runs it unconstrained
    assert {"litseg", "litseg-calibration", "litseg-unconstrained"} <= set(usage["method"])

    cfg = LitSegConfig.for_profile("test")
    books = load_corpus(cfg.corpus)
    records = [json.loads(line) for line in (out / "artifacts" / "litseg" / "annotations.jsonl").open()]
    assert len(records) == sum(len(b.units) for b in books) == int(summary["units"].sum())
    for r in records:
        assert r["status"] == "done" and set(r["stages"]) == {"stage1", "stage2", "stage3"}
        assert r["structured_output"] is True
        assert r["stages"]["stage3"]["attempts"] and r["tokens"]["prompt"] > 0
    chunks = load_chunks(out / "artifacts" / "chunks" / "litseg.jsonl")
    assert {c.method for c in chunks} == {"litseg"}
    for b in books:
        assert_full_coverage(b, [c for c in chunks if c.book_id == b.book_id], "litseg")
    calib = json.loads((out / "artifacts" / "litseg" / "calibration.json").read_text())
    assert calib["quantile"] == cfg.calibration_quantile and calib["subset"]
    # Lite's training units: annotated by the same teacher, other books; the length reference is
    # calibrated per dataset (the selection's GutenQA and the training units' Gutenberg), each unit
    # carrying its own dataset's value
    train = [json.loads(line) for line in (out / "artifacts" / "litseg" / "train_annotations.jsonl").open()]
    assert train and {r["book_id"] for r in train}.isdisjoint({r["book_id"] for r in records})
    refs = calib["length_reference"]
    assert set(refs) == {"gutenqa", "gutenberg"} and calib["training_datasets"] == ["gutenberg"]
    for r in records + train:
        assert r["length_reference"] == refs[r["dataset"]] and r["length_reference_dataset"] == r["dataset"]
        assert r["length_references"] == refs
    assert {r["method"] for r in train} == {"litseg-train"} and "litseg-train" in set(usage["method"])
    label = (tables / "02_lite_training_units.md").read_text()
    assert "teacher LLM=tiny-random" in label and "student (Lite)=tiny-random" in label and "books=46" in label
