"""§4.4 measured side by side (litseg_nb.evaluation.efficiency): same units, same batching, interleaved, on a fake clock.

The fake backend advances a fake clock by a fixed cost per call and per request (a "sleep" that takes no
real time), so every ratio is deterministic. Two properties of issue 39: a sleep injected into one
method's backend while its NOTEBOOK ran (the ledger of "02") moves the ledger ratio but leaves the paired
ratio unchanged; a sleep injected into one method's backend DURING the paired measurement moves it.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest

from litseg_nb.evaluation import efficiency
pt = efficiency
from litseg_nb.chunkers.config import BaselinesConfig
from litseg_nb.chunkers.llm_chunkers import lumber_chunks_batch
from litseg_nb.lite.config import LiteConfig
from litseg_nb.lite.segmenter import LiteSegmenter
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, records_to_chunks
from litseg_nb.llm.base import BackendBase, Generation, SamplingParams, UsageLedger, UsageTag
from litseg_nb.core.paths import outputs_dir
from litseg_nb.core.schema import save_chunks
from tests.conftest import make_book

_ID = re.compile(r"ID (\d+):")


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class ClockBackend(BackendBase):
    """Deterministic replies; every call advances ``clock`` by ``per_call + per_request * n`` seconds
    (+ ``sleep`` per request: the injected slowdown) and reports that time as latency (batch wall / n)."""

    name = "fake-clock"

    def __init__(self, clock: Clock, model_id: str = "fake", per_call: float = 0.5, per_request: float = 0.1,
                 sleep: float = 0.0, ledger: UsageLedger | None = None) -> None:
        self.clock, self.model_id = clock, model_id
        self.per_call, self.per_request, self.sleep = per_call, per_request, sleep
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.batches: list[int] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def chat(self, conversations, params=SamplingParams(), tag=UsageTag()):
        n = len(conversations)
        self.batches.append(n)
        cost = self.per_call + n * (self.per_request + self.sleep)
        self.clock.t += cost
        out = []
        for conv in conversations:
            ids = _ID.findall(conv[-1]["content"])
            reply = f"Answer: ID {ids[1]}" if len(ids) > 1 else "{}"  # LumberChunker: cut after one sentence
            gen = Generation(reply, self.count_tokens(" ".join(m["content"] for m in conv)), 3, cost / n,
                             cached_prompt_tokens=0)
            self.ledger.record(tag, gen)
            out.append(gen)
        return out


def _books():
    return [make_book("gutenqa:A", units=2, n=6), make_book("gutenqa:B", units=2, n=6)]


def _cfgs():
    lcfg = LitSegConfig.for_profile("test")
    return lcfg, LiteConfig.for_profile("test"), BaselinesConfig.for_profile("test")


def _methods(clock: Clock, sleep: dict[str, float] | None = None, teacher_cost: float = 0.1):
    """Teacher, student base and Lite as three engines (the teacher ``teacher_cost`` s per request)."""
    sleep = sleep or {}
    lcfg, lite_cfg, bcfg = _cfgs()
    teacher = ClockBackend(clock, "teacher", per_request=teacher_cost)
    base = ClockBackend(clock, "base")
    lite = ClockBackend(clock, "lite")
    methods = pt.build_methods(teacher, base, lite, lcfg, lite_cfg, bcfg, 100, 100)
    for m in methods:  # one method's backend slowed: a separate backend of the same model with the sleep
        if sleep.get(m.name):
            m.engine = pt.PairedEngine.fixed(ClockBackend(clock, m.engine.backend.model_id, sleep=sleep[m.name]))
    return methods


def _pairs():
    return [(b, u) for b in _books() for u in b.units]


def _paired_ratios(sleep: dict[str, float] | None = None, repeats: int = 3, batch_units: int = 0):
    clock = Clock()
    passes = pt.measure_paired(_pairs(), _methods(clock, sleep), repeats=repeats, batch_units=batch_units,
                               clock=clock, load=lambda: 1.0, progress=False)
    return passes, pt.paired_ratio_table(passes).set_index("ratio")


def test_same_batching_for_every_method_and_interleaved_order():
    passes, ratios = _paired_ratios()
    # 4 units of 2 books: every method's first call carries all four (across books), none more
    assert set(passes["max_concurrency"]) == {4}
    first = passes[passes["block"] == 0]
    order = ["litseg", pt.STUDENT_METHOD, "lumber", "litseg-lite"]
    assert list(first.sort_values("position")["method"]) == order
    second = passes[passes["block"] == 1]
    assert list(second.sort_values("position")["method"]) == order[::-1]
    # LitSeg: three stages (at least 3 calls); every pass computed (no cache hit); load recorded
    lit = passes[passes["method"] == "litseg"]
    assert (lit["chat_calls"] >= 3).all() and (passes["cache_hits"] == 0).all()
    table = pt.paired_method_table(passes).set_index("method")
    assert (table["max_concurrency"] == 4).all() and table.loc["litseg", "repeats"] == 3
    assert table["load_avg_mean"].eq(1.0).all()
    r = ratios.loc["litseg-lite / litseg"]
    assert r["blocks"] == 3 and r["numerator_max_concurrency"] == r["denominator_max_concurrency"] == 4
    assert r["wall_ratio_min"] <= r["wall_ratio_median"] <= r["wall_ratio_max"]
    # deterministic fake clock: no spread; token ratios beside the time ratios
    assert r["wall_ratio_iqr"] == pytest.approx(0.0)
    assert 0 < r["computed_prefill_tokens_ratio_median"] and 0 < r["prompt_tokens_ratio_median"]


def test_batches_cap_the_concurrency_of_every_method():
    passes, ratios = _paired_ratios(repeats=1, batch_units=2)
    assert set(passes["max_concurrency"]) == {2} and passes["block"].nunique() == 2
    assert ratios.loc["litseg-lite / lumber", "blocks"] == 2


def _notebook_runs(sleep_02: float, root):
    """Notebooks 02 (LitSeg), 03 (Lite) and 04 (LumberChunker) on the same units, each with its own
    ledger and batching; ``sleep_02`` slows LitSeg's backend while "02" runs."""
    books = _books()
    pairs = [(b, u) for b in books for u in b.units]
    lcfg, lite_cfg, bcfg = _cfgs()
    clock = Clock()
    for nb, method in (("02", "litseg"), ("03", "litseg-lite"), ("04", "lumber")):
        led = UsageLedger()
        be = ClockBackend(clock, sleep=sleep_02 if nb == "02" else 0.0, ledger=led)
        if nb == "02":
            run = annotate_units(pairs, be, lcfg, length_reference=100, progress=False)
            chunks = records_to_chunks(books, run.records)
        elif nb == "03":
            chunks, _ = LiteSegmenter(be, lite_cfg.infer_max_new_tokens, lite_cfg.infer_retries,
                                      length_reference=100).segment_units(pairs)
        else:
            per_unit, _ = lumber_chunks_batch(pairs, be, bcfg.lumber_budget_tokens, bcfg.lumber_max_retries,
                                              stage="04")
            chunks = [c for cs in per_unit for c in cs]
        (root / "usage").mkdir(parents=True, exist_ok=True)
        led.to_frame().to_csv(root / "usage" / f"{nb}.csv", index=False)
        save_chunks(root / "chunks" / f"{method}.jsonl", chunks)
    table, _ = efficiency.paper_efficiency_table("test", timing_dataset="all", controls=False)
    return efficiency.paper_ratio_table(table).set_index("ratio")


def test_a_slow_notebook_02_moves_the_ledger_ratio_not_the_paired_one(fresh_dirs):
    root = outputs_dir("test") / "artifacts"
    ledger_fast = _notebook_runs(0.0, root)
    paired_fast = _paired_ratios()[1]
    ledger_slow = _notebook_runs(5.0, root)  # LitSeg's backend sleeps 5 s per request during "02"
    paired_slow = _paired_ratios()[1]
    key = "litseg-lite / litseg"
    # the ledgers of 02-04 see the sleep (their ratio drops several-fold) ...
    assert ledger_slow.loc[key, "model_seconds_per_1k_sent"] < 0.5 * ledger_fast.loc[key, "model_seconds_per_1k_sent"]
    # ... 08's paired measurement does not (it times the methods itself, side by side)
    pd.testing.assert_series_equal(paired_slow.loc[key], paired_fast.loc[key])


def test_a_sleep_during_the_paired_measurement_moves_the_ratio():
    key = "litseg-lite / litseg"
    fast = _paired_ratios()[1].loc[key]
    slow = _paired_ratios(sleep={"litseg": 5.0})[1].loc[key]  # LitSeg's backend slowed inside 08
    assert slow["wall_ratio_median"] < 0.5 * fast["wall_ratio_median"]
    assert slow["model_seconds_ratio_median"] < 0.5 * fast["model_seconds_ratio_median"]
    # tokens do not depend on the clock
    assert slow["computed_prefill_tokens_ratio_median"] == pytest.approx(fast["computed_prefill_tokens_ratio_median"])
    lite_slow = _paired_ratios(sleep={"litseg-lite": 5.0})[1]
    assert lite_slow.loc["litseg-lite / lumber", "wall_ratio_median"] > \
        2 * _paired_ratios()[1].loc["litseg-lite / lumber", "wall_ratio_median"]


def test_bad_arguments_are_one_line_errors():
    clock = Clock()
    with pytest.raises(pt.PairedTimingError, match="no unit"):
        pt.measure_paired([], _methods(clock), clock=clock)
    with pytest.raises(pt.PairedTimingError, match="repeats"):
        pt.measure_paired(_pairs(), _methods(clock), repeats=0, clock=clock)
    m = _methods(clock)
    with pytest.raises(pt.PairedTimingError, match="given twice"):
        pt.measure_paired(_pairs(), [m[0], m[0]], clock=clock)


def test_metered_backend_resets_prefix_caches():
    class WithPrefixes(ClockBackend):
        cleared = 0

        def clear_prefixes(self):
            WithPrefixes.cleared += 1

    clock = Clock()
    assert pt.reset_prefix_cache(pt.MeteredBackend(WithPrefixes(clock))) and WithPrefixes.cleared == 1
    assert not pt.reset_prefix_cache(ClockBackend(clock))


def test_headline_row_is_lite_against_the_teacher():
    """The teacher costs 5x the student per request: the headline row divides Lite by the teacher's passes,
    the same-weights row by LitSeg's three stages on the student's base model."""
    clock = Clock()
    passes = pt.measure_paired(_pairs(), _methods(clock, teacher_cost=0.5), repeats=2, clock=clock,
                               load=lambda: 1.0, progress=False)
    ratios = pt.paired_ratio_table(passes)
    head = ratios.iloc[0]
    assert head["ratio"] == "litseg-lite / litseg" and head["quantity"].startswith("HEADLINE")
    assert head["denominator_model"].startswith("teacher") and head["numerator_model"].startswith("lite")
    lite, teacher, student = (passes[passes["method"] == m].set_index("block")["wall_s"]
                              for m in ("litseg-lite", "litseg", pt.STUDENT_METHOD))
    assert head["wall_ratio_median"] == pytest.approx(float((lite / teacher).median()))
    same = ratios.set_index("ratio").loc[f"litseg-lite / {pt.STUDENT_METHOD}"]
    assert same["wall_ratio_median"] == pytest.approx(float((lite / student).median()))
    assert head["wall_ratio_median"] < same["wall_ratio_median"]  # the teacher is the slower model here
    # the same request lists: LitSeg on the teacher and on the student sends the same prompts (tokens)
    tok = passes.groupby("method")["prompt_tokens"].sum()
    assert tok["litseg"] == tok[pt.STUDENT_METHOD]
    lora = ratios.set_index("ratio").loc[f"{pt.LITE_LORA_METHOD} / litseg-lite"]
    assert lora["note"].startswith("not measured") and pd.isna(lora["wall_ratio_median"])


class Engines:
    """Fake engines: each start advances the clock by ``start_s``; records the engines alive."""

    def __init__(self, clock: Clock, start_s: float = 30.0) -> None:
        self.clock, self.start_s, self.alive, self.most = clock, start_s, set(), 0

    def engine(self, name: str, per_request: float = 0.1) -> pt.PairedEngine:
        def start():
            self.clock.t += self.start_s
            self.alive.add(name)
            self.most = max(self.most, len(self.alive))
            return ClockBackend(self.clock, name, per_request=per_request)

        return pt.PairedEngine(name, name, start, lambda _b: self.alive.discard(name), exclusive=True)


def test_exclusive_engines_run_one_at_a_time_alternate_and_start_up_is_timed_apart():
    clock = Clock()
    fake = Engines(clock)
    lcfg, lite_cfg, bcfg = _cfgs()
    teacher, base, lite, lora = (fake.engine(n) for n in ("teacher", "base", "lite", "base+lora"))
    methods = pt.build_methods(teacher, base, lite, lcfg, lite_cfg, bcfg, 100, 100, lite_lora=lora)
    passes = pt.measure_paired(_pairs(), methods, repeats=3, clock=clock, load=lambda: 1.0, progress=False)
    assert fake.most == 1 and not fake.alive  # one engine alive at a time; all released at the end
    starts = pt.engine_start_table(methods)
    # A B C D, D C B A, A B C D: 4 starts in the first block, 3 in each later one (the last engine stays)
    assert len(starts) == 4 + 3 + 3 and starts["start_s"].round(6).eq(30.0).all()
    assert starts.groupby("engine")["methods"].first()["base"] == f"{pt.STUDENT_METHOD}, lumber"
    # the passes hold no start-up: with a 30 s start per engine, no pass takes that long
    assert passes["wall_s"].max() < 30.0
    lora_row = pt.paired_ratio_table(passes).set_index("ratio").loc[f"{pt.LITE_LORA_METHOD} / litseg-lite"]
    assert lora_row["note"] == "" and lora_row["blocks"] == 3


def test_profile_methods_put_litseg_on_the_teacher_and_every_engine_plain(fresh_dirs, monkeypatch):
    """In full's shape (vLLM, LoRA-enabled engine settings, a teacher other than the student), the paired
    methods run LitSeg on the teacher's config, Lite on merged weights, all without LoRA or request cache,
    and Lite's LoRA requests on the LoRA engine as their own row."""
    from litseg_nb.config import config_sets

    built = []

    def fake_backend(cfg, ledger=None, **_):
        built.append(cfg)
        return ClockBackend(Clock(), cfg.lora_adapter or cfg.model)

    def fake_student_backend(cfg, adapters, root, ledger=None):
        return fake_backend(cfg.replace(lora_adapter=str(root / "lora-x"))), root / "lora-x"

    adapters = {"sft": fresh_dirs / "sft", "grpo": fresh_dirs / "grpo"}
    monkeypatch.setattr(pt, "make_backend", fake_backend)
    monkeypatch.setattr(pt, "student_backend", fake_student_backend)
    monkeypatch.setattr(pt, "adapter_dirs", lambda profile: adapters)
    merged = {}
    monkeypatch.setattr(pt, "save_merged_model", lambda base, dirs, root, dtype: merged.setdefault(dtype, root / "merged-x"))
    monkeypatch.setattr(pt, "annotation_length_reference", lambda recs: 100)
    monkeypatch.setattr(pt, "student_length_reference", lambda profile: 100)
    monkeypatch.setattr(pt, "load_annotations", lambda profile, split: [])
    engine = {"enable_lora": True, "max_lora_rank": 16, "max_num_seqs": 8}
    sets = [("llm.backend", "vllm"), ("llm.engine", engine), ("llm.dtype", "bfloat16"), ("LitSegConfig.llm.model", "teacher-model"),
            ("LiteConfig.llm.model", "student-model")]
    with config_sets(sets):
        methods, info = pt.profile_methods("test", _pairs())
    assert [m.name for m in methods] == ["litseg", pt.STUDENT_METHOD, "lumber", pt.LITE_LORA_METHOD, "litseg-lite"]
    assert {m.name: m.engine.name for m in methods}["litseg"] == "teacher" and not info["same_model"]
    assert all(m.engine.exclusive for m in methods) and list(merged) == ["bfloat16"]  # merged in the engine's dtype
    passes = pt.measure_paired(_pairs(), methods, clock=Clock(), load=lambda: 1.0, progress=False)
    models = passes.set_index("method")["model"]
    assert models["litseg"].startswith("teacher-model") and models[pt.STUDENT_METHOD].startswith("student-model")
    assert "merged-x" in models["litseg-lite"] and models[pt.LITE_LORA_METHOD].startswith("student-model")
    plain = [c for c in built if not c.lora_adapter]
    assert {c.model for c in plain} == {"teacher-model", "student-model", str(fresh_dirs / "outputs" / "test" /
                                                                               "artifacts" / "lite" / "merged" / "merged-x")}
    assert all(not c.use_cache and "enable_lora" not in c.engine and c.engine["max_num_seqs"] == 8 for c in plain)
    assert all(not c.use_cache for c in built)
    lora = next(c for c in built if c.lora_adapter)
    assert lora.engine["enable_lora"] and lora.model == "student-model"
