"""Fuzz test (hypothesis) over every reply parser: LitSeg stages, LitSeg-Lite rewards, the rubric
judge, the LLM baselines' and pairwise judge's parsers.

Asserted for every generated reply: no exception escapes (the rubric parser raises only its own
:class:`RubricParseError`); the fallback chain always ends in full coverage; a valid reply is
accepted unchanged, whatever reasoning block, fence or prose surrounds it; LitSeg's validator,
Lite's format reward, the segments Lite's judge reward scores and the LitSeg annotation record
agree on validity; every fallback names the repair it made. About 5,300 examples in CI (tens of
seconds); ``LITSEG_FUZZ_SCALE=10`` (see ``benchmarks/bench_replies.py``) runs ten times as many.
Time linear in reply size is measured by the benchmark, not asserted here.
"""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import conftest
from litseg_nb.chunkers.llm_chunkers import parse_answer
from litseg_nb.llm.replies import list_items as parse_propositions
from litseg_nb.lite.train import format_reward_breakdown, judgeable_segments
from litseg_nb.lite.segmenter import validate_single_pass
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, read_annotations
from litseg_nb.litseg.pipeline import reconstruct_unit
from litseg_nb.litseg.validate import (finalize_segments, segmentation_object, validate_segments,
                                       validate_stage1, validate_stage2)
from fakes import ScriptedBackend
from litseg_nb.metrics.pairwise import parse_verdict
from litseg_nb.litseg.rubric_judge import RubricParseError, parse_rubric_reply, rubric_worked_example
from litseg_nb.llm.replies import extract_json, parse_json_reply, read_reply
from litseg_nb.core.schema import Book, Unit, check_coverage

SCALE = float(os.environ.get("LITSEG_FUZZ_SCALE", "1"))


def fuzz(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# ----------------------------------------------------------------------------- generators
# Strategies draw from fixed pools of fragments (cheap to generate, so ~5,000 examples fit in CI
# time) chosen for what breaks parsers: JSON punctuation, fences, reasoning tags, surrogate escapes,
# Unicode digits, line separators, drafts of the answer.
NASTY = ["{", "}", "[", "]", '"', "\\", "```", "```json\n", "\n", "<think>", "</think>", "\\ud83d",
         "\ud83d", "²", "①", "--1", ",", ":", "null", "1e309", "'", "Answer: ID 3", "Verdict: A", "- x",
         "\x85", "\u2028", " ", "abc", "{\"a\": 1}", '{"segments": [', '"d1": [4', "{'x': 2,}"]
PROSE = ["Here is the JSON:", "Sure!", "Done.", " ", "\n", "Emma \u2014 ", "r\u00e9sum\u00e9", "[1]", "(a)",
         "x: y", '"quoted"', "\u201csmart\u201d", "\x85", "\u2028", "\u00b2", "Step 3", "\t"]
DRAFTS = ['{"segments": [{"subtitle": "d", "from_idx": 1, "to_idx": 2}]}', '{"step_1_events": "..."}',
          '{"subtitle": "x", "from_idx": 1, "to_idx": 9}', "{1, 2, 3", "```json", "``` c",
          '{"dimension1": [1.5, 1.0, 1.0, 1.0], "dimension2": [1.0, 1.5, 1.0, 1.0], "dimension3": [1.0, 1.0, 1.5, 1.0]}']
nasty_text = st.lists(st.sampled_from(NASTY + PROSE), max_size=12).map("".join)
# prose that cannot hold a JSON object, a fence or a reasoning tag
prose = st.lists(st.sampled_from(PROSE), max_size=6).map("".join)
# reasoning: anything but a reasoning tag (braces, drafts, backticks, quotes welcome)
reasoning = st.lists(st.sampled_from([x for x in NASTY if "think>" not in x] + PROSE + DRAFTS),
                     max_size=8).map("".join).map(lambda t: t.replace("\ud83d", "?"))
# strings of a valid reply: anything but lone surrogates (which the reader replaces, changing the value)
safe_str = st.sampled_from(["", "A", "Emma\u2019s choice", "a```", "```c", "x ``` y", "<think>", "</think>",
                            "}{", '"', "\n```json\n", "\u00b2", "\U0001F600", "\x85", "\u2028", "\\", "[1]",
                            "{\"a\": 1}", "\u0000", "\u0661\u0662"])
BAD_VALUES = ["²", "①", "--1", "1" * 4300, None, True, -5, 0, 10 ** 30, 2.0, 2.5, "7", [], {}, "", float("nan")]


@st.composite
def valid_segmentation(draw, n: int | None = None):
    n = n or draw(st.integers(1, 40))
    cuts = sorted(set(draw(st.lists(st.integers(2, n), max_size=8)))) if n > 1 else []
    starts = [1] + cuts
    ends = [c - 1 for c in cuts] + [n]
    segs = []
    for k, (a, b) in enumerate(zip(starts, ends)):
        if k and a < b and a - 1 > starts[k - 1] and draw(st.booleans()):
            a -= 1  # a shared boundary sentence (overlap is allowed; nesting is not)
        ctx = sorted({c for c in draw(st.lists(st.integers(1, n), max_size=3)) if not a <= c <= b})
        seg = {"subtitle": draw(safe_str), "from_idx": a, "to_idx": b}
        form = ("list", "list", "null", "absent")[draw(st.integers(0, 3))]
        if form == "list":
            seg["context_idx"] = ctx
        elif form == "null":
            seg["context_idx"] = None
        segs.append(seg)
    return n, segs


def stage3_obj(segs, draw_title="c"):
    return {"chapter_title": draw_title, "step_3_turning_points": [{"type": "t", "description": "d"}],
            "segments": segs}


def lite_obj(segs):
    return {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": stage3_obj(segs)}


@st.composite
def wrapped(draw, obj):
    """``obj`` serialised and wrapped the ways a model may wrap a valid answer."""
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, None, 2])))
    kind = draw(st.sampled_from(["bare", "fence", "prose", "think", "template_think", "think_fence",
                                 "think_inline", "template_inline"]))
    if kind == "fence":
        text = f"{draw(prose)}\n```{draw(st.sampled_from(['', 'json', 'JSON']))}\n{text}\n```\n{draw(prose)}"
    elif kind == "prose":
        text = f"{draw(prose)}\n{text}\n{draw(prose)}"
    elif kind == "think":
        text = f"<think>{draw(reasoning)}</think>\n{draw(prose)}\n{text}"
    elif kind == "template_think":
        text = f"{draw(reasoning)}</think>\n\n{text}"
    elif kind == "think_fence":
        text = f"<think>{draw(reasoning)}</think>\n```json\n{text}\n```"
    elif kind == "think_inline":  # how the openai backend rebuilds server-side reasoning
        text = f"<think>{draw(reasoning)}</think>{text}"
    elif kind == "template_inline":
        text = f"{draw(reasoning)}</think>{text}"
    return text


@st.composite
def valid_reply(draw):
    n, segs = draw(valid_segmentation())
    form = draw(st.sampled_from(["stage3", "lite"]))
    obj = stage3_obj(segs) if form == "stage3" else lite_obj(segs)
    return n, obj, draw(wrapped(obj)), form


@st.composite
def any_reply(draw):
    """A valid reply mutated the ways replies break: cut, spliced, bad values, duplicates, wrappers."""
    n, obj, text, _ = draw(valid_reply())
    segs = segmentation_object(obj)["segments"]
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["bad_value", "duplicate", "nest", "swap", "drop", "shift", "extra_key"]))
        if op == "bad_value" and segs:
            s = draw(st.sampled_from(segs))
            key = draw(st.sampled_from(["from_idx", "to_idx", "context_idx", "subtitle"]))
            val = draw(st.sampled_from(BAD_VALUES))
            s[key] = [val] if key == "context_idx" and draw(st.booleans()) else val
        elif op == "duplicate" and segs:
            segs.insert(draw(st.integers(0, len(segs))), dict(draw(st.sampled_from(segs))))
        elif op == "nest" and segs:
            s = draw(st.sampled_from(segs))
            a = draw(st.integers(-2, n + 2))
            segs.append({"subtitle": "n", "from_idx": a, "to_idx": a + draw(st.integers(-1, 3))})
        elif op == "swap" and len(segs) > 1:
            i, j = draw(st.integers(0, len(segs) - 1)), draw(st.integers(0, len(segs) - 1))
            segs[i], segs[j] = segs[j], segs[i]
        elif op == "drop" and segs:
            segs.pop(draw(st.integers(0, len(segs) - 1)))
        elif op == "shift" and segs:
            s = draw(st.sampled_from(segs))
            if isinstance(s.get("to_idx"), int) and not isinstance(s["to_idx"], bool):
                s["to_idx"] += draw(st.integers(-3, 3))
        elif op == "extra_key" and segs:
            draw(st.sampled_from(segs)).pop(draw(st.sampled_from(["subtitle", "from_idx", "to_idx"])), None)
    try:
        text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    except ValueError:  # a 4,300-digit int cannot be written: keep the unmutated text
        pass
    text = draw(wrapped_text(text))
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["cut", "splice", "literal", "unclosed_think", "deep", "garbage"]))
        if op == "cut":
            text = text[:draw(st.integers(0, len(text)))]
        elif op == "splice":
            i = draw(st.integers(0, len(text)))
            text = text[:i] + draw(nasty_text) + text[i:]
        elif op == "literal":  # number literals json.dumps never writes
            text = text.replace('"to_idx": ', '"to_idx": ' + draw(st.sampled_from(["1e309", "-0", "1.0e1", "NaN ,"])), 1)
        elif op == "unclosed_think":
            text = "<think>" + draw(reasoning) + draw(st.sampled_from(["", text]))
        elif op == "deep":
            d = draw(st.integers(1, 1200))
            text = text.replace("[", "[" * d + "]" * d + ",", 1) if draw(st.booleans()) else "[" * d + text
        elif op == "garbage":
            text = draw(nasty_text)
    return n, text


@st.composite
def wrapped_text(draw, text):
    kind = draw(st.sampled_from(["bare", "fence", "prose", "think"]))
    if kind == "fence":
        return f"```json\n{text}\n```"
    if kind == "prose":
        return f"{draw(nasty_text)}\n{text}\n{draw(nasty_text)}"
    if kind == "think":
        return f"<think>{draw(reasoning)}</think>{text}"
    return text


# ----------------------------------------------------------------------------- checks
def make_unit(n: int) -> tuple[Book, Unit]:
    book = conftest.make_book("b", 1, n, sentence="S{i}.", title="Book", unit_title="Chapter", unit_sep="")
    return book, book.units[0]


def check_reply(text: str, n: int) -> None:
    """Every parser on one reply: no exception, full coverage, agreement on validity, honest labels."""
    for budget in (None, 64, 4096):
        got = extract_json(text, max_new_tokens=budget)
        assert got.obj is None or isinstance(got.obj, dict)
        assert (got.obj is None) == (got.error is not None)
        if got.obj is not None:
            json.dumps(got.obj, ensure_ascii=False).encode("utf-8")  # writable: no lone surrogate
    obj = parse_json_reply(text)
    holder = segmentation_object(obj)
    res = validate_segments(holder, n)
    assert res.ok == (not res.errors)
    assert validate_single_pass(text, n).ok == res.ok
    validate_stage1(obj), validate_stage2(obj)
    fin = finalize_segments(res, n)
    # the fallback chain always ends in a full cover with valid ranges and context
    covered = set()
    for s in fin.segments:
        assert 1 <= s.from_idx <= s.to_idx <= n
        assert all(1 <= c <= n for c in s.context_idx)
        # context inside its own main range is valid (reconstruction ignores it; the rubric judge
        # penalises it), so only a repaired result is guaranteed to hold none
        assert res.ok or not any(s.from_idx <= c <= s.to_idx for c in s.context_idx)
        covered.update(range(s.from_idx, s.to_idx + 1))
    assert covered == set(range(1, n + 1))
    book, unit = make_unit(n)
    assert check_coverage(unit, reconstruct_unit(book, unit, fin.segments)).ok
    # every fallback names what it repaired; nothing is labelled without an action behind it
    if res.ok:
        assert fin.fallback == "none" and fin.segments == res.segments and not fin.actions
    else:
        assert fin.fallback != "none" and fin.actions
        assert not any("although validation failed" in a for a in fin.actions), (text, fin)
        if "coverage_repair" in fin.fallback_types:
            assert fin.repaired_indices
    json.dumps({"segments": [s.to_json() for s in fin.segments], "actions": fin.actions},  # as a record holds them
               ensure_ascii=False).encode("utf-8")
    # Lite's rewards agree with the validator
    b = format_reward_breakdown(text, n)
    assert all(0.0 <= b[k] <= 1.0 for k in b)
    assert b["valid"] == float(res.ok)
    judged = judgeable_segments(text, n)
    if res.ok:
        assert b["indices_valid"] == b["full_coverage"] == b["first_last"] == 1.0
        assert judged == [s.to_json() for s in res.segments]
    if isinstance(holder, dict) and isinstance(holder.get("segments"), list) and holder["segments"]:
        assert (b["indices_valid"] == 1.0) == (all(res.item_ok) and len(res.item_ok) == len(holder["segments"]))
    for s in judged:
        assert 1 <= s["from_idx"] <= s["to_idx"] <= n and all(1 <= c <= n for c in s["context_idx"])
    # the other parsers never raise
    for k in (1, 3):
        try:
            parse_rubric_reply(text, k)
        except RubricParseError:
            pass
    parse_answer(text), parse_verdict(text), parse_propositions(text), read_reply(text)


@fuzz(2000)
@given(case=any_reply())
def test_fuzz_any_reply(case):
    n, text = case
    check_reply(text, n)


@fuzz(700)
@given(text=nasty_text, n=st.integers(1, 30))
def test_fuzz_arbitrary_text(text, n):
    check_reply(text, n)


@fuzz(1200)
@given(case=valid_reply())
def test_fuzz_valid_replies_accepted_unchanged(case):
    n, obj, text, form = case
    assert parse_json_reply(text) == obj, text
    res = validate_segments(segmentation_object(parse_json_reply(text)), n)
    assert res.ok, (res.errors, text)
    fin = finalize_segments(res, n)
    segs = segmentation_object(obj)["segments"]
    assert fin.fallback == "none"
    assert [s.to_json() for s in fin.segments] == [
        {"subtitle": s["subtitle"], "from_idx": s["from_idx"], "to_idx": s["to_idx"],
         "context_idx": s.get("context_idx") or []} for s in segs]
    b = format_reward_breakdown(text, n)
    assert b["valid"] == 1.0
    if form == "lite":
        assert b["total"] == pytest.approx(1.0)
    assert judgeable_segments(text, n) == [s.to_json() for s in fin.segments]
    check_reply(text, n)


# ----------------------------------------------------------------------------- judge
def score_lists(k: int, lo: float, hi: float):
    return st.lists(st.integers(int(lo * 2), int(hi * 2)).map(lambda v: v / 2), min_size=k, max_size=k)


@st.composite
def judge_reply(draw):
    k = draw(st.integers(1, 8))
    dims = [draw(score_lists(k, 1, 5)), draw(score_lists(k, 1, 5)), draw(score_lists(k, 0.5, 5.5))]
    keys = draw(st.sampled_from([("dimension1", "dimension2", "dimension3"), ("Dimension 1", "dim_2", "d3"),
                                 ("event_validity", "unity_of_action", "cut_point_logic")]))
    obj = dict(zip(keys, dims))
    return k, dims, draw(wrapped(obj))


@fuzz(1000)
@given(case=judge_reply())
def test_fuzz_judge_reads_valid_scores(case):
    k, dims, text = case
    if tuple(tuple(d) for d in dims) == rubric_worked_example():
        with pytest.raises(RubricParseError):
            parse_rubric_reply(text, k)
        return
    assert list(parse_rubric_reply(text, k)) == dims, text


# ----------------------------------------------------------------------------- pipeline records
@fuzz(200)
@given(case=any_reply())
def test_fuzz_annotation_records_agree_with_the_validator(case, tmp_path_factory):
    n, text = case
    n = min(n, 12)
    book = make_unit(n)[0]
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    budget = cfg.stage_max_new_tokens("stage3")

    def reply(conv):
        user = conv[-1]["content"]
        if "ONLY Step 1" in user:
            return '{"step_1_events": "e"}'
        if "ONLY Step 2" in user:
            return '{"step_2_threads": "t"}'
        return text

    path = tmp_path_factory.mktemp("fuzz") / "a.jsonl"
    (r,) = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=reply), cfg,
                          annotations_path=path, progress=False).records
    res = validate_segments(extract_json(text, max_new_tokens=budget).obj, n)
    att = r["stages"]["stage3"]["attempts"][0]
    assert att["valid"] == res.ok
    fin = finalize_segments(res, n)
    assert r["fallback"] == fin.fallback and r["segments"] == [s.to_json() for s in fin.segments]
    assert read_annotations(path)[0]["segments"] == r["segments"]  # the record was written (UTF-8)
