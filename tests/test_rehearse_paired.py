"""The rehearsal exercises ``full``'s paired §4.4 path (notebook 08): two different tiny models stand for
teacher and student, the §4.4 units are ones the rehearsal segments, and its table counts the paired calls."""
from __future__ import annotations

import json

from litseg_nb.chunkers import BaselinesConfig
from litseg_nb.config import config_sets
from litseg_nb.evaluation.efficiency import EfficiencyConfig
from litseg_nb.front import rehearse as ra
from litseg_nb.lite.config import LiteConfig
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.llm.models import SMOLLM2, smollm2_dir
from litseg_nb.rag.config import RagConfig


def test_rehearsal_runs_the_paired_measurement_with_a_teacher_and_another_student():
    with config_sets(ra.notebook_sets("08", "/m3", "/rr", "/student")):
        eff = EfficiencyConfig.for_profile("full")
        teacher = LitSegConfig.for_profile("full").llm.model
        students = {LiteConfig.for_profile("full").llm.model, BaselinesConfig.for_profile("full").llm.model}
        judges = {LiteConfig.for_profile("full").judge_llm.model, RagConfig.for_profile("full").judge_llm.model}
        selection = LitSegConfig.for_profile("full").selection
    assert teacher == SMOLLM2 and students == {"/student"} and judges == {SMOLLM2}
    # §4.4's units: every unit the rehearsal segments (its LitSeg selection holds no LiteraryQA unit)
    assert eff.paired and eff.timing_dataset == "all" and all(b.startswith("gutenqa:") for b in selection.books)
    # full's one repeat, two one-unit batches: two blocks, so the engines alternate A B, B A
    assert (eff.paired_repeats, eff.paired_max_units, eff.paired_batch_units) == (1, 2, 1)
    assert eff.paired_lora_row and "no LLM" not in ra.NOTEBOOK_ENGINES["08"]
    assert ra.DRIVERS["08"][0]  # the estimate scales 08's calls


def test_the_rehearsal_student_is_a_smaller_model_than_the_teacher():
    student = ra.tiny_student_dir()
    conf = json.loads((student / "config.json").read_text())
    teacher = json.loads((smollm2_dir() / "config.json").read_text())
    assert conf["num_hidden_layers"] == ra.STUDENT_LAYERS < teacher["num_hidden_layers"]
    assert conf["hidden_size"] == teacher["hidden_size"]  # same architecture and tokenizer, fewer layers


def test_notebook_usage_counts_the_paired_passes(tmp_path):
    tables = tmp_path / "full" / "tables"
    tables.mkdir(parents=True)
    (tables / "08_paired_passes.csv").write_text("method,requests,cache_hits,prompt_tokens,completion_tokens\n"
                                                 "litseg,6,0,600,60\nlitseg-lite,2,0,150,40\n")
    assert ra.notebook_usage(tmp_path, "08") == {"calls": 8, "cache_hits": 0, "prompt_tokens": 750,
                                                 "completion_tokens": 100}
