"""LitSeg-Lite training data: reformatting round trip, fallback exclusion (held-out rules: test_lite_heldout.py)."""
from __future__ import annotations

import json

import pytest

import conftest
from litseg_nb.litseg.validate import validate_segments
from litseg_nb.lite.data import build_examples, lite_system_prompt, view_annotation
from litseg_nb.core.schema import Book, Unit


def make_book(book_id: str, n_units: int = 2, n_sent: int = 6) -> Book:
    return conftest.make_book(book_id, n_units, n_sent, title=f"Title {book_id}", unit_title="Chapter {n}",
                              dataset="gutenberg", unit_sep="")


def make_record(book: Book, unit: Unit, segments, fallback="none", stage_fallbacks=None) -> dict:
    s1 = {"step_1_events": f"events of {unit.unit_id}"}
    s2 = {"step_2_threads": f"threads of {unit.unit_id}"}
    return {
        "book_id": book.book_id, "unit_id": unit.unit_id, "n_sentences": unit.n_sentences,
        "unit_title": unit.title, "status": "done",
        "stages": {
            "stage1": {"attempts": [{"text": json.dumps(s1), "parsed": s1, "valid": True}]},
            "stage2": {"attempts": [{"text": "garbage", "parsed": None, "valid": False},
                                    {"text": json.dumps(s2), "parsed": s2, "valid": True}]},
            "stage3": {"attempts": []},
        },
        "segments": segments, "fallback": fallback, "fallback_types": [fallback],
        "stage_fallbacks": stage_fallbacks or {"stage1": "none", "stage2": "none"},
        "chapter_title": unit.title, "length_reference": 100,
        "turning_points": [{"type": "Opportunity", "description": "it starts"}],
        "first_try_valid": {"stage1": True, "stage2": False, "stage3": True},
    }


SEGS = [{"subtitle": "A", "from_idx": 1, "to_idx": 3, "context_idx": []},
        {"subtitle": "B \"quoted\"", "from_idx": 3, "to_idx": 6, "context_idx": [1]}]


def test_round_trip_targets_parse_back_into_their_segments():
    books = [make_book("gutenberg:1"), make_book("gutenberg:2")]
    recs = [make_record(b, u, SEGS) for b in books for u in b.units]
    examples, report = build_examples(recs, books)
    assert report.used == 4 and not report.excluded
    for ex, rec in zip(examples, recs):
        obj = json.loads(ex.target)
        assert set(obj) == {"step1", "step2", "step3"}
        assert set(obj["step3"]) == {"chapter_title", "step_3_turning_points", "segments"}
        assert obj["step1"]["step_1_events"] == f"events of {rec['unit_id']}"
        assert obj["step2"]["step_2_threads"] == f"threads of {rec['unit_id']}"  # last VALID attempt
        assert obj["step3"]["segments"] == rec["segments"]
        assert validate_segments(obj["step3"], ex.n_sentences).ok
        assert "The last segment must end with index 6." in ex.system
        assert ex.user.splitlines()[1].startswith("[1] Sentence 1 of unit")
        rec_sft = ex.sft_record()
        assert rec_sft["completion"][0]["content"] == ex.target
        assert [m["role"] for m in rec_sft["prompt"]] == ["system", "user"]


def test_fallback_units_are_excluded_and_counted():
    book = make_book("gutenberg:1", n_units=4)
    u = book.units
    recs = [make_record(book, u[0], SEGS),
            make_record(book, u[1], SEGS, fallback="coverage_repair"),
            make_record(book, u[2], SEGS, stage_fallbacks={"stage1": "raw_passthrough", "stage2": "none"}),
            make_record(book, u[3], SEGS, fallback="whole_unit")]
    examples, report = build_examples(recs, [book])
    assert [e.unit_id for e in examples] == ["u0000"]
    assert sum(report.excluded.values()) == 3
    assert report.excluded["LitSeg fallback (stage3 coverage_repair)"] == 1
    assert report.excluded["LitSeg fallback (stage1 raw_passthrough)"] == 1
    # CPU demo mode tops up with fallback units, labelled
    examples, report = build_examples(recs, [book], fallback_units="include_if_needed", min_units=2)
    assert len(examples) == 2 and report.included_fallback == 1
    assert examples[1].target_source.startswith("fallback:")
    assert any("NOT the paper" in r["outcome"] for r in report.as_rows())


def test_invalid_target_and_mismatch_are_excluded():
    book = make_book("gutenberg:1", n_units=2)
    gap = [{"subtitle": "A", "from_idx": 1, "to_idx": 2, "context_idx": []},
           {"subtitle": "B", "from_idx": 4, "to_idx": 6, "context_idx": []}]
    bad = make_record(book, book.units[1], SEGS)
    bad["n_sentences"] = 7
    _, report = build_examples([make_record(book, book.units[0], gap), bad], [book])
    assert report.used == 0
    assert report.excluded["target fails shared validator"] == 1
    assert report.excluded["sentence count differs from corpus"] == 1


def test_view_annotation_names_unit_on_missing_fields():
    with pytest.raises(ValueError, match="u0007"):
        view_annotation({"book_id": "b", "unit_id": "u0007", "n_sentences": 3})


def test_lite_prompt_is_the_verbatim_e2_text():
    import re
    from pathlib import Path

    seed = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "000_52d52c48502729e3.txt"
    if not seed.is_file():
        pytest.skip("paper text not available")
    line = seed.read_text(encoding="utf-8").split("\n")[224]
    assert line.startswith("⬇ # Role")
    from litseg_nb.core.prompts import load_prompt

    assert load_prompt("lite/system").replace("\n", " ") == line[2:]
    assert re.search(r"must end with index 9\.", lite_system_prompt(9))


def test_text_mismatch_and_overlong_examples_are_excluded():
    book = make_book("gutenberg:1", n_units=2)
    stale = make_record(book, book.units[0], SEGS)
    stale["chapter_content"] = "[1] something else"
    fresh = make_record(book, book.units[1], SEGS)
    fresh["chapter_content"] = book.units[1].indexed_text(book.text)
    examples, report = build_examples([stale, fresh], [book])
    assert [e.unit_id for e in examples] == ["u0001"]
    assert report.excluded["unit text differs from the annotated text"] == 1
    words = lambda t: len(t.split())  # noqa: E731
    examples, report = build_examples([fresh], [book], count_tokens=words, max_seq_tokens=50)
    assert not examples and sum(report.excluded.values()) == 1
    examples, _ = build_examples([fresh], [book], count_tokens=words, max_seq_tokens=100_000)
    assert examples[0].n_tokens > 1000  # the E.2 system prompt alone is long


def test_single_pass_validation_finds_segments_wherever_the_prompt_puts_them():
    import json

    from litseg_nb.lite.segmenter import validate_single_pass

    seg = {"subtitle": "s", "from_idx": 1, "to_idx": 3, "context_idx": []}
    for reply in ({"step1": {}, "step2": {}, "step3": {"chapter_title": "t", "segments": [seg]}},  # E.2
                  {"step1": {}, "step2": {"chapter_title": "t", "segments": [seg]}},  # E.4 w/o one stage
                  {"chapter_title": "t", "segments": [seg]}):  # E.4 generic prompt
        assert validate_single_pass(json.dumps(reply), 3).ok, reply
    assert not validate_single_pass(json.dumps({"step2": {"segments": [seg]}}), 4).ok  # gap at 4
