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


def _methods(clock: Clock, sleep: dict[str, float] | None = None):
    sleep = sleep or {}
    lcfg, lite_cfg, bcfg = _cfgs()
    base = ClockBackend(clock, "base")
    lite = ClockBackend(clock, "lite")
    methods = pt.build_methods(base, lite, lcfg, lite_cfg, bcfg, 100, 100)
    for m in methods:  # one method's backend slowed: a separate backend of the same model with the sleep
        if sleep.get(m.name):
            m.backend = ClockBackend(clock, m.backend.model_id, sleep=sleep[m.name])
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
    assert list(first.sort_values("position")["method"]) == ["litseg", "litseg-lite", "lumber"]
    second = passes[passes["block"] == 1]
    assert list(second.sort_values("position")["method"]) == ["lumber", "litseg-lite", "litseg"]
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
