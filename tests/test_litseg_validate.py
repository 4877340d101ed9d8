"""LitSeg validation, repair and reconstruction: unit tests and hypothesis property tests."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import conftest
from litseg_nb.litseg.pipeline import reconstruct_unit
from litseg_nb.litseg.validate import (Segment, finalize_segments, parse_json_reply, repair_coverage,
                                       sanitize_segments, validate_segments, validate_stage1,
                                       validate_stage2)
from litseg_nb.core.schema import Book, Unit, check_coverage


def make_unit(n: int) -> tuple[Book, Unit]:
    book = conftest.make_book("b", 1, n, sentence=lambda i, u, b: f"S{i} says {'x' * (i % 3)}.", title="Book",
                              unit_title="Chapter", unit_sep="")
    return book, book.units[0]


def seg_json(lo, hi, ctx=(), sub="t"):
    return {"subtitle": sub, "from_idx": lo, "to_idx": hi, "context_idx": list(ctx)}


def reply(*segs, **extra):
    return json.dumps({"chapter_title": "c", "step_3_turning_points": [], "segments": list(segs), **extra})


# ------------------------------------------------------------------------------ parse_json_reply
def test_parse_plain_fenced_and_prose():
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('Here you go:\n```json\n{"a": {"b": [1, 2]}}\n```\nThanks!') == {"a": {"b": [1, 2]}}
    assert parse_json_reply('blah {"a": 1} trailing } text') == {"a": 1}
    assert parse_json_reply('prose {not json} then {"ok": true}') == {"ok": True}


def test_parse_rejects_truncated_and_non_objects():
    assert parse_json_reply('{"segments": [{"from_idx": 1, "to_idx"') is None
    assert parse_json_reply("[1, 2, 3]") is None
    assert parse_json_reply("") is None
    assert parse_json_reply(None) is None  # type: ignore[arg-type]


def test_stage12_schema():
    assert validate_stage1({"step_1_events": "x"}) == []
    assert validate_stage1({"step_1_events": ["x"]})
    assert validate_stage1({"other": "x"}) == ["missing key 'step_1_events'"]
    assert validate_stage2({"step_2_threads": "t"}) == []
    assert validate_stage2({"step_2_threads": "  "}) == ["'step_2_threads' is empty"]


# ----------------------------------------------------------------------------- validate_segments
def test_valid_output():
    obj = json.loads(reply(seg_json(1, 4, [6]), seg_json(4, 8)))
    res = validate_segments(obj, 8)
    assert res.ok and res.errors == [] and res.segments[0] == Segment("t", 1, 4, (6,))


def test_semantic_errors_are_named():
    cases = {
        "outside 1..8": [seg_json(1, 9)],
        "not 1": [seg_json(2, 8)],
        "not 8": [seg_json(1, 7)],
        "from_idx 5 > to_idx 3": [seg_json(1, 8), seg_json(5, 3)],
        "in no main range: 4-5": [seg_json(1, 3), seg_json(6, 8)],
        "only in context_idx: 4": [seg_json(1, 3, [4]), seg_json(5, 8)],
        "not in source order": [seg_json(5, 8), seg_json(1, 4)],
        "is not an integer": [seg_json(1, "four"), seg_json(4, 8)],
        "not a JSON integer": [seg_json(1, "8")],
        "no segments": [],
    }
    for needle, segs in cases.items():
        res = validate_segments(json.loads(reply(*segs)), 8)
        assert res.syntax_ok and not res.semantic_ok, needle
        assert any(needle in e for e in res.errors), (needle, res.errors)


def test_syntax_errors():
    res = validate_segments({"segments": [{"from_idx": 1, "to_idx": 5}]}, 5)
    assert not res.syntax_ok and "missing subtitle" in res.errors[0]
    assert "missing key 'chapter_title'" in res.warnings
    assert not validate_segments(None, 5).syntax_ok
    assert not validate_segments({"segments": "x"}, 5).syntax_ok


# ------------------------------------------------------------------------------------ repair
def test_repair_left_adjacent_and_right_at_start():
    segs, rep = repair_coverage([Segment("a", 3, 4), Segment("b", 7, 8)], 10)
    assert rep == [1, 2, 5, 6, 9, 10]
    # 1-2: no segment to the left → right-adjacent "a"; 5-6 → left-adjacent "a"; 9-10 → "b"
    assert [(s.from_idx, s.to_idx) for s in segs] == [(1, 6), (7, 10)]


def test_repair_picks_last_segment_ending_before_gap_and_drops_absorbed_context():
    segs, rep = repair_coverage([Segment("a", 1, 4), Segment("b", 2, 4, (6, 9)), Segment("c", 7, 9)], 9)
    assert rep == [5, 6]
    assert segs == [Segment("a", 1, 4), Segment("b", 2, 6, (9,)), Segment("c", 7, 9)]


def test_finalize_types():
    ok = validate_segments(json.loads(reply(seg_json(1, 5))), 5)
    assert finalize_segments(ok, 5).fallback == "none"
    gap = validate_segments(json.loads(reply(seg_json(1, 2), seg_json(4, 5))), 5)
    fin = finalize_segments(gap, 5)
    assert fin.fallback == "coverage_repair" and fin.repaired_indices == [3]
    rev = validate_segments(json.loads(reply(seg_json(5, 1))), 5)
    fin = finalize_segments(rev, 5)
    assert fin.fallback == "index_repair" and fin.segments == [Segment("t", 1, 5)]
    bad = validate_segments(parse_json_reply("no json here"), 5)
    fin = finalize_segments(bad, 5)
    assert fin.fallback == "whole_unit" and fin.segments == [Segment("", 1, 5)]
    far = validate_segments(json.loads(reply(seg_json(10, 20))), 5)
    assert finalize_segments(far, 5).fallback == "whole_unit"
    assert finalize_segments(None, 3).segments == [Segment("", 1, 3)]


def test_sanitize_clamps_and_cleans_context():
    segs, actions = sanitize_segments([Segment("a", 0, 3, (2, 2, 9, 5, 5)), Segment("b", 4, 12)], 8)
    assert segs == [Segment("a", 1, 3, (5,)), Segment("b", 4, 8)]
    assert actions


# ------------------------------------------------------------------------------ properties
idx = st.one_of(st.integers(-5, 40), st.text(max_size=3), st.none(), st.floats(allow_nan=True),
                st.booleans(), st.just("7"))
segment_obj = st.fixed_dictionaries(
    {"subtitle": st.one_of(st.text(max_size=5), st.none(), st.integers())},
    optional={"from_idx": idx, "to_idx": idx,
              "context_idx": st.one_of(st.lists(idx, max_size=5), st.none(), st.text(max_size=3))},
)
replies = st.one_of(
    st.text(max_size=200),
    st.builds(lambda segs: reply(*segs), st.lists(segment_obj, max_size=8)),
    st.builds(lambda segs, cut: reply(*segs)[:cut], st.lists(segment_obj, max_size=8), st.integers(0, 400)),
    st.builds(lambda segs: "```json\n" + reply(*segs) + "\n```", st.lists(segment_obj, max_size=8)),
    st.builds(lambda x: json.dumps(x), st.recursive(st.none() | st.integers() | st.text(max_size=4),
                                                    lambda c: st.lists(c, max_size=3)
                                                    | st.dictionaries(st.text(max_size=4), c, max_size=3))),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=replies, n=st.integers(1, 30))
def test_any_reply_ends_in_full_coverage_and_deterministic_reconstruction(text, n):
    obj = parse_json_reply(text)
    res = validate_segments(obj, n)
    assert res.ok == (not res.errors)
    fin = finalize_segments(res, n)
    book, unit = make_unit(n)
    chunks = reconstruct_unit(book, unit, fin.segments)
    rep = check_coverage(unit, chunks)
    assert rep.ok, (text, fin)
    for s in fin.segments:
        assert 1 <= s.from_idx <= s.to_idx <= n
        assert all(1 <= c <= n and not s.from_idx <= c <= s.to_idx for c in s.context_idx)
    if res.ok:
        assert fin.fallback == "none" and fin.segments == res.segments
    # determinism: the same reply gives the same chunks
    again = reconstruct_unit(book, unit, finalize_segments(validate_segments(parse_json_reply(text), n), n).segments)
    assert [c.to_json() for c in again] == [c.to_json() for c in chunks]
    for c in chunks:
        assert c.main_text == book.text[c.metadata["main_span"][0]:c.metadata["main_span"][1]]
        assert c.main_text in c.text


ranges = st.lists(st.tuples(st.integers(-3, 25), st.integers(-3, 25),
                            st.lists(st.integers(-3, 25), max_size=4)), max_size=8)


@settings(max_examples=400, deadline=None)
@given(rs=ranges, n=st.integers(1, 20))
def test_random_ranges_repair(rs, n):
    obj = {"segments": [seg_json(a, b, c) for a, b, c in rs]}
    res = validate_segments(obj, n)
    fin = finalize_segments(res, n)
    covered = set()
    for s in fin.segments:
        covered.update(range(s.from_idx, s.to_idx + 1))
    assert covered == set(range(1, n + 1))
    # repair only adds: every original in-range, well-ordered range stays inside its repaired segment
    if "index_repair" not in fin.fallback_types and fin.fallback != "whole_unit":
        for a, b, _ in rs:
            assert any(s.from_idx <= a and b <= s.to_idx for s in fin.segments)
    # the repaired sentences are exactly the ones no (sanitised) main range covered
    sane, _ = sanitize_segments(res.segments, n) if res.segments else ([], [])
    if sane and not res.ok:
        before = set()
        for s in sane:
            before.update(range(s.from_idx, s.to_idx + 1))
        assert set(fin.repaired_indices) == set(range(1, n + 1)) - before


def test_reconstruction_places_context_by_position():
    book, unit = make_unit(8)
    (chunk,) = reconstruct_unit(book, unit, [Segment("Title", 4, 5, (7, 1, 2))])
    lines = chunk.text.split("\n")
    assert lines[0] == "Title"
    assert lines[1] == unit.sentence_text(book.text, 1) + " " + unit.sentence_text(book.text, 2)
    assert lines[2] == chunk.main_text
    assert lines[3] == unit.sentence_text(book.text, 7)
    s = unit.sentences
    assert chunk.spans == [(s[0].start, s[1].end), (s[3].start, s[4].end), (s[6].start, s[6].end)]
    assert chunk.context_idx == [1, 2, 7] and chunk.subtitle == "Title"


def test_parse_truncated_outer_object_does_not_yield_inner_fragment():
    # constrained decoding cut off by max_new_tokens: the complete inner segment is NOT the reply
    text = ('{"chapter_title": "t", "segments": [{"context_idx": [1], "from_idx": 1, "subtitle": "a", '
            '"to_idx": 19}, {"context_idx": [2], "from_idx": 2, "subtit')
    assert parse_json_reply(text) is None
    assert parse_json_reply('He said "{no}" and {"a": "}{"} end') == {"a": "}{"}
    assert parse_json_reply('a list [ of "things: {"a": [1, {"b": 2}]} ok') == {"a": [1, {"b": 2}]}


def test_one_per_segment_definition_and_linear_coverage_helpers():
    from litseg_nb.litseg.validate import coverage_mask

    r = validate_segments({"segments": [seg_json(1, 5), seg_json(1, 5), seg_json(2, 3), "x", seg_json("2", 9, [None]),
                       {"subtitle": 1, "from_idx": 6, "to_idx": 9, "context_idx": "3"}]}, 9)
    assert r.item_ok == [True, False, False, False, False, False]
    assert r.schema_fixes == ["segment 4: skipped (not an object)", "segment 6: subtitle 1 read as text",
                              "segment 6: context_idx '3' ignored (not a list)"]
    assert r.index_fixes == ["segment 5: from_idx '2' read as 2", "segment 5: dropped context index None (not an integer)"]
    assert any("duplicates the range of segment 1" in e for e in r.errors)
    assert "segment 3: range 2-3 lies inside segment 5 (2-9)" in r.errors
    assert coverage_mask([Segment("", 2, 3), Segment("", 0, 1), Segment("", 9, 20)], 10)[1:11] == \
        [True, True, True, False, False, False, False, False, True, True]
