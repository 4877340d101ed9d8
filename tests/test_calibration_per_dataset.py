"""The soft length reference is calibrated PER DATASET ("dataset-calibrated", §3.1.2).

Each unit's prompt carries its own dataset's value (LitSeg's three stages, Lite's training prompt and
the Lite segmenter), every annotation record says which value and whose it is, and a unit of a
dataset without a calibration is an error naming it (no pooled value)."""
from __future__ import annotations

import json
import re

import pytest

from litseg_nb.lite.data import annotation_length_reference, build_examples
from litseg_nb.lite.segmenter import LiteSegmenter
from litseg_nb.litseg.segmenter import calibrate_length_reference, calibration_table
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units
from fakes import ScriptedBackend

from conftest import make_book
from test_lite_heldout import lite_reply
from test_litseg_pipeline import good, items, stage_of

REFS = {"gutenqa": 7, "literaryqa": 13}


def _books():
    g = make_book("gutenqa:G", units=2, dataset="gutenqa")
    lq = make_book("literaryqa:L", units=1, dataset="literaryqa")
    return g, lq


def _stated(conv) -> int | None:
    m = re.search(r"maximum length for any single segment is (\d+) sentences", conv[0]["content"])
    return int(m.group(1)) if m else None


def test_each_units_prompt_carries_its_datasets_reference_and_the_record_says_so(tmp_path):
    g, lq = _books()
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    be = ScriptedBackend(reply_fn=good)
    path = tmp_path / "a.jsonl"
    run = annotate_units(items(lq, g), be, cfg, length_reference=REFS, annotations_path=path, progress=False)
    seen = {(stage_of(c), c[-1]["content"].count("of unit"), _stated(c)) for c in be.calls}
    assert {ref for *_, ref in seen} == {7, 13}
    for conv in be.calls:  # the GutenQA units' prompts carry GutenQA's value, LiteraryQA's LiteraryQA's
        assert _stated(conv) == (7 if "in gutenqa:G." in conv[-1]["content"] else 13)
    # grouped by system prompt: all three stages of one reference's units, then the other's
    assert [_stated(c) for c in be.calls] == [13] * 3 + [7] * 6
    assert [r["book_id"] for r in run.records] == ["literaryqa:L", "gutenqa:G", "gutenqa:G"]  # input order
    for r in run.records:
        ds = r["book_id"].split(":")[0]
        assert (r["dataset"], r["length_reference_dataset"], r["length_reference"]) == (ds, ds, REFS[ds])
        assert r["length_references"] == REFS
    # rerun: every unit resumed from the file (the key holds its prompt), fields kept, no call
    be2 = ScriptedBackend(reply_fn=good)
    again = annotate_units(items(lq, g), be2, cfg, length_reference=REFS, annotations_path=path, progress=False)
    assert not be2.calls and again.resumed == 3 and again.records == run.records
    on_disk = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["length_reference"] for r in on_disk] == [13, 7, 7]
    # another value for one dataset re-annotates that dataset's units only
    be3 = ScriptedBackend(reply_fn=good)
    annotate_units(items(lq, g), be3, cfg, length_reference={**REFS, "gutenqa": 9}, annotations_path=path,
                   progress=False)
    assert {_stated(c) for c in be3.calls} == {9} and len(be3.calls) == 6
    # one value for every unit: said so (no dataset)
    one = annotate_units(items(g), ScriptedBackend(reply_fn=good), cfg, length_reference=21, progress=False)
    assert {(r["length_reference"], r["length_reference_dataset"], r["length_references"]) for r in one.records} \
        == {(21, None, None)}


def test_a_dataset_without_calibration_is_an_error_naming_the_unit():
    g, lq = _books()
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    be = ScriptedBackend(reply_fn=good)
    with pytest.raises(ValueError, match=r"literaryqa:L/u0000.*'literaryqa' has no calibrated length reference"):
        annotate_units(items(g, lq), be, cfg, length_reference={"gutenqa": 7}, progress=False)
    assert not be.calls  # refused before any model call
    lite = ScriptedBackend(reply_fn=lite_reply)
    with pytest.raises(ValueError, match=r"literaryqa:L/u0000.*'literaryqa'"):
        LiteSegmenter(lite, retries=0, length_reference={"gutenqa": 7}).segment_units(items(g, lq))
    assert not lite.calls


def test_calibration_gives_one_value_per_dataset_including_lites_training_dataset(fresh_dirs):
    g, lq = _books()
    train = make_book("gutenberg:46", units=2, dataset="gutenberg")
    cfg = LitSegConfig.for_profile("test", max_retries=0, calibration_units=2, calibration_quantile=1.0)
    lengths = {"gutenqa:G": 2, "literaryqa:L": 5, "gutenberg:46": 3}

    def reply(conv):
        if stage_of(conv) != 3:
            return good(conv)
        assert _stated(conv) is None  # the no-length-constraint prompt
        bid = re.search(r"in ([\w:]+)\.", conv[-1]["content"]).group(1)
        k = lengths[bid]
        return json.dumps({"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": k},
                                        {"subtitle": "b", "from_idx": k + 1, "to_idx": 6}]})

    cal = calibrate_length_reference(items(g, lq), ScriptedBackend(reply_fn=reply), cfg, progress=False,
                                     train_items=items(train) + items(g))  # a trained-on dataset: its training units
    # 2 units asked for, 3 datasets: each dataset still gets one (it needs its own value)
    assert sorted(cal["subset_by_dataset"]) == ["gutenberg", "gutenqa", "literaryqa"]
    assert all(len(v) == 1 for v in cal["subset_by_dataset"].values())
    assert cal["length_reference"] == {"gutenberg": 3, "gutenqa": 4, "literaryqa": 5}  # max of (k, 6-k)
    assert cal["training_datasets"] == ["gutenberg", "gutenqa"] and cal["pooled"]["quantile_value"] == 5
    table = calibration_table(cal, "scripted")
    assert list(table["dataset"]) == ["gutenberg", "gutenqa", "literaryqa", "(pooled, not used)"]
    assert list(table["length_reference"][:3]) == [3, 4, 5] and set(table["source"][:3]) == {"calibrated"}
    off = calibration_table({"length_reference": 100, "source": "config (calibration off)", "subset": []})
    assert list(off["dataset"]) == ["(every dataset)"] and list(off["length_reference"]) == [100]


def test_a_dataset_evaluated_and_trained_on_is_calibrated_on_its_training_units(fresh_dirs):
    """full: LiteraryQA is evaluated on its test split and Lite trains on its train split; the value its
    test units' prompts carry comes from train units only (GutenQA, never trained on, from the selection)."""
    g = make_book("gutenqa:G", units=2, dataset="gutenqa")
    lq_test = make_book("literaryqa:T", units=2, dataset="literaryqa")
    lq_train = make_book("literaryqa:R", units=2, dataset="literaryqa")
    cfg = LitSegConfig.for_profile("test", max_retries=0, calibration_units=4, calibration_quantile=1.0)
    lengths = {"gutenqa:G": 2, "literaryqa:T": 1, "literaryqa:R": 4}
    seen = []

    def reply(conv):
        bid = re.search(r"in ([\w:]+)\.", conv[-1]["content"]).group(1)
        seen.append(bid)
        if stage_of(conv) != 3:
            return good(conv)
        k = lengths[bid]
        return json.dumps({"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": k},
                                        {"subtitle": "b", "from_idx": k + 1, "to_idx": 6}]})

    cal = calibrate_length_reference(items(g, lq_test), ScriptedBackend(reply_fn=reply), cfg, progress=False,
                                     train_items=items(lq_train))
    assert "literaryqa:T" not in seen and {"gutenqa:G", "literaryqa:R"} <= set(seen)
    assert cal["length_reference"] == {"gutenqa": 4, "literaryqa": 4}  # max(k, 6 - k) of G (2) and R (4)
    assert cal["training_datasets"] == ["literaryqa"]
    assert {u.split("/")[0] for u in cal["subset_by_dataset"]["literaryqa"]} == {"literaryqa:R"}


def test_lite_uses_the_units_datasets_reference_in_training_and_at_inference():
    g, lq = _books()
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    # Lite's training units: LiteraryQA (full: the train split); the run's calibration covers both datasets
    train = annotate_units(items(lq), ScriptedBackend(reply_fn=good), cfg, length_reference=REFS,
                           progress=False).records
    refs = annotation_length_reference(train)
    assert refs == REFS  # the teacher's whole calibration, read from the training records
    examples, _ = build_examples(train, [lq])
    assert examples and all(e.length_reference == 13 and "is 13 sentences" in e.system for e in examples)
    be = ScriptedBackend(reply_fn=lite_reply)
    LiteSegmenter(be, retries=0, length_reference=refs).segment_units(items(g, lq))
    assert [_stated(c) for c in be.calls] == [7, 7, 13]
    # records of two calibrations disagree on a dataset: one student cannot use both
    other = annotate_units(items(g), ScriptedBackend(reply_fn=good), cfg,
                           length_reference={**REFS, "literaryqa": 12}, progress=False).records
    with pytest.raises(ValueError, match="different length references for dataset 'literaryqa'"):
        annotation_length_reference(train + other)
    one = annotate_units(items(g), ScriptedBackend(reply_fn=good), cfg, length_reference=7, progress=False).records
    with pytest.raises(ValueError, match="mix one length reference"):
        annotation_length_reference(train + one)


def test_e3_judge_shows_each_units_datasets_reference_and_rule_based_chunkers_need_none():
    from litseg_nb.evaluation.segment_quality import SegmentQualityConfig, judge_chunk_sets
    from litseg_nb.core.schema import make_sentence_chunk

    g, lq = _books()
    other = make_book("gutenberg:46", units=1, dataset="gutenberg")  # no calibration for this dataset
    one = lambda b, u, m: [make_sentence_chunk(b, u, m, 0, 1, u.n_sentences)]  # noqa: E731
    sets = {"litseg-lite": one(g, g.units[0], "litseg-lite") + one(lq, lq.units[0], "litseg-lite"),
            "token": one(other, other.units[0], "token")}
    seen = []

    def reply(conv):
        seen.append(conv[1]["content"])
        return json.dumps({f"dimension{d}": [4] for d in (1, 2, 3)})

    cfg = SegmentQualityConfig.for_profile("test", judge_max_units=0, judge_max_passage_chars=0)
    per_unit, _ = judge_chunk_sets(sets, [g, lq, other], ScriptedBackend(reply_fn=reply), cfg, length_reference=REFS)
    stated = {r.book_id: re.search(r"single segment is (\d+) sentences", s) for r, s in zip(per_unit.itertuples(), seen)}
    assert int(stated["gutenqa:G"].group(1)) == 7 and int(stated["literaryqa:L"].group(1)) == 13
    assert stated["gutenberg:46"] is None  # the token splitter's algorithm: no length reference needed
    with pytest.raises(ValueError, match=r"gutenberg:46/u0000.*'gutenberg'"):
        judge_chunk_sets({"litseg-lite": one(other, other.units[0], "litseg-lite")}, [other],
                         ScriptedBackend(reply_fn=reply), cfg, length_reference=REFS)
