"""Warm reruns keep the cost ledger: step-cache hits and resumed LitSeg units put the
cost recorded when the work was done back into the ledger, flagged as cached, so notebook 08's
table is the same after any number of reruns."""
from __future__ import annotations

import math

from litseg_nb.chunkers import BaselinesConfig
from litseg_nb.segmenters import run_chunker
from fakes import toy_book
from litseg_nb.evaluation.efficiency import efficiency_table
from litseg_nb.litseg.segmenter import calibrate_length_reference
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units
from litseg_nb.llm.base import Generation, UsageLedger, UsageTag
from fakes import ScriptedBackend

from test_litseg_pipeline import good, items, make_book

STORY = " ".join(f"Sentence number {i} tells of event {i}." for i in range(1, 13))
BOOK = toy_book(STORY + "\n\nA second paragraph starts here. It ends here.")
COST = ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "latency_s")


def _first_id(conv):
    import re

    return int(re.search(r"ID (\d+)", conv[-1]["content"]).group(1))


def _baseline_backend():
    return ScriptedBackend(reply_fn=lambda c: (f"Answer: ID {_first_id(c) + 1}" if "ID " in c[-1]["content"]
                                               else "- A fact."),
                           logprob_fn=lambda conv, cands: {"1": math.log(0.3), "2": math.log(0.6)})


def _cost(rows):
    return {(r["method"], r["book"], r["stage"]): tuple(round(r[k], 6) for k in COST) for r in rows}


def test_ledger_replay_counts_cost_and_flags_cache_hits():
    led = UsageLedger()
    tag = UsageTag("m", "b", "s")
    led.record(tag, Generation("x", 10, 2, 0.5, cached_prompt_tokens=4))
    led.replay(tag, {"calls": 3, "prompt_tokens": 30, "completion_tokens": 6, "latency_s": 1.5,
                     "cached_prompt_tokens": 0})
    (row,) = led.rows()
    assert (row["calls"], row["prompt_tokens"], row["completion_tokens"], row["cache_hits"]) == (4, 40, 8, 3)
    assert abs(row["latency_s"] - 2.0) < 1e-9 and row["cached_prompt_tokens"] == 4


def test_warm_rerun_of_baselines_keeps_the_ledger(fresh_dirs):
    """`run --only 04` twice: the second run's ledger equals the first (the bug: it was empty)."""
    cfg = BaselinesConfig.for_profile("test", selection={"books": (), "max_units": 0}, lumber_budget_tokens=20, merge_target_tokens=30)
    methods = ("margin", "lumber", "lumber+merge", "margin+merge", "proposition")
    ledgers = []
    for run in range(3):
        be = _baseline_backend()
        for m in methods:
            run_chunker(m, [BOOK], cfg, backend=be)
        if run:
            assert be.calls == [], "a warm rerun must not call the model again"
        ledgers.append(be.ledger.rows())
    cold, warm, warm2 = (_cost(x) for x in ledgers)
    assert cold and {k[0] for k in cold} == {"margin", "lumber", "proposition"}
    assert warm == cold and warm2 == cold  # each unit's work counted once (not again for "+merge")
    assert all(r["cache_hits"] == 0 for r in ledgers[0])
    assert all(r["cache_hits"] == r["calls"] for r in ledgers[1])  # shown as cached
    sents = {"margin": 14, "lumber": 14, "proposition": 14}
    t_cold = efficiency_table(be.ledger.to_frame().assign(cache_hits=0), sents)
    t_warm = efficiency_table(be.ledger.to_frame(), sents)
    assert t_cold.drop(columns="cache_hits").equals(t_warm.drop(columns="cache_hits"))


def test_resumed_litseg_and_calibration_keep_the_ledger(fresh_dirs):
    """A resumed notebook 02: resumed units and the calibration run keep their recorded rows."""
    cfg = LitSegConfig.for_profile("test", max_retries=1, calibration_units=2, calibration_max_retries=0)
    b1, b2 = make_book("b1", units=2), make_book("b2", units=1)
    path = fresh_dirs / "ann.jsonl"
    runs = []
    for _ in range(2):
        be = ScriptedBackend(reply_fn=good)
        calibrate_length_reference(items(b1, b2), be, cfg, progress=False)
        annotate_units(items(b1, b2), be, cfg, length_reference=7, annotations_path=path, progress=False)
        runs.append(be)
    cold, warm = runs
    assert len(cold.calls) == 2 * 3 + 3 * 3 and warm.calls == []
    assert _cost(warm.ledger.rows()) == _cost(cold.ledger.rows())
    assert {r["method"] for r in warm.ledger.rows()} == {"litseg", "litseg-calibration"}
    assert all(r["cache_hits"] == r["calls"] for r in warm.ledger.rows())
