"""Constrained decoding of LitSeg and LitSeg-Lite: per-unit JSON schemas whose sentence
indices are bounded by the unit's sentence count, requested per conversation, obeyed by the hf
backend (xgrammar) on the tiny test model, keyed per request in the cache, and still followed by the
validator and the paper's counted fallbacks."""
from __future__ import annotations

import json
import re

import pytest

from litseg_nb.api import count_fallbacks
from litseg_nb.lite.segmenter import LiteSegmenter
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, records_to_chunks
from litseg_nb.litseg.prompting import single_pass_json_schema, stage_json_schema
from litseg_nb.llm.base import LLMError, SamplingParams
from fakes import ScriptedBackend
from litseg_nb.config import PROFILES_TABLE

from conftest import make_book
from test_litseg_pipeline import good, stage_of


def _indices(schema):
    """Every integer schema of the segments (from_idx, to_idx, context items)."""
    seg = schema["properties"]["segments"]["items"]["properties"]
    return [seg["from_idx"], seg["to_idx"], seg["context_idx"]["items"]]


def test_stage3_and_single_pass_schemas_bound_indices_by_the_units_sentences():
    for n in (1, 7, 300):
        s3 = stage_json_schema("stage3", 192, n)
        assert all(x == {"type": "integer", "minimum": 1, "maximum": n} for x in _indices(s3))
        assert s3["properties"]["segments"]["maxItems"] <= n
        lite = single_pass_json_schema(192, n)
        assert lite["required"] == ["step1", "step2", "step3"]
        assert all(x["maximum"] == n for x in _indices(lite["properties"]["step3"]))
    assert "maximum" not in _indices(stage_json_schema("stage3", 192))[0]  # no unit: unbounded
    assert stage_json_schema("stage1", 48, 9) == stage_json_schema("stage1", 48)  # free text: same for all
    with pytest.raises(ValueError, match="at least one sentence"):
        stage_json_schema("stage3", 192, 0)


class Spy(ScriptedBackend):
    structured_output = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen = []

    def chat(self, conversations, params=SamplingParams(), tag=None):
        self.seen.append((tag.stage if tag else "", params.schemas(len(conversations)), list(conversations)))
        return super().chat(conversations, params, tag)


def test_litseg_requests_each_units_own_schema_and_counts_fallbacks():
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    assert cfg.llm.structured_output and "structured=on" in cfg.describe()
    b1, b2 = make_book("b1", units=2, n=6), make_book("b2", units=1, n=4)
    items = [(b, u) for b in (b1, b2) for u in b.units]

    def reply(conv):  # b1's second unit gets an unusable stage-3 reply: the whole-unit fallback, counted
        if stage_of(conv) == 3 and "unit 1 in b1" in conv[-1]["content"]:
            return "not json"
        return good(conv)

    be = Spy(reply_fn=reply)
    run = annotate_units(items, be, cfg, progress=False)
    stage3 = [x for stage, s, _ in be.seen if stage == "stage3" for x in s]
    assert [x["properties"]["segments"]["items"]["properties"]["to_idx"]["maximum"] for x in stage3] == [6, 6, 4]
    assert all(s is not None for _, ss, _ in be.seen for s in ss)  # stages 1 and 2 constrained too
    assert all(r["structured_output"] for r in run.records)
    fb = {(r["book_id"], r["unit_id"]): r["fallback"] for r in run.records}
    assert fb == {("b1", "u0000"): "none", ("b1", "u0001"): "whole_unit", ("b2", "u0000"): "index_repair"}
    chunks = records_to_chunks([b1, b2], run.records)
    assert count_fallbacks(chunks) == {"index_repair": 1, "whole_unit": 1}

    class NoSO(ScriptedBackend):
        structured_output = False

    # a backend built without constrained decoding is refused, never run silently unconstrained
    with pytest.raises(ValueError, match="built without it"):
        annotate_units(items[:1], NoSO(reply_fn=good), cfg, progress=False)


def test_lite_single_pass_schema_per_unit_and_not_for_ablation_prompts():
    book = make_book(units=2, n=5)

    def reply(conv):
        n = len(re.findall(r"^\[\d+\]", conv[-1]["content"], re.M)) or 5
        return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                           "step3": {"chapter_title": "c", "step_3_turning_points": [],
                                     "segments": [{"subtitle": "s", "from_idx": 1, "to_idx": n, "context_idx": []}]}})

    be = Spy(reply_fn=reply)
    seg = LiteSegmenter(be, max_new_tokens=192, retries=0)
    assert seg.structured  # follows the backend's llm.structured_output
    chunks, results = seg.segment_units([(book, u) for u in book.units])
    (_, schemas, _), = be.seen
    assert [s["properties"]["step3"]["properties"]["segments"]["items"]["properties"]["from_idx"]["maximum"]
            for s in schemas] == [5, 5]
    assert all(r.structured_output for r in results) and all(c.metadata["structured_output"] for c in chunks)
    be2 = Spy(reply_fn=reply)
    seg2 = LiteSegmenter(be2, max_new_tokens=192, retries=0, system_template="ablation/wo_theory")
    seg2.segment_units([(book, book.units[0])])
    assert not seg2.structured and be2.seen[0][1] == [None]
    assert PROFILES_TABLE["smoke"]["LiteConfig"]["llm"]["structured_output"] is True


def test_per_conversation_schemas_are_checked_and_keyed_per_request(tmp_path):
    from litseg_nb.llm.request_cache import CachedBackend, RequestCache

    with pytest.raises(LLMError, match="2 schemas for 3"):
        SamplingParams(json_schemas=({}, {})).schemas(3)
    a, b = stage_json_schema("stage3", 64, 3), stage_json_schema("stage3", 64, 9)
    convs = [[{"role": "user", "content": f"x{k}"}] for k in range(2)]
    inner = Spy(reply_fn=lambda c: "{}")
    cached = CachedBackend(inner, RequestCache(tmp_path / "c.sqlite"))
    cached.chat(convs, SamplingParams(max_new_tokens=8, json_schemas=(a, b)))
    # the same requests one by one, each with its schema as json_schema: all cache hits
    cached.chat(convs[:1], SamplingParams(max_new_tokens=8, json_schema=a))
    cached.chat(convs[1:], SamplingParams(max_new_tokens=8, json_schema=b))
    assert len(inner.seen) == 1 and cached.hits == 2
    cached.chat(convs[:1], SamplingParams(max_new_tokens=8, json_schema=b))  # another schema: another key
    assert len(inner.seen) == 2 and inner.seen[1][1] == [b]


def test_hf_tiny_model_obeys_each_rows_index_bounds():
    from litseg_nb.llm.hf import HFBackend

    be = HFBackend("tiny-random", structured_output=True, batch_size=4)
    convs = [[{"role": "user", "content": f"Segment unit {k}."}] for k in range(3)]
    bounds = (2, 9, 3)
    small = [{"type": "object", "properties": {"i": {"type": "integer", "minimum": 1, "maximum": m}},
              "required": ["i"], "additionalProperties": False} for m in bounds]
    gens = be.chat(convs, SamplingParams(max_new_tokens=12, json_schemas=tuple(small)))
    assert [1 <= json.loads(g.text)["i"] <= m for g, m in zip(gens, bounds)] == [True] * 3
    # LitSeg's stage-3 schema: every index the random model writes is inside its own unit
    gens = be.chat(convs[:2], SamplingParams(max_new_tokens=160, json_schemas=(
        stage_json_schema("stage3", 160, 4), stage_json_schema("stage3", 160, 40))))
    for g, n in zip(gens, (4, 40)):
        idx = [int(x) for x in re.findall(r'"(?:from_idx|to_idx)": ?(\d+)', g.text)]
        ctx = [int(x) for m in re.findall(r'"context_idx": ?\[([\d, ]*)', g.text) for x in re.findall(r"\d+", m)]
        assert idx and all(1 <= i <= n for i in idx + ctx), (n, g.text[:300])
    # the same backend with constrained decoding off ignores the schemas
    be.structured_output = False
    free = be.chat(convs[:1], SamplingParams(max_new_tokens=8, json_schemas=(small[0],)))
    assert free[0].text != gens[0].text


def test_segment_floor_reads_the_length_target_as_a_lower_bound_and_is_off_by_default():
    from litseg_nb.litseg.prompting import segment_floor

    assert segment_floor(25, 100, 0) == 0  # off (full, the paper): one segment over the unit allowed
    assert [segment_floor(n, 100, 2) for n in (1, 2, 7, 25)] == [1, 2, 2, 2]
    assert [segment_floor(n, 10, 2) for n in (25, 31, 40)] == [3, 4, 4]  # ceil(n / length reference)
    assert segment_floor(25, None, 2) == 2  # no length constraint (calibration): the configured floor
    with pytest.raises(ValueError, match=">= 0"):
        segment_floor(5, 100, -1)
    assert LitSegConfig.for_profile("full").min_segments == 0
    assert LitSegConfig.for_profile("smoke").min_segments == 2
    assert "segment_floor>=2" in LitSegConfig.for_profile("smoke").describe()  # the label says so
    assert "segment_floor" not in LitSegConfig.for_profile("full").describe()


def test_floor_schema_requires_segments_the_validator_cannot_merge_into_one():
    import xgrammar as xgr

    plain = stage_json_schema("stage3", 192, 25)
    assert plain["properties"]["segments"]["minItems"] == 1 and "prefixItems" not in plain["properties"]["segments"]
    assert stage_json_schema("stage3", 192, 25, 1) == plain  # a floor of one is no floor
    seg = stage_json_schema("stage3", 192, 25, 2)["properties"]["segments"]
    assert seg["minItems"] == 2 and seg["maxItems"] >= 2
    first = seg["prefixItems"][0]["properties"]
    assert (first["from_idx"]["minimum"], first["from_idx"]["maximum"], first["to_idx"]["maximum"]) == (1, 1, 24)
    assert seg["items"]["properties"]["from_idx"] == {"type": "integer", "minimum": 2, "maximum": 25}
    # the floor is capped by the segments the token budget holds (192 tokens: 2) and by the unit
    assert stage_json_schema("stage3", 192, 40, 4)["properties"]["segments"]["minItems"] == 2
    assert stage_json_schema("stage3", 4096, 3, 3)["properties"]["segments"]["prefixItems"][0][
        "properties"]["to_idx"]["maximum"] == 1
    with pytest.raises(ValueError, match="needs n_sentences"):
        stage_json_schema("stage3", 192, None, 2)
    xgr.Grammar.from_json_schema(json.dumps(stage_json_schema("stage3", 192, 25, 2)), any_whitespace=False)


def test_litseg_floor_reaches_each_units_schema_and_record_and_keys_apart():
    from litseg_nb.litseg.pipeline import run_key

    cfg = LitSegConfig.for_profile("test", max_retries=0, min_segments=2, stage3_max_new_tokens=192)
    book = make_book("b1", units=2, n=6)

    def reply(conv):  # a reply of two segments, as the floor schema demands
        if stage_of(conv) == 3:
            return json.dumps({"chapter_title": "c", "step_3_turning_points": [],
                               "segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 3, "context_idx": []},
                                            {"subtitle": "b", "from_idx": 4, "to_idx": 6, "context_idx": []}]})
        return good(conv)

    be = Spy(reply_fn=reply)
    run = annotate_units([(book, u) for u in book.units], be, cfg, length_reference=100, progress=False)
    stage3 = [x for stage, s, _ in be.seen if stage == "stage3" for x in s]
    assert [x["properties"]["segments"]["minItems"] for x in stage3] == [2, 2]
    assert [r["segment_floor"] for r in run.records] == [2, 2]
    assert [len(r["segments"]) for r in run.records] == [2, 2] and {r["fallback"] for r in run.records} == {"none"}
    off = cfg.replace(min_segments=0)
    assert run_key(off, be, "s", True, 0) != run_key(cfg, be, "s", True, 0)
    assert run_key(off, be, "s", False, 0) == run_key(cfg, be, "s", False, 0)  # unconstrained: no schema
    run_off = annotate_units([(book, book.units[0])], Spy(reply_fn=reply), off, length_reference=100, progress=False)
    assert run_off.records[0]["segment_floor"] == 0
