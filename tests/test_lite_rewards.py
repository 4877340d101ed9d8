"""GRPO rewards of LitSeg-Lite: rule-based format reward and the E.3 judge reward."""
from __future__ import annotations

import json

import pytest

from litseg_nb.litseg.validate import validate_segments
from litseg_nb.lite.train import (FORMAT_RULES, NarratologicalReward, build_reward_funcs,
                                    format_reward, format_reward_breakdown, format_rules_table)
from litseg_nb.llm.base import BackendUnavailableError
from fakes import ScriptedBackend

N = 10
W = {r.name: r.weight for r in FORMAT_RULES}


def reply(segments, steps=True) -> str:
    obj = {"step3": {"chapter_title": "I", "step_3_turning_points": [], "segments": segments}}
    if steps:
        obj = {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, **obj}
    return json.dumps(obj)


def seg(a, b, ctx=()):
    return {"subtitle": f"{a}-{b}", "from_idx": a, "to_idx": b, "context_idx": list(ctx)}


def test_rules_table_weights_sum_to_one():
    df = format_rules_table()
    assert list(df.columns) == ["rule", "weight", "partial credit"]
    assert df["weight"].sum() == pytest.approx(1.0)


def test_valid_output_scores_one_and_passes_shared_validator():
    text = reply([seg(1, 4), seg(5, 10, [3])])
    b = format_reward_breakdown(text, N)
    assert b["total"] == pytest.approx(1.0)
    assert validate_segments(json.loads(text)["step3"], N).ok


def test_overlap_is_allowed():
    assert format_reward_breakdown(reply([seg(1, 5), seg(5, 10)]), N)["total"] == pytest.approx(1.0)


def test_gap_loses_coverage_credit_only():
    b = format_reward_breakdown(reply([seg(1, 3), seg(6, 10)]), N)  # 4, 5 uncovered
    assert b["full_coverage"] == pytest.approx(0.8)
    assert b["total"] == pytest.approx(1.0 - W["full_coverage"] * 0.2)


def test_out_of_range_segment():
    b = format_reward_breakdown(reply([seg(1, 5), seg(6, 14)]), N)
    # the second range is invalid: half the segments valid, 6..10 uncovered, last end wrong
    assert b["indices_valid"] == pytest.approx(0.5)
    assert b["full_coverage"] == pytest.approx(0.5)
    assert b["first_last"] == pytest.approx(0.5)
    assert b["total"] == pytest.approx(W["parses"] + W["schema"] + 0.5 * W["indices_valid"]
                                       + 0.5 * W["full_coverage"] + 0.5 * W["first_last"])
    # an out-of-range context index invalidates its segment too
    b = format_reward_breakdown(reply([seg(1, 5, [11]), seg(6, 10)]), N)
    assert b["indices_valid"] == pytest.approx(0.5) and b["full_coverage"] == pytest.approx(1.0)


def test_unparsable_and_truncated_score_zero():
    for text in ["", "no json here", reply([seg(1, 10)])[:-5], "[1, 2, 3]", "null"]:
        assert format_reward_breakdown(text, N)["total"] == 0.0


def test_missing_steps_partial_schema_credit():
    b = format_reward_breakdown(reply([seg(1, 10)], steps=False), N)
    assert b["schema"] == pytest.approx(3 / 5)
    b = format_reward_breakdown(json.dumps({"segments": [seg(1, 10)]}), N)
    assert b["schema"] == pytest.approx(1 / 5) and b["full_coverage"] == 1.0


def test_format_reward_trl_signature_with_conversational_completions():
    good = [{"role": "assistant", "content": reply([seg(1, 10)])}]
    bad = [{"role": "assistant", "content": "oops"}]
    assert format_reward([good, bad, reply([seg(1, 10)])], n_sentences=[N, N, N]) == [1.0, 0.0, 1.0]


def _cols(k):
    return dict(passage=["[1] a"] * k, system_prompt=["sys"] * k, n_sentences=[N] * k)


def test_narratological_reward_averages_dimensions_then_chunks():
    judge = ScriptedBackend(replies=['{"dimension1": [5, 3], "dimension2": [5, 3], "dimension3": [5.5, 2.5]}'])
    funcs, narr = build_reward_funcs(judge, retries=0)
    assert funcs[0] is format_reward and funcs[1] is narr
    out = narr([reply([seg(1, 4), seg(5, 10)])], **_cols(1))
    # chunk means: 5.1667 and 2.8333 -> mean 4.0 -> (4 - 1) / 4
    assert out == [pytest.approx(0.75)]
    assert narr.stats.judged == 1 and narr.stats.neutral == 0
    user = judge.calls[0][1]["content"]
    assert "Segment Pipeline Prompt: sys" in user and '"from_idx": 5' in user


def test_judge_parser_survives_malformed_replies_then_neutral_is_counted():
    bad_replies = ["I think they are fine.", '{"dimension1": [4, 4], "dimension2": [4]',
                   '{"dimension1": [9, 9], "dimension2": [4, 4], "dimension3": [4, 4]}',
                   ""]
    judge = ScriptedBackend(replies=list(bad_replies))
    narr = NarratologicalReward(judge, retries=3)
    out = narr([reply([seg(1, 4), seg(5, 10)])], **_cols(1))
    assert out == [pytest.approx(0.5)]  # neutral 3.0 -> 0.5
    assert narr.stats.neutral == 1 and narr.stats.judge_calls == 4
    # a dead judge server is no malformed reply: it propagates, never the neutral reward
    with pytest.raises(BackendUnavailableError, match="server down"):
        NarratologicalReward(ScriptedBackend(replies=[BackendUnavailableError("server down")]), retries=3)(
            [reply([seg(1, 4), seg(5, 10)])], **_cols(1))
    # lenient parsing: fenced, trailing comma, string numbers, prose around
    ok = ScriptedBackend(replies=['Sure!\n```json\n{"Dimension 1": ["4", 4], "dimension_2": [4, 4,], '
                                  '"dimension3": [4, 4]}\n``` done'])
    narr = NarratologicalReward(ok, retries=0)
    assert narr([reply([seg(1, 4), seg(5, 10)])], **_cols(1)) == [pytest.approx(0.75)]
    assert narr.stats.neutral == 0


def test_unjudgeable_completion_gets_zero_without_a_judge_call():
    judge = ScriptedBackend(replies=[])
    narr = NarratologicalReward(judge, retries=2)
    assert narr(["not json", reply([seg(11, 12)])], **_cols(2)) == [0.0, 0.0]
    assert narr.stats.unscorable == 2 and not judge.calls


def test_reward_and_validator_share_one_definition_of_a_valid_segment():
    from litseg_nb.lite.train import judgeable_segments
    from litseg_nb.lite.segmenter import validate_single_pass

    cases = {  # reply -> (validator ok, indices_valid)
        reply([seg(1, 4), {"subtitle": "s", "from_idx": "5", "to_idx": 10}]): (False, 0.5),  # a digit string
        reply([seg(1, 4, [2]), seg(5, 10)]): (True, 1.0),  # context inside its own range: the judge's business
        reply([seg(1, 4), {"subtitle": "s", "from_idx": 5, "to_idx": 10, "context_idx": None}]): (True, 1.0),
        reply([seg(1, 4), seg(5, 10), seg(6, 8)]): (False, 2 / 3),  # a nested range repeats text
        reply([seg(1, 4), seg(5, 10), 7]): (False, 2 / 3),  # not an object
    }
    for text, (ok, share) in cases.items():
        b = format_reward_breakdown(text, N)
        assert validate_single_pass(text, N).ok is ok and b["valid"] == float(ok), text
        assert b["indices_valid"] == pytest.approx(share), text
        assert b["full_coverage"] == 1.0
        if ok:
            assert judgeable_segments(text, N) == [
                {**s, "context_idx": s.get("context_idx") or []} for s in json.loads(text)["step3"]["segments"]]


def test_judge_gets_the_students_output_with_segment_texts():
    """E.3's Segment Pipeline is the student's output (analysis + segments with their text),
    not a bare {"segments": ...}; the Segment Pipeline Prompt is the prompt the student saw."""
    judge = ScriptedBackend(replies=['{"dimension1": [4, 4], "dimension2": [4, 4], "dimension3": [4, 4]}'])
    narr = NarratologicalReward(judge, retries=0)
    passage = "\n".join(f"[{i}] Sentence number {i}." for i in range(1, N + 1))
    narr([reply([seg(1, 4), seg(5, 10, [2])])], passage=[passage], system_prompt=["THE LITE PROMPT"],
         n_sentences=[N])
    user = judge.calls[0][1]["content"]
    pipeline = json.loads(user.split("Segment Pipeline: ", 1)[1])
    assert "Segment Pipeline Prompt: THE LITE PROMPT" in user
    assert pipeline["step1"] == {"step_1_events": "e"} and pipeline["step2"] == {"step_2_threads": "t"}
    assert pipeline["step3"]["chapter_title"] == "I" and "segments" not in pipeline["step3"]
    assert pipeline["segments"][0]["text"] == " ".join(f"Sentence number {i}." for i in range(1, 5))
    assert pipeline["segments"][1]["text"].startswith("Sentence number 2.\nSentence number 5.")
