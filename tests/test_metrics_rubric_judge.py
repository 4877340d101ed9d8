"""The Appendix E.3 rubric judge: prompt assembly, robust reply parsing, bounded retries."""
import json

import pytest

from litseg_nb.llm.base import BackendUnavailableError, LLMError
from fakes import ScriptedBackend
from litseg_nb.litseg.rubric_judge import (RubricParseError, improper_overlap_flags,
                                            parse_rubric_reply, score_chunks_with_rubric)

SEGS = json.dumps({"segments": [{"subtitle": "A", "from_idx": 1, "to_idx": 3, "context_idx": []},
                                {"subtitle": "B", "from_idx": 4, "to_idx": 6, "context_idx": [5]}]})


def test_parse_clean_json():
    d1, d2, d3 = parse_rubric_reply('{"dimension1": [4, 5], "dimension2": [3.5, 4], "dimension3": [5.5, 0.5]}', 2)
    assert d1 == [4.0, 5.0] and d2 == [3.5, 4.0] and d3 == [5.5, 0.5]


@pytest.mark.parametrize("reply", [
    'Here you go:\n```json\n{"dimension1": [4, 5], "dimension2": [3, 4], "dimension3": [5, 2]}\n```',
    "{'dimension1': [4, 5], 'dimension2': [3, 4], 'dimension3': [5, 2],}",
    '{"Dimension 1": ["4", "5"], "dimension_2": [3, 4], "dim3": [5, 2]} trailing words',
    '{"event_validity": [4, 5], "unity_of_action": [3, 4], "cut_point_logic": [5, 2]}',
    'broken {"dimension1": [4, 5], "dimension2": [3, 4], "dimension3": [5, 2]',
    '{"a": 1} then {"dimension1": [4, 5], "dimension2": [3, 4], "dimension3": [5, 2]}',
])
def test_parse_malformed_but_recoverable(reply):
    assert parse_rubric_reply(reply, 2) == ([4.0, 5.0], [3.0, 4.0], [5.0, 2.0])


@pytest.mark.parametrize("reply, why", [
    ("", "empty"),
    ("I cannot evaluate this.", "no JSON"),
    ('{"dimension1": [4], "dimension2": [3, 4], "dimension3": [5, 2]}', "1 scores for 2 chunks"),
    ('{"dimension1": [4, 5], "dimension2": [3, 4]}', "missing dimension3"),
    ('{"dimension1": [4, 9], "dimension2": [3, 4], "dimension3": [5, 2]}', "outside"),
    ('{"dimension1": [4, 5], "dimension2": [0, 4], "dimension3": [5, 2]}', "outside"),
    ('{"dimension1": [4, "x"], "dimension2": [3, 4], "dimension3": [5, 2]}', "not a number"),
])
def test_parse_rejects_with_reason(reply, why):
    with pytest.raises(RubricParseError, match=why):
        parse_rubric_reply(reply, 2)


def test_overlap_flags_follow_rubric_condition():
    segs = json.loads(SEGS)["segments"] + [{"from_idx": 7, "to_idx": 9, "context_idx": [2]}]
    assert improper_overlap_flags(segs) == [False, True, False]


def test_judge_prompt_and_scores():
    be = ScriptedBackend(replies=['{"dimension1": [5, 4], "dimension2": [4, 4], "dimension3": [4.5, 3]}'])
    r = score_chunks_with_rubric(be, "[1] a\n[2] b", "the E.2 prompt", SEGS, n_chunks=2, retries=2)
    assert not r.neutral and r.attempts == 1
    assert r.per_chunk() == pytest.approx([(5 + 4 + 4.5) / 3, (4 + 4 + 3) / 3])
    assert r.mean == pytest.approx(((5 + 4 + 4.5) / 3 + (4 + 4 + 3) / 3) / 2)
    assert r.improper_overlap == [False, True]
    system, user = be.calls[0][0]["content"], be.calls[0][1]["content"]
    assert system.startswith("# Role and Task You are a Senior Narratologist")
    assert "**0.5-point penalty**" in system and "**additional 0.5 points**" in system
    assert "Segment Pipeline Prompt: the E.2 prompt" in user
    assert "Original Passage: [1] a\n[2] b" in user and user.endswith(SEGS)


def test_retry_then_success_is_counted():
    be = ScriptedBackend(replies=["garbage", "still no json",
                                  '{"dimension1": [3], "dimension2": [3], "dimension3": [3]}'])
    r = score_chunks_with_rubric(be, "p", "x", "{}", n_chunks=1, retries=2)
    assert not r.neutral and r.attempts == 3 and len(r.errors) == 2


def test_backend_error_propagates_never_a_neutral_score():
    # a dead judge server used to be "one failed attempt" and ended in the neutral 3.0 score
    be = ScriptedBackend(replies=["garbage", BackendUnavailableError("server http://127.0.0.1:9/v1 down"),
                                  '{"dimension1": [3], "dimension2": [3], "dimension3": [3]}'])
    with pytest.raises(BackendUnavailableError, match="127.0.0.1:9"):
        score_chunks_with_rubric(be, "p", "x", "{}", n_chunks=1, retries=2)
    # a request the backend refuses for this job alone (not a dead server) is a failed attempt, recorded
    r = score_chunks_with_rubric(ScriptedBackend(replies=[LLMError("prompt too long")]), "p", "x", "{}",
                                 n_chunks=1, retries=0)
    assert r.neutral and "prompt too long" in r.errors[0]


def test_bounded_retries_then_neutral_is_counted():
    be = ScriptedBackend(reply_fn=lambda conv: "no json here")
    r = score_chunks_with_rubric(be, "p", "x", SEGS, n_chunks=2, retries=1)
    assert r.neutral and r.attempts == 2 and len(be.calls) == 2
    assert r.event_validity == [3.0, 3.0] and r.mean == 3.0 and len(r.errors) == 2


def test_reasoning_and_budget_are_applied_by_the_judge_call():
    long_think = "<think>" + "weighing {" * 50 + "</think>"
    be = ScriptedBackend(replies=[long_think + '{"dimension1": [4], "dimension2": [4], "dimension3": [4]}'])
    r = score_chunks_with_rubric(be, "p", "x", "{}", n_chunks=1, retries=0, max_new_tokens=400)
    assert not r.neutral and r.event_validity == [4.0]
    be = ScriptedBackend(replies=["x" * 10_000 + '{"dimension1": [4], "dimension2": [4], "dimension3": [4]}'])
    r = score_chunks_with_rubric(be, "p", "x", "{}", n_chunks=1, retries=0, max_new_tokens=8)
    assert r.neutral and "exceeds" in r.errors[0]


def test_notebook06_judge_gets_the_real_prompt_and_segments_and_windows_long_units():
    """{segment_pipeline_prompt} is the method's prompt (not a placeholder), {segment_pipeline}
    its segments with text; a unit with more chunks than one call scores is judged in windows, counted."""
    from conftest import make_book
    from litseg_nb.evaluation.segment_quality import SegmentQualityConfig, judge_chunk_sets
    from litseg_nb.core.prompts import load_prompt
    from litseg_nb.core.schema import make_sentence_chunk

    book = make_book("gutenqa:B", units=1, n=5)
    u = book.units[0]
    sets = {"lumber": [make_sentence_chunk(book, u, "lumber", i, i + 1, i + 1) for i in range(5)]}
    seen = []

    def reply(conv):
        seen.append(conv[1]["content"])
        n = len(json.loads(conv[1]["content"].split("Segment Pipeline: ", 1)[1])["segments"])
        return json.dumps({f"dimension{d}": [4] * n for d in (1, 2, 3)})

    cfg = SegmentQualityConfig.for_profile("test", judge_max_chunks_per_unit=2, judge_max_passage_chars=0)
    per_unit, per_method = judge_chunk_sets(sets, [book], ScriptedBackend(reply_fn=reply), cfg)
    assert len(seen) == 3  # windows of 2, 2 and 1 chunks, each with the whole passage
    assert all(load_prompt("baselines/lumberchunker") in s and u.indexed_text(book.text) in s for s in seen)
    segs = json.loads(seen[0].split("Segment Pipeline: ", 1)[1])["segments"]
    assert [s["text"] for s in segs] == [c.text for c in sets["lumber"][:2]]
    row = per_method.iloc[0]
    assert row["n_windowed"] == 1 and row["n_windows"] == 3 and row["n_units"] == 1 and row["overall"] == 4.0
    skip = SegmentQualityConfig.for_profile("test", judge_max_chunks_per_unit=2, judge_windows=False)
    _, pm = judge_chunk_sets(sets, [book], ScriptedBackend(reply_fn=reply), skip)
    assert pm.iloc[0]["n_units"] == 0 and pm.iloc[0]["n_skipped_chunks"] == 1  # skipped, and counted
    assert SegmentQualityConfig.for_profile("smoke").judge_pipeline_prompt == "name"
    assert SegmentQualityConfig.for_profile("full").judge_pipeline_prompt == "full"
