"""The notebooks' walk-throughs show what the real functions did (cheap: a toy book, a scripted LLM)."""
from __future__ import annotations

import json

import pytest

from litseg_nb.front import walkthrough
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import records_to_chunks
from fakes import ScriptedBackend


def test_toy_book_through_cleaning_and_heading_detection():
    raw, book = walkthrough.toy_book(300)
    assert "*** START OF THE PROJECT GUTENBERG EBOOK" in raw and "Project Gutenberg" not in book.text
    assert [u.title for u in book.units] == ["CHAPTER I. The Storm", "CHAPTER II. The Letter"]
    steps = dict(walkthrough.preprocessing_steps(raw, book).itertuples(index=False))
    assert steps["4. contents list"] == "2 entries, 2 found again in the body"
    assert "CONTENTS" in steps["5. not narrative"] and "2 unit(s)" in steps["6. units"]
    assert "title 'The Lighthouse Keeper', author 'A. N. Example'" in steps["1. licence stripped"]


def _reply(conv):
    user = conv[-1]["content"]
    if "ONLY Step 1" in user:
        return json.dumps({"step_1_events": "the storm; the boy"})
    if "ONLY Step 2" in user:
        return "not json"  # invalid: retried, then passed on verbatim
    return json.dumps({"chapter_title": "T", "step_3_turning_points": [],
                       "segments": [{"subtitle": "Storm", "from_idx": 1, "to_idx": 6, "context_idx": []},
                                    {"subtitle": "Dawn", "from_idx": 7, "to_idx": 8, "context_idx": [5]}]})


def test_one_unit_through_the_three_prompts():
    _, book = walkthrough.toy_book(300)
    unit = book.units[0]
    cfg = LitSegConfig.for_profile("test", max_retries=1)
    record = walkthrough.litseg_walkthrough(book, unit, ScriptedBackend(reply_fn=_reply), cfg, 100)
    stages = walkthrough.stage_table(record)
    assert list(stages["stage"]) == ["stage1", "stage2", "stage2", "stage3"]  # stage 2 retried once
    assert list(stages["valid"]) == [True, False, False, True]
    assert list(stages["passed on"]) == ["none", "", "raw_passthrough", ""]
    assert "not parsable JSON" in stages["errors"].iloc[1]
    # the stage-3 prompt holds the earlier stages' results as they were passed on
    p3 = walkthrough.prompt_text(record, "stage3")
    assert "the storm; the boy" in p3 and "not json" in p3 and "[8] A rowing boat" in p3
    verdict = walkthrough.verdict_table(record)
    assert list(verdict["fallback"]) == ["none", "none"] and list(verdict["to_idx"]) == [6, 8]
    chunks = records_to_chunks([book], [record], method="litseg-walkthrough")
    assert [c.subtitle for c in chunks] == ["Storm", "Dawn"] and chunks[1].context_idx == [5]
    assert walkthrough.crop_middle("x" * 50, 20).count("characters of the verbatim prompt") == 1


def test_retrieval_examples_are_the_package_formulas():
    ex = walkthrough.retrieval_examples(k=60)
    assert list(ex["rrf"]["chunk"]) == [0, 2, 1, 3]  # both retrievers' agreement beats one first place
    assert ex["rrf"]["RRF score"].iloc[0] == pytest.approx(1 / 62 + 1 / 61)
    assert ex["means"]["MRR"] == pytest.approx(4 / 9) and ex["means"]["DCG@5"] == pytest.approx(0.5)
    assert ex["means"]["Recall@2"] == pytest.approx(1 / 3)


def test_the_reference_annotation_passes_the_validator_and_reconstructs_exactly():
    """The hand-written reference (teaching material) goes through the model replies' checks: valid at every
    stage, no fallback, and chunks whose spans are the unit's own sentences."""
    _, book = walkthrough.toy_book(300)
    template = (walkthrough.TEMPLATES_DIR / "litseg" / "stage3.txt").read_text(encoding="utf-8")
    for unit in book.units:
        ref = walkthrough.reference_annotation(book, unit)
        assert list(ref["replies"]["stage"]) == ["stage1", "stage2", "stage3"]
        assert ref["replies"]["valid"].all() and set(ref["replies"]["errors"]) == {"-"}, ref["replies"]
        assert ref["final"].fallback == "none" and len(ref["final"].segments) >= 2
        sents = {i: (s.start, s.end) for i, s in enumerate(unit.sentences, 1)}
        covered = set()
        for seg, chunk in zip(ref["final"].segments, ref["chunks"]):
            main = (sents[seg.from_idx][0], sents[seg.to_idx][1])
            assert chunk.main_text == book.text[main[0]:main[1]]
            ctx = [sents[i] for i in chunk.context_idx]
            assert sorted(chunk.spans) == sorted([main, *ctx])  # single context sentences: one span each
            for a, b in chunk.spans:
                assert book.text[a:b] in chunk.text
            assert chunk.text.startswith(seg.subtitle + "\n") and seg.subtitle not in template
            covered.update(range(seg.from_idx, seg.to_idx + 1))
        assert covered == set(sents)
        assert any(c.context_idx for c in ref["chunks"])  # the format's context indices at work


def test_a_broken_reference_is_reported_not_hidden(tmp_path, monkeypatch):
    data = json.loads(walkthrough.REFERENCE_FILE.read_text(encoding="utf-8"))
    segs = data["units"]["CHAPTER I. The Storm"]["stage3"]["segments"]
    segs[1]["from_idx"] = 8  # sentence 7 in no segment
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(walkthrough, "REFERENCE_FILE", path)
    _, book = walkthrough.toy_book(300)
    ref = walkthrough.reference_annotation(book, book.units[0])
    assert not ref["replies"]["valid"].iloc[2] and "sentences in no main range: 7" in ref["replies"]["errors"].iloc[2]
    assert ref["final"].fallback == "coverage_repair"


def test_reward_examples_rank_the_reference_above_a_gap_an_echo_and_a_cut_reply():
    _, book = walkthrough.toy_book(300)
    table = walkthrough.reward_examples(book.units[0]).set_index("reply")
    totals = list(table["total"])
    assert totals[0] == 1.0 and table["valid"].iloc[0] == 1.0  # the reference: every rule met
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    assert table.loc["template echoed", "indices_valid"] == 0.0  # "Integer start index, ..." is no index
    assert table.loc["reply cut off", "parses"] == 0.0
