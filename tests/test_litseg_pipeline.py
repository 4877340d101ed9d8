"""LitSeg pipeline with a scripted backend: batching, retries, fallbacks, faults, resume."""
from __future__ import annotations

import json
import re

import pytest

from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, read_annotations, records_to_chunks
from litseg_nb.llm.base import LLMError
from fakes import ScriptedBackend
from litseg_nb.core.schema import Unit

from conftest import make_book  # the suite's one Book factory (re-exported for other tests)


def stage_of(conv) -> int:
    user = conv[-1]["content"]
    for k in (1, 2, 3):
        if f"ONLY Step {k}" in user:
            return k
    raise AssertionError(user[:80])


def good(conv) -> str:
    k = stage_of(conv)
    if k == 1:
        return '{"step_1_events": "events"}'
    if k == 2:
        return '```json\n{"step_2_threads": "threads"}\n```'
    n = int(re.search(r"Last segment must end with index (\d+)\.", conv[-1]["content"]).group(1))
    return json.dumps({"chapter_title": "t", "step_3_turning_points": [{"type": "x", "description": "y"}],
                       "segments": [{"subtitle": "A", "from_idx": 1, "to_idx": 3, "context_idx": [5]},
                                    {"subtitle": "B", "from_idx": 3, "to_idx": n, "context_idx": []}]})


@pytest.fixture
def cfg():
    return LitSegConfig.for_profile("test", max_retries=2)


def items(*books):
    return [(b, u) for b in books for u in b.units]


def test_happy_path_batched_across_units(cfg, tmp_path):
    b1, b2 = make_book("b1"), make_book("b2", units=2)
    be = ScriptedBackend(reply_fn=good)
    run = annotate_units(items(b1, b2), be, cfg, annotations_path=tmp_path / "a.jsonl", progress=False)
    # one chat call per stage and book (all units of a book batched), no retries
    assert run.llm_calls == 3 * 2 and len(be.calls) == 3 * 5
    # stages run stage by stage across units: first 5 stage-1 prompts, then stage 2, then stage 3
    assert [stage_of(c) for c in be.calls] == [1] * 5 + [2] * 5 + [3] * 5
    for r in run.records:
        assert r["status"] == "done" and r["fallback"] == "none" and r["retries"] == 0
        assert r["first_try_valid"] == {"stage1": True, "stage2": True, "stage3": True}
        assert r["stages"]["stage1"]["passed_on"] == '{"step_1_events": "events"}'
        assert set(r["raw_outputs"]) == {"stage1", "stage2", "stage3"}
        assert r["tokens"]["calls"] == 3 and r["tokens"]["prompt"] > 0
        assert r["segments"][1] == {"subtitle": "B", "from_idx": 3, "to_idx": 6, "context_idx": []}
    # stage 2 and 3 prompts carry the previous stages' results
    s3 = [c for c in be.calls if stage_of(c) == 3][0][-1]["content"]
    assert '{"step_1_events": "events"}' in s3 and '{"step_2_threads": "threads"}' in s3
    assert "Last segment must end with index 6." in s3
    assert "[1] Sentence 1 of unit 0 in b1." in s3
    chunks = records_to_chunks([b1, b2], run.records)
    assert len(chunks) == 10 and chunks[0].context_idx == [5] and chunks[0].subtitle == "A"
    assert [r["unit_id"] for r in read_annotations(tmp_path / "a.jsonl")] == ["u0000", "u0001", "u0002"] * 1 + ["u0000", "u0001"]


def test_retries_then_coverage_repair_and_stage_passthrough(cfg):
    b = make_book(units=1)
    seen = {"s3": 0}

    def reply(conv):
        k = stage_of(conv)
        if k == 1:
            return "events without json"  # never valid → raw passthrough
        if k == 2:
            return '{"step_2_threads": "t"}'
        seen["s3"] += 1
        return json.dumps({"segments": [{"subtitle": "A", "from_idx": 1, "to_idx": 2},
                                        {"subtitle": "B", "from_idx": 5, "to_idx": 6}]})

    be = ScriptedBackend(reply_fn=reply)
    (r,) = annotate_units(items(b), be, cfg, progress=False).records
    assert seen["s3"] == 3  # 1 try + max_retries=2
    assert r["stages"]["stage1"]["fallback"] == "raw_passthrough"
    assert r["stages"]["stage1"]["passed_on"] == "events without json"
    assert "events without json" in [c for c in be.calls if stage_of(c) == 2][0][-1]["content"]
    assert r["fallback"] == "coverage_repair" and r["repaired_indices"] == [3, 4]
    assert [(s["from_idx"], s["to_idx"]) for s in r["segments"]] == [(1, 4), (5, 6)]
    assert r["retries"] == 2 + 2 and r["first_try_valid"]["stage3"] is False
    # retries sample with a different seed
    seeds = [a["seed"] for a in r["stages"]["stage3"]["attempts"]]
    temps = [a["temperature"] for a in r["stages"]["stage3"]["attempts"]]
    assert seeds == [0, 1, 2] and temps[0] == 0.0 and temps[1] > 0


def test_retry_succeeds(cfg):
    b = make_book(units=1)
    state = {"n": 0}

    def reply(conv):
        if stage_of(conv) == 3:
            state["n"] += 1
            if state["n"] == 1:
                return '{"segments": [{"subtitle": "A", "from_idx": 1, "to_idx": '  # truncated
        return good(conv)

    (r,) = annotate_units(items(b), ScriptedBackend(reply_fn=reply), cfg, progress=False).records
    assert r["fallback"] == "none" and r["stages"]["stage3"]["retries"] == 1
    assert r["stages"]["stage3"]["attempts"][0]["errors"] == ["reply is not parsable JSON"]


def test_malformed_json_ends_in_whole_unit(cfg):
    b = make_book(units=2)
    be = ScriptedBackend(reply_fn=lambda conv: "I cannot do that {" if stage_of(conv) == 3 else good(conv))
    run = annotate_units(items(b), be, cfg, progress=False)
    for r in run.records:
        assert r["fallback"] == "whole_unit" and r["segments"] == [
            {"subtitle": "", "from_idx": 1, "to_idx": 6, "context_idx": []}]
        assert len(r["stages"]["stage3"]["attempts"]) == 3
    assert run.llm_calls == 1 + 1 + 3  # stage 3 retried as one batch per attempt
    chunks = records_to_chunks([b], run.records)
    assert [c.main_text for c in chunks] == [u.text(b.text) for u in b.units]


def test_backend_errors_stop_the_run_and_are_not_marked_done(cfg, tmp_path):
    # a backend error is no reply: it used to become 9 failed "attempts" and the whole-unit
    # fallback (status backend_error); now it propagates at once and nothing is recorded as done
    b = make_book(units=2)
    calls = {"n": 0}

    def reply(conv):
        calls["n"] += 1
        raise LLMError("server returned 503 after 3 retries")

    path = tmp_path / "a.jsonl"
    with pytest.raises(LLMError, match="503"):
        annotate_units(items(b), ScriptedBackend(reply_fn=reply), cfg, annotations_path=path, progress=False)
    assert calls["n"] == 1
    assert not path.exists() or read_annotations(path) == []
    # a rerun with a working backend does those units
    be = ScriptedBackend(reply_fn=good)
    run2 = annotate_units(items(b), be, cfg, annotations_path=path, progress=False)
    assert run2.resumed == 0 and all(r["status"] == "done" and r["fallback"] == "none" for r in run2.records)


def test_interrupted_run_resumes_without_repeating_calls(tmp_path):
    cfg = LitSegConfig.for_profile("test", max_retries=1, unit_group_size=2)
    b1, b2 = make_book("b1", units=3), make_book("b2", units=2)
    all_items = items(b1, b2)

    def flaky(conv):  # unit u0001 needs a retry in stage 3 (first attempt truncated)
        if stage_of(conv) == 3 and "unit 1 in b1" in conv[-1]["content"] and flaky.first:
            flaky.first = False
            return '{"segments": ['
        return good(conv)

    flaky.first = True
    ref = annotate_units(all_items, ScriptedBackend(reply_fn=flaky), cfg,
                         annotations_path=tmp_path / "ref.jsonl", progress=False)

    class Interrupt(Exception):
        pass

    path = tmp_path / "a.jsonl"
    count = {"n": 0}

    def dying(conv):
        count["n"] += 1
        if count["n"] > 9:  # group 1 (u0000, u0001 of b1: 2x3 prompts + 1 retry) finishes, then we die
            raise Interrupt()
        return flaky(conv)

    flaky.first = True
    with pytest.raises(Interrupt):
        annotate_units(all_items, ScriptedBackend(reply_fn=dying), cfg, annotations_path=path, progress=False)
    partial = read_annotations(path)
    assert [r["unit_id"] for r in partial] == ["u0000", "u0001"]
    with path.open("a") as fh:  # a crash in the middle of writing a record
        fh.write('{"key": "trunc')
    be = ScriptedBackend(reply_fn=flaky)
    run = annotate_units(all_items, be, cfg, annotations_path=path, progress=False)
    assert run.resumed == 2
    asked = {c[-1]["content"].split("[1] ")[1].split(".")[0] for c in be.calls}
    assert "Sentence 1 of unit 0 in b1" not in asked and "Sentence 1 of unit 1 in b1" not in asked
    assert len(be.calls) == 3 * 3  # only the three remaining units, no retries needed
    drop = ("latency_s", "group_wall_share_s")
    norm = lambda recs: json.loads(json.dumps(recs, sort_keys=True), object_hook=lambda d: {  # noqa: E731
        k: v for k, v in d.items() if k not in drop})
    assert norm(run.records) == norm(ref.records)
    assert norm(read_annotations(path)) == norm(ref.records)
    # a third run makes no call at all
    be3 = ScriptedBackend(reply_fn=good)
    run3 = annotate_units(all_items, be3, cfg, annotations_path=path, progress=False)
    assert be3.calls == [] and run3.resumed == 5


def test_structured_output_passes_schema(cfg):
    seen = []

    class Spy(ScriptedBackend):
        def chat(self, conversations, params=None, tag=None):
            seen.append(params.schemas(len(conversations)))
            return super().chat(conversations, params, tag)

    b = make_book(units=1)
    annotate_units(items(b), Spy(reply_fn=good), cfg, structured_output=True, progress=False)
    assert [s[0]["required"] for s in seen] == [["step_1_events"], ["step_2_threads"],
                                                 ["chapter_title", "step_3_turning_points", "segments"]]
    seen.clear()
    annotate_units(items(b), Spy(reply_fn=good), cfg, structured_output=False, progress=False)
    assert seen == [[None], [None], [None]]
    seen.clear()  # the test profile's own setting: on (litseg_nb.config.PROFILES_TABLE)
    assert cfg.llm.structured_output
    annotate_units(items(b), Spy(reply_fn=good), cfg, progress=False)
    assert all(s[0] is not None for s in seen)


def test_no_length_constraint_prompt(cfg):
    b = make_book(units=1)
    be = ScriptedBackend(reply_fn=good)
    annotate_units(items(b), be, cfg, length_reference=None, progress=False)
    system = be.calls[0][0]["content"]
    assert "recommended maximum length" not in system and "NEVER unnaturally merge" in system
    be = ScriptedBackend(reply_fn=good)
    annotate_units(items(b), be, cfg, length_reference=12, progress=False)
    assert "maximum length for any single segment is 12 sentences." in be.calls[0][0]["content"]


def test_bad_input_is_named(cfg):
    b = make_book(units=1)
    empty = Unit("b1", "u9", 9, "Empty", 0, 0, ())
    with pytest.raises(ValueError, match="u9 of book b1 has no sentences"):
        annotate_units([(b, empty)], ScriptedBackend(reply_fn=good), cfg, progress=False)


# ------------------------------------------------------------------ full chain, calibration, report
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from litseg_nb.litseg import report  # noqa: E402
from litseg_nb.litseg.segmenter import calibrate_length_reference  # noqa: E402
from litseg_nb.core.schema import check_coverage  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies=st.lists(st.one_of(
    st.text(max_size=80),
    st.builds(lambda segs: json.dumps({"segments": segs}),
              st.lists(st.fixed_dictionaries({"subtitle": st.text(max_size=4), "from_idx": st.integers(-2, 9),
                                              "to_idx": st.integers(-2, 9),
                                              "context_idx": st.lists(st.integers(-2, 9), max_size=3)}),
                       max_size=4)),
), min_size=9, max_size=9))
def test_pipeline_always_ends_in_full_coverage(replies):
    cfg = LitSegConfig.for_profile("test", max_retries=2)
    b = make_book(units=1)
    script = list(replies)
    run = annotate_units(items(b), ScriptedBackend(replies=script), cfg, progress=False)
    (rec,) = run.records
    assert rec["status"] == "done"
    chunks = records_to_chunks([b], run.records)
    assert check_coverage(b.units[0], chunks).ok
    again = records_to_chunks([b], run.records)
    assert [c.to_json() for c in again] == [c.to_json() for c in chunks]


def test_calibration_uses_quantile_of_usable_units(fresh_dirs):
    cfg = LitSegConfig.for_profile("test", calibration_units=2, calibration_quantile=0.5, max_retries=0)
    b = make_book(units=2, n=10)

    def reply(conv):
        if stage_of(conv) != 3:
            return good(conv)
        assert "recommended maximum length" not in conv[0]["content"]
        if "unit 0 in" in conv[-1]["content"]:
            return json.dumps({"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 2},
                                            {"subtitle": "b", "from_idx": 3, "to_idx": 10}]})
        return "garbage"  # unit 1 → whole-unit fallback, excluded from the lengths

    cal = calibrate_length_reference(items(b), ScriptedBackend(reply_fn=reply), cfg, progress=False, train_items=())
    assert cal["subset"] == ["b1/u0000", "b1/u0001"] and cal["excluded_units"] == ["b1/u0001"]
    assert cal["segment_lengths"] == [2, 8] and cal["length_reference"] == {"synthetic": 5}
    assert cal["source"] == "calibrated" and cal["by_dataset"]["synthetic"]["n_segments"] == 2
    cal = calibrate_length_reference(items(b)[1:], ScriptedBackend(reply_fn=reply), cfg, progress=False,
                                     train_items=())
    assert cal["source"] == "default" and cal["length_reference"] == {"synthetic": 100}
    assert "no usable" in cal["by_dataset"]["synthetic"]["reason"]


def test_report_tables_and_html(cfg):
    b = make_book(units=2)
    run = annotate_units(items(b), ScriptedBackend(reply_fn=good), cfg, progress=False)
    chunks = records_to_chunks([b], run.records)
    seg = report.segment_frame(run.records, chunks, lambda t: len(t.split()))
    assert list(seg.overlap) == [True, True] * 2 and list(seg.has_context) == [True, False] * 2
    assert list(seg.len_sentences) == [3, 4] * 2
    table = report.summary_table(run.records, seg, "scripted")
    row = table.iloc[0]
    assert row.units == 2 and row.segments == 4 and row.share_overlap == 1.0 and row.share_context == 0.5
    assert row.fallback_none == 2 and row.first_try_valid_stage3 == 1.0 and row.model == "scripted"
    page = report.render_segments_html(b, run.records[0], "label")
    assert "§1 A" in page and "context:" in page and "[1–3]" in page
    from litseg_nb.corpus import select_units

    assert select_units([b], cfg.selection.replace(books=(), units=("b1/u0001",))) == [(b, b.units[1])]
    with pytest.raises(ValueError, match="b1/u9"):
        select_units([b], cfg.selection.replace(books=(), units=("b1/u9",)))


def test_interrupted_mid_stage_resumes_through_request_cache(tmp_path):
    """With the persistent request cache, even calls of unfinished units are not repeated."""
    from litseg_nb.llm.request_cache import CachedBackend, RequestCache

    cfg = LitSegConfig.for_profile("test", max_retries=1)  # one group: nothing is finished before stage 3
    b = make_book(units=4)
    ref = annotate_units(items(b), ScriptedBackend(reply_fn=good), cfg, progress=False)

    class Interrupt(Exception):
        pass

    n = {"calls": 0}

    def dying(conv):
        n["calls"] += 1
        if n["calls"] == 6:  # stage 2 of the second unit
            raise Interrupt()
        return good(conv)

    db = tmp_path / "requests.sqlite"
    path = tmp_path / "a.jsonl"
    with pytest.raises(Interrupt):
        annotate_units(items(b), CachedBackend(ScriptedBackend(reply_fn=dying), RequestCache(db), chunk_size=1),
                       cfg, annotations_path=path, progress=False)
    inner = ScriptedBackend(reply_fn=good)
    cached = CachedBackend(inner, RequestCache(db), chunk_size=1)
    run = annotate_units(items(b), cached, cfg, annotations_path=path, progress=False)
    assert len(inner.calls) == 3 + 4  # stage 2 of units 2-4, stage 3 of all four
    assert cached.hits == 4 + 1
    strip = lambda recs: [{k: v for k, v in r.items() if k not in ("group_wall_share_s", "tokens", "stages")}  # noqa: E731
                          for r in recs]
    assert strip(run.records) == strip(ref.records)


def test_calibration_subset_is_a_seeded_sample_stratified_by_dataset():
    """Corpus order (GutenQA's 100 books first) made the first 50 units GutenQA-only; the
    subset now shares the units out over the datasets, each share a seeded random sample."""
    from litseg_nb.litseg.segmenter import calibration_subset

    g, lq = make_book("gutenqa:G", units=60, n=2), make_book("literaryqa:L", units=40, n=2)
    g.dataset, lq.dataset = "gutenqa", "literaryqa"
    pool = [(g, u) for u in g.units] + [(lq, u) for u in lq.units]
    sub = calibration_subset(pool, 50, seed=0)
    assert len(sub) == 50 and sum(b is lq for b, _ in sub) == 25  # not the first 50 (all GutenQA)
    assert sub == sorted(sub, key=pool.index)  # corpus order kept
    assert calibration_subset(pool, 50, seed=0) == sub and calibration_subset(pool, 50, seed=1) != sub
    assert [u for _, u in sub[:25]] != g.units[:25]  # a random sample, not the first units of each dataset
    small = [(g, u) for u in g.units] + [(lq, u) for u in lq.units[:3]]  # a dataset with too few units
    assert sum(b is lq for b, _ in calibration_subset(small, 20)) == 3
    assert calibration_subset(pool, 0) == pool and calibration_subset(pool, 200) == pool
