"""Notebook 03 (LitSeg-Lite distillation) end to end in the test profile through the runner."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from litseg_nb.front.runner import NotebookFailed, run_notebooks
from litseg_nb.core.schema import check_coverage, load_chunks

pytestmark = pytest.mark.slow


def test_notebook_03_runs_after_02_in_test_profile(notebook_pipeline):
    out = notebook_pipeline("03")  # after 02, once per session
    tables, figures, art = out / "tables", out / "figures", out / "artifacts"

    outcomes = pd.read_csv(tables / "03_data_outcomes.csv")
    assert list(outcomes.columns) == ["outcome", "units"]
    records = [json.loads(x) for x in (art / "litseg" / "annotations.jsonl").open()]
    train = [json.loads(x) for x in (art / "litseg" / "train_annotations.jsonl").open()]
    assert outcomes.loc[outcomes["outcome"] == "total annotation records", "units"].item() == len(train)

    stats = pd.read_csv(tables / "03_data_stats.csv")
    assert {"split", "books", "units", "segments/unit", "tokens/example", "target sources"} <= set(stats.columns)
    assert "evaluation units" in (tables / "03_data_stats.md").read_text()

    rules = pd.read_csv(tables / "03_format_reward_rules.csv")
    assert rules["weight"].sum() == pytest.approx(1.0)

    training = pd.read_csv(tables / "03_training.csv")
    assert list(training["stage"]) == ["sft", "grpo"]
    assert {"steps", "seconds", "tokens/s", "LoRA L2 change"} <= set(training.columns)
    assert training.loc[training["stage"] == "sft", "LoRA L2 change"].item() > 0  # SFT really trained
    assert (tables / "03_judge_stats.csv").is_file()

    ba = pd.read_csv(tables / "03_before_after.csv")
    assert {"system", "units", "first-try validity", "fallback rate", "format reward",
            "narratological reward", "mean reward", "segments/unit"} <= set(ba.columns)
    assert {"student before training", "student after SFT+GRPO", "teacher (LitSeg)"} <= set(ba["system"])
    ba_label = (tables / "03_before_after.md").read_text()
    assert "student LLM=" in ba_label and "teacher LLM=" in ba_label and "length reference=" in ba_label
    assert (figures / "03_training_curves.png").is_file() and (figures / "03_training_curves.pdf").is_file()

    for stage in ("sft", "grpo"):
        d = art / "lite" / "adapters" / stage
        assert (d / "adapter_config.json").is_file()
        assert json.loads((d / "lite_config.json").read_text())["stage"] == stage

    # the Lite chunk set covers exactly LitSeg's annotated units, in the shared schema
    chunks = load_chunks(art / "chunks" / "litseg-lite.jsonl")
    assert {c.method for c in chunks} == {"litseg-lite"}
    assert {(c.book_id, c.unit_id) for c in chunks} == {(r["book_id"], r["unit_id"]) for r in records}
    from litseg_nb.corpus import load_corpus
    from litseg_nb.litseg.config import LitSegConfig

    books = {b.book_id: b for b in load_corpus(LitSegConfig.for_profile("test").corpus)}
    for r in records:
        unit = books[r["book_id"]].unit(r["unit_id"])
        assert check_coverage(unit, [c for c in chunks if c.unit_id == r["unit_id"]]).ok
    # never evaluated on a trained unit: the trained units are recorded and disjoint from every evaluated unit
    # (the profile-wide record accumulates every student trained in this outputs folder, other tests' too)
    trained = json.loads((art / "lite" / "trained_units.json").read_text())["units"]
    trained_keys = {(u["book_id"], u["unit_id"]) for u in trained}
    assert trained_keys and trained_keys.isdisjoint({(c.book_id, c.unit_id) for c in chunks})
    # the adapters notebook 03 trained record exactly the units of its training annotations
    from litseg_nb.lite.data import model_record

    for stage in ("sft", "grpo"):
        record = model_record(art / "lite" / "adapters" / stage)
        assert record is not None and record.keys
        assert record.keys <= {(r["book_id"], r["unit_id"]) for r in train}
    usage = pd.read_csv(art / "usage" / "03.csv")
    # the trained student segments each evaluated unit once (stage single-pass, Lite's §4.4 run); the
    # untuned student's evaluation run is apart from it
    assert "single-pass" in set(usage.loc[usage["method"] == "litseg-lite", "stage"])
    assert "heldout-eval" not in set(usage.loc[usage["method"] == "litseg-lite", "stage"])
    assert set(usage.loc[usage["method"] == "litseg-lite-base", "stage"]) == {"heldout-eval"}
    run_rows = [json.loads(x) for x in (art / "lite" / "chunk_run.jsonl").open()]
    assert {(r["book_id"], r["unit_id"]) for r in run_rows} == {(r["book_id"], r["unit_id"]) for r in records}
    manifest = json.loads((out / "manifests" / "03_lite_distillation.json").read_text())
    assert manifest["merged_model"] and manifest["training"][0]["stage"] == "sft"


def test_notebook_03_without_02_stops_naming_the_missing_file(fresh_dirs):
    with pytest.raises(NotebookFailed, match=r"annotations\.jsonl"):
        run_notebooks("test", only=("03",))
