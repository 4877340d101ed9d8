"""Regressions: LLM replies that never crash a run and are never misread.

Every item of the issue is pinned here with the exact inputs the issue gives: crashes (lone
surrogates, Lite's integer reading, the rubric judge's Overflow/RecursionError), misreadings
(reasoning blocks, backticks in JSON strings, fallback labels, ``context_idx: null``, duplicate
segments, the rubric's worked example) and bounded cost (size caps; linear parsers and repair,
checked with inputs the old quadratic code needed hours for, under a timeout far above the
expected seconds). The module under test is :mod:`litseg_nb.llm.replies`.
"""
from __future__ import annotations

import json

import pytest

import conftest
from litseg_nb.chunkers.llm_chunkers import parse_answer
from litseg_nb.llm.replies import list_items as parse_propositions
from litseg_nb.lite.train import (NarratologicalReward, format_reward, format_reward_breakdown,
                                    judgeable_segments)
from litseg_nb.lite.segmenter import validate_single_pass
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, read_annotations, records_to_chunks
from litseg_nb.litseg.validate import (Segment, finalize_segments, parse_json_reply, repair_coverage,
                                       validate_segments)
from fakes import ScriptedBackend
from litseg_nb.metrics.pairwise import parse_verdict
from litseg_nb.litseg.rubric_judge import (RubricParseError, parse_rubric_reply, rubric_worked_example,
                                            score_chunks_with_rubric)
from litseg_nb.llm.replies import (MAX_CHARS_PER_TOKEN, answer_text, extract_json, read_int, read_reply,
                               reply_char_limit)
from litseg_nb.core.schema import Book

N = 10


def seg(a, b, ctx=(), sub="s"):
    return {"subtitle": sub, "from_idx": a, "to_idx": b, "context_idx": list(ctx)}


def stage3(*segs) -> str:
    return json.dumps({"chapter_title": "c", "step_3_turning_points": [], "segments": list(segs)})


def lite(*segs) -> str:
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"chapter_title": "I", "step_3_turning_points": [], "segments": list(segs)}})


# ============================================================================ 1. lone surrogates
def make_book(units=1, n=6) -> Book:
    return conftest.make_book("b", units, n, sentence="Sentence {i} of unit {u}.", title="Book")


def stage_of(conv) -> int:
    user = conv[-1]["content"]
    return next(k for k in (1, 2, 3) if f"ONLY Step {k}" in user)


def test_lone_surrogate_escapes_are_replaced_when_parsed():
    got = extract_json('{"step_1_events": "e \\ud83d"}')
    assert got.obj == {"step_1_events": "e \ufffd"} and got.surrogates == 1
    assert any("surrogate" in n for n in got.notes)
    sub = parse_json_reply(stage3(seg(1, 10, sub="\ud83d")))  # the escape json.dumps writes
    assert sub["segments"][0]["subtitle"] == "\ufffd"
    # a paired escape is one character and stays
    assert parse_json_reply('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001F600"}
    # a lone surrogate *character* in the text (as a backend may hand it over)
    assert parse_json_reply('{"a": "x\ud83d"}') == {"a": "x\ufffd"}
    json.dumps(sub, ensure_ascii=False).encode("utf-8")


def test_lone_surrogate_replies_do_not_crash_annotation(tmp_path):
    book = make_book()

    def reply(conv):
        k = stage_of(conv)
        if k == 1:
            return '{"step_1_events": "e \\ud83d"}'
        if k == 2:
            return '{"step_2_threads": "t"} and a raw one: \ud83d'
        return stage3(seg(1, 3, sub="\ud83d"), seg(4, 6))

    path = tmp_path / "a.jsonl"
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    (r,) = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=reply), cfg,
                          annotations_path=path, progress=False).records
    assert r["fallback"] == "none" and r["segments"][0]["subtitle"] == "\ufffd"
    assert r["stages"]["stage1"]["passed_on"] == '{"step_1_events": "e \ufffd"}'
    assert "\ufffd" in r["stages"]["stage2"]["attempts"][0]["text"]
    (back,) = read_annotations(path)
    assert back["segments"] == r["segments"]
    chunks = records_to_chunks([book], [r])
    assert chunks[0].subtitle == "\ufffd"


def test_line_separator_characters_in_a_reply_survive_the_annotations_file(tmp_path):
    """U+0085 / U+2028 in a subtitle are written raw (ensure_ascii=False); reading must not split there."""
    book = make_book()
    replies = {1: '{"step_1_events": "a\u2028b"}', 2: '{"step_2_threads": "t\u0085"}',
               3: stage3(seg(1, 3, sub="x\x85y\u2029z"), seg(4, 6))}
    path = tmp_path / "a.jsonl"
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    (r,) = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=lambda c: replies[stage_of(c)]),
                          cfg, annotations_path=path, progress=False).records
    assert read_annotations(path)[0]["segments"][0]["subtitle"] == "x\x85y\u2029z"


# ============================================================================ 2. Lite's integer reading
BAD_INTS = ["²", "①", "--1", "1" * 4300]


@pytest.mark.parametrize("bad", BAD_INTS)
def test_lite_rewards_score_every_index_string(bad):
    for text in (lite(seg(bad, 10)), lite(seg(1, bad)), lite(seg(1, 10, [bad])), lite(seg(1, 10), seg(bad, bad))):
        b = format_reward_breakdown(text, N)
        assert 0.0 <= b["total"] <= 1.0 and b["valid"] == 0.0
        assert b["indices_valid"] < 1.0  # the entry holding it is not valid
        assert format_reward([text], n_sentences=[N])[0] == b["total"]
        for s in judgeable_segments(text, N):
            assert all(isinstance(v, int) for v in (s["from_idx"], s["to_idx"], *s["context_idx"]))
        assert validate_single_pass(text, N).ok is False
    assert read_int(bad) is None


def test_lite_rewards_context_idx_superscript_two():
    text = lite({"subtitle": "s", "from_idx": 1, "to_idx": 10, "context_idx": ["²"]})
    b = format_reward_breakdown(text, N)
    assert b["indices_valid"] == 0.0 and b["full_coverage"] == 1.0
    assert judgeable_segments(text, N) == [seg(1, 10)]


def test_read_int_reads_only_unambiguous_integers():
    assert [read_int(v) for v in (3, "3", " +4 ", -2, 5.0, "٣", "1e3", 2.5, True, None, float("nan"), 1e13)] == \
        [3, 3, 4, -2, 5, None, None, None, None, None, None, None]


# ============================================================================ 3. rubric judge crashes
@pytest.mark.parametrize("reply", [
    "[1e309]",
    '{"dimension1": [1e309], "dimension2": [3], "dimension3": [3]}',
    '{"dimension1": [' + "9" * 400 + '], "dimension2": [3], "dimension3": [3]}',
    '{"dimension1": [-1e309], "dimension2": [NaN], "dimension3": [Infinity]}',
    "[" * 1000 + "]" * 1000,
    '{"dimension1": ' + "[" * 1000 + "]" * 1000 + ', "dimension2": [3], "dimension3": [3]}',
    "{" * 1000 + "}" * 1000,
])
def test_rubric_parser_raises_only_its_own_error(reply):
    with pytest.raises(RubricParseError):
        parse_rubric_reply(reply, 1)
    r = score_chunks_with_rubric(ScriptedBackend(replies=[reply]), "p", "x", "{}", n_chunks=1, retries=0)
    assert r.neutral and r.attempts == 1


def test_rubric_parser_deeply_nested_score_objects():
    deep = '{"dimension1": [' + '{"score": ' * 950 + "3" + "}" * 950 + '], "dimension2": [3], "dimension3": [3]}'
    try:  # too deep for the JSON decoder; the loose key: [numbers] reading may still find the 3
        assert parse_rubric_reply(deep, 1) == ([3.0], [3.0], [3.0])
    except RubricParseError:
        pass


# ============================================================================ 4. reasoning blocks
FINAL = stage3(seg(1, 4), seg(5, 10))
DRAFT = stage3(seg(1, 2), seg(3, 10))


@pytest.mark.parametrize("reply", [
    f"<think>Draft:\n{DRAFT}\nHmm, 3 belongs to the first event.</think>\n{FINAL}",  # full draft
    f'<think>First segment: {json.dumps(seg(1, 4))} ...</think>\n{FINAL}',  # one segment object
    f"<think>The set {{1, 2, 3 is one event</think>\n```json\n{FINAL}\n```",  # unbalanced brace
    f"Let me think.\n{DRAFT[:40]} no wait.</think>\n{FINAL}",  # the chat template opened the block
    f"<think>a</think><THINK>b {DRAFT}</THINK>\n{FINAL}",  # several blocks, any case
])
def test_reasoning_is_removed_before_extraction(reply):
    got = extract_json(reply)
    assert got.obj == json.loads(FINAL) and got.reply.reasoning_blocks >= 1
    res = validate_segments(got.obj, N)
    assert res.ok and finalize_segments(res, N).fallback == "none"


def test_reasoning_tags_inside_json_strings_are_text():
    """Found by the fuzz test: tags in subtitles, also when garbage before the answer keeps the JSON
    scan from finding the object."""
    obj = json.loads(stage3(seg(1, 1, sub="\\"), seg(2, 2, sub="<think>"), seg(3, 3, sub='a"</think>"b'),
                            seg(4, 4, sub="</think>")))
    for text in (json.dumps(obj), f"```json\n{json.dumps(obj)}\n```", f"{{</think>\n\n{json.dumps(obj)}",
                 f"<think>{{ draft</think>\n{json.dumps(obj, indent=2)}"):
        assert parse_json_reply(text) == obj, text


def test_stray_quote_in_reasoning_does_not_hide_its_closing_tag():
    """The openai backend rebuilds server-side reasoning as '<think>{r}</think>{content}' (no newline):
    a quote left open in the reasoning must not make the closing tag look like string content."""
    for text in ('<think>The user wants "events</think>{"step_1_events": "x"}',
                 '<think>He said "no.\nSo "events</think>{"step_1_events": "x"}'):
        got = extract_json(text)
        assert got.obj == {"step_1_events": "x"} and got.reply.reasoning_blocks == 1, text


def test_reply_cut_inside_reasoning_is_rejected_and_counted():
    cut = f"<think>I will answer {DRAFT} after checking the {{events"
    got = extract_json(cut)
    assert got.obj is None and got.reply.truncated_in_reasoning
    assert "inside its reasoning" in got.error
    assert format_reward_breakdown(cut, N)["total"] == 0.0 and judgeable_segments(cut, N) == []
    judge = ScriptedBackend(replies=[])
    narr = NarratologicalReward(judge, retries=0)
    assert narr([cut], passage=["p"], system_prompt=["s"], n_sentences=[N]) == [0.0]
    assert narr.stats.truncated_in_reasoning == 1 and not judge.calls


def test_placeholder_in_reasoning_is_not_passed_to_the_next_stage():
    book = make_book()
    replies = {1: '<think>Format: {"step_1_events": "..."}</think>\n{"step_1_events": "Emma marries."}',
               2: '<think>Format: {"step_2_threads": "..."}',  # cut inside the reasoning, every attempt
               3: FINAL.replace("10", "6").replace('"to_idx": 4', '"to_idx": 3').replace('"from_idx": 5', '"from_idx": 4')}
    cfg = LitSegConfig.for_profile("test", max_retries=1)
    (r,) = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=lambda c: replies[stage_of(c)]),
                          cfg, progress=False).records
    assert r["stages"]["stage1"]["passed_on"] == '{"step_1_events": "Emma marries."}'
    st2 = r["stages"]["stage2"]
    assert st2["fallback"] == "empty" and st2["passed_on"] == ""  # the reasoning is never passed on
    assert st2["truncated_in_reasoning"] == 2 and r["truncated_in_reasoning"] == 2
    assert all(a["truncated_in_reasoning"] and "inside its reasoning" in a["errors"][0] for a in st2["attempts"])
    assert r["fallback"] == "none"


def test_lite_segmenter_counts_replies_cut_inside_reasoning():
    from litseg_nb.lite.segmenter import LiteSegmenter

    book = make_book()
    be = ScriptedBackend(replies=["<think>Let me see {", f"<think>ok</think>{lite(seg(1, 3), seg(4, 6))}"])
    chunks, (r,) = LiteSegmenter(be, retries=1).segment_units([(book, book.units[0])])
    assert r.truncated_in_reasoning == 1 and r.attempts == 2 and r.fallback == "none"
    assert "inside its reasoning" in r.errors[0][0] and len(chunks) == 2


def test_non_json_parsers_read_the_answer_only():
    assert parse_answer("<think>Answer: ID 3? no.</think>\nAnswer: ID 7") == 7
    assert parse_answer("Answer: ID " + "9" * 5000) is None
    assert parse_verdict("<think>Verdict: A looks right... no</think>\nVerdict: B") == "B"
    assert parse_verdict("Verdict: A\n</think>\nVerdict: Tie") == "Tie"
    assert parse_propositions("<think>- draft claim</think>\n- Emma is clever.\n-   \n2) Harriet") == \
        ["Emma is clever.", "Harriet"]
    assert answer_text("<think>unfinished") == ""
    from litseg_nb.rag.pipeline import clean_answer

    assert clean_answer("<think>Maybe Harriet?\n\nNo.</think>\n\nMr. Knightley.\n\nExtra.") == "Mr. Knightley."


# ============================================================================ 5. backticks in JSON strings
@pytest.mark.parametrize("wrap", [
    "{}", "Here it is:\n{}\nDone.", "```json\n{}\n```", "Sure!\n```\n{}\n```\nAnything else?", "  ```JSON\n{}\n  ```",
])
def test_triple_backticks_inside_json_strings_do_not_open_fences(wrap):
    obj = {"chapter_title": "a```", "step_3_turning_points": [{"type": "```c", "description": "x ``` y"}],
           "segments": [seg(1, 5, sub="a```"), seg(6, 10, sub="```c")]}
    text = wrap.replace("{}", json.dumps(obj))
    assert parse_json_reply(text) == obj
    assert validate_segments(parse_json_reply(text), N).ok
    pretty = wrap.replace("{}", json.dumps(obj, indent=2))
    assert parse_json_reply(pretty) == obj


def test_fence_preferred_over_example_in_prose():
    text = 'The schema is {"segments": []}.\n```json\n' + FINAL + "\n```"
    assert parse_json_reply(text) == json.loads(FINAL)


# ============================================================================ 6. fallback labels
def test_fallback_labels_name_what_was_repaired():
    res = validate_segments({"segments": [seg(1, 10), seg(5, 7)]}, N)
    assert "last segment ends at 7, not 10" in res.errors
    fin = finalize_segments(res, N)
    assert fin.fallback == "index_repair" and not any("coerced" in a for a in fin.actions)
    assert fin.actions == ["segment 2: dropped range 5-7 (inside segment 1, 1-10)"]
    assert fin.segments == [Segment("s", 1, 10)]
    # coercion is named only when it happened, with the value
    fin = finalize_segments(validate_segments({"segments": [seg(1, "10")]}, N), N)
    assert fin.fallback == "index_repair" and fin.actions == ["segment 1: to_idx '10' read as 10"]
    # schema repair names the entry it skipped
    fin = finalize_segments(validate_segments({"segments": [seg(1, 10), {"from_idx": 2}]}, N), N)
    assert fin.fallback == "schema_repair" and fin.actions == ["segment 2: skipped (missing subtitle, to_idx)"]


# ============================================================================ 7. context_idx null
def test_context_idx_null_is_valid_for_validator_and_reward_alike():
    s = {"subtitle": "s", "from_idx": 1, "to_idx": 10, "context_idx": None}
    assert validate_segments({"segments": [s]}, N).ok
    b = format_reward_breakdown(lite(s), N)
    assert b["indices_valid"] == 1.0 and b["valid"] == 1.0 and b["total"] == pytest.approx(1.0)
    assert validate_single_pass(lite(s), N).ok
    assert judgeable_segments(lite(s), N) == [seg(1, 10)]
    # and a non-list context is invalid for both
    s["context_idx"] = "3"
    assert not validate_segments({"segments": [s]}, N).ok
    assert format_reward_breakdown(lite(s), N)["indices_valid"] == 0.0


# ============================================================================ 8. duplicate segments
def test_exact_duplicate_segments_are_repaired_not_accepted():
    res = validate_segments(json.loads(stage3(seg(1, 5), seg(1, 5), seg(6, 10))), N)
    assert not res.ok and any("duplicates the range of segment 1" in e for e in res.errors)
    fin = finalize_segments(res, N)
    assert fin.fallback == "index_repair" and [(s.from_idx, s.to_idx) for s in fin.segments] == [(1, 5), (6, 10)]
    b = format_reward_breakdown(lite(seg(1, 5), seg(1, 5), seg(6, 10)), N)
    assert b["indices_valid"] == pytest.approx(2 / 3) and b["valid"] == 0.0
    assert judgeable_segments(lite(seg(1, 5), seg(1, 5), seg(6, 10)), N) == [seg(1, 5), seg(6, 10)]


# ============================================================================ 9. the rubric's worked example
EXAMPLE = '{ "dimension1": [1.5, 1.0, 1.0, 1.0], "dimension2": [1.0, 1.5, 1.0, 1.0], "dimension3": [1.0, 1.0, 1.5, 1.0] }'
REAL = '{"dimension1": [4, 5, 3, 4], "dimension2": [4, 4, 4, 4], "dimension3": [3.5, 4, 5, 2]}'


def test_worked_example_is_read_from_the_template():
    assert rubric_worked_example() == ((1.5, 1.0, 1.0, 1.0), (1.0, 1.5, 1.0, 1.0), (1.0, 1.0, 1.5, 1.0))


@pytest.mark.parametrize("reply", [
    f"The rubric's example is {EXAMPLE}. For these four chunks: {REAL}",
    f"<think>Output like {EXAMPLE}</think>\n{REAL}",
    f"Following the format\n```json\n{EXAMPLE}\n```\nmy scores:\n```json\n{REAL}\n```",
])
def test_reply_repeating_the_worked_example_gets_its_own_scores(reply):
    assert parse_rubric_reply(reply, 4) == ([4.0, 5.0, 3.0, 4.0], [4.0] * 4, [3.5, 4.0, 5.0, 2.0])


def test_reply_that_only_repeats_the_worked_example_is_no_judgement():
    with pytest.raises(RubricParseError, match="worked example"):
        parse_rubric_reply(EXAMPLE, 4)
    be = ScriptedBackend(replies=[EXAMPLE, REAL])
    r = score_chunks_with_rubric(be, "p", "x", "{}", n_chunks=4, retries=1)
    assert r.attempts == 2 and r.event_validity == [4.0, 5.0, 3.0, 4.0] and "worked example" in r.errors[0]


def test_judge_takes_the_last_qualifying_object():
    first = '{"dimension1": [2], "dimension2": [2], "dimension3": [2]}'
    last = '{"dimension1": [4], "dimension2": [4], "dimension3": [4]}'
    assert parse_rubric_reply(f"Initially {first}. On reflection: {last}", 1) == ([4.0], [4.0], [4.0])


# ============================================================================ bounded cost
def test_reply_longer_than_its_budget_is_rejected_and_says_so():
    big = FINAL + " " * 5_000_000
    assert reply_char_limit(4096) == 4096 * MAX_CHARS_PER_TOKEN
    got = extract_json(big, max_new_tokens=4096)
    assert got.obj is None and got.reply.oversize and "exceeds" in got.error
    assert extract_json(FINAL + " " * 1000, max_new_tokens=4096).obj == json.loads(FINAL)
    assert format_reward_breakdown(big, N, max_new_tokens=4096)["total"] == 0.0
    with pytest.raises(RubricParseError, match="exceeds"):
        parse_rubric_reply(REAL + " " * 100_000, 4, max_new_tokens=100)


def test_oversize_stage_reply_is_recorded_cropped(tmp_path):
    book = make_book()
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    limit = reply_char_limit(cfg.stage_max_new_tokens("stage1"))
    huge = '{"step_1_events": "' + "e" * (2 * limit) + '"}'
    replies = {1: huge, 2: '{"step_2_threads": "t"}', 3: stage3(seg(1, 6))}
    (r,) = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=lambda c: replies[stage_of(c)]),
                          cfg, annotations_path=tmp_path / "a.jsonl", progress=False).records
    att = r["stages"]["stage1"]["attempts"][0]
    assert att["oversize"] and not att["valid"] and "exceeds" in att["errors"][0]
    assert len(att["text"]) < limit + 100 and "cropped" in att["text"]
    assert r["stages"]["stage1"]["fallback"] == "empty"  # an oversize reply is not passed on


@pytest.mark.timeout(120)
def test_pathological_replies_parse_in_linear_time():
    """Inputs that took the old parsers hours (quadratic); each now takes well under a few seconds
    (see benchmarks/bench_replies.py). The timeout is a hang guard, not a speed target."""
    mb = 1_000_000
    shapes = ["`" * 5 * mb, "```\n" * (mb // 4), '"d1:["' * (mb // 6), "{" * mb, '{"a": [' * (mb // 7),
              "<think>" * (mb // 7), "d1" + " " * mb + ":", "Answer" + " " * mb, "verdict" + " " * mb + "x",
              "- " + " " * mb]
    for s in shapes:
        assert parse_json_reply(s) is None
        with pytest.raises(RubricParseError):
            parse_rubric_reply(s, 1)
        format_reward_breakdown(s, N)
        parse_answer(s), parse_verdict(s), parse_propositions(s)
    # coverage repair: 104k segments with 1,000 gaps
    n, segs = 0, []
    for g in range(1000):
        for _ in range(104):
            segs.append(Segment("", n + 1, n + 1))
            n += 1
        n += 1  # a gap of one sentence
    out, added = repair_coverage(segs, n)
    assert len(added) == 1000 and out[-1].to_idx == n


def test_read_reply_reports_what_it_did():
    r = read_reply("<think>x</think>\ud83d{}")
    assert r.answer == "\ufffd{}" and r.reasoning_blocks == 1 and r.surrogates == 1 and len(r.notes) == 2
    assert read_reply(None).answer == "" and read_reply(123).notes == ("reply is int, not text",)
