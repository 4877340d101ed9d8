import pandas as pd
import pytest

from litseg_nb.evaluation import efficiency
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.llm.base import Generation, UsageLedger, UsageTag
from litseg_nb.core.paths import outputs_dir
from litseg_nb.core.schema import Chunk, save_chunks
from tests.conftest import make_book


def _chunk(unit, a, b, method):
    return Chunk("bk", unit, f"{unit}.{a}", method, a, b, [(0, 1)], "x", "x")


def test_efficiency_table_from_ledgers_and_chunks(fresh_dirs):
    root = outputs_dir("test") / "artifacts"
    led = UsageLedger()
    for _ in range(3):  # litseg: 3 fresh calls of 2 s each, 100 prompt + 10 completion tokens
        led.record(UsageTag("litseg", "bk", "stage1"), Generation("", 100, 10, 2.0))
    led.record(UsageTag("litseg", "bk", "stage1"), Generation("", 100, 10, 0.0, cache_hit=True))  # 0 s recorded
    led.record(UsageTag("litseg-lite", "bk", "single"), Generation("", 50, 20, 1.0))
    (root / "usage").mkdir(parents=True)
    led.to_frame().to_csv(root / "usage" / "02.csv", index=False)
    # litseg segmented two units with 10 and 30 sentences; lite one unit of 20
    save_chunks(root / "chunks" / "litseg.jsonl",
                [_chunk("u1", 1, 6, "litseg"), _chunk("u1", 5, 10, "litseg"), _chunk("u2", 1, 30, "litseg")])
    save_chunks(root / "chunks" / "litseg-lite.jsonl", [_chunk("u1", 1, 20, "litseg-lite")])

    usage = efficiency.load_usage("test")
    sents = efficiency.sentences_per_method("test", usage["method"].unique())
    assert sents == {"litseg": 40, "litseg-lite": 20}
    eff = efficiency.efficiency_table(usage, sents).set_index("method")
    assert eff.loc["litseg", "calls"] == 4 and eff.loc["litseg", "cache_hits"] == 1
    assert eff.loc["litseg", "model_seconds"] == pytest.approx(6.0)
    assert eff.loc["litseg", "prompt_tokens_per_1k_sent"] == pytest.approx(400 * 1000 / 40)
    assert eff.loc["litseg", "seconds_per_1k_sent"] == pytest.approx(150.0)
    assert eff.loc["litseg-lite", "seconds_per_1k_sent"] == pytest.approx(50.0)
    sp = efficiency.speedup_table(eff.reset_index()).set_index("method")
    assert sp.loc["litseg-lite", "speedup_vs_litseg"] == pytest.approx(3.0)


def test_cache_hits_keep_their_recorded_cost():
    usage = pd.DataFrame([{"method": "m", "book": "b", "stage": "s", "calls": 2, "prompt_tokens": 5,
                           "cached_prompt_tokens": 0, "completion_tokens": 1, "latency_s": 3.0,
                           "cache_hits": 2}])
    eff = efficiency.efficiency_table(usage, {"m": 10})
    assert eff["model_seconds"].iloc[0] == 3.0 and eff["seconds_per_1k_sent"].iloc[0] == 300.0


def test_bad_ledger_names_the_file(fresh_dirs):
    d = outputs_dir("test") / "artifacts" / "usage"
    d.mkdir(parents=True, exist_ok=True)
    (d / "04.csv").write_text("method,calls\nx,1\n")
    with pytest.raises(ValueError, match="04.csv lacks columns"):
        efficiency.load_usage("test")


def _c(book, unit, a, b, method):
    return Chunk(book, unit, f"{book}.{unit}.{a}", method, a, b, [(0, 1)], "x", "x")


def test_paper_efficiency_counts_each_methods_segmentation_once_on_the_same_units(fresh_dirs):
    """§4.4: only each method's segmentation work, only the units all three segmented;
    Lite's evaluation runs, LitSeg's calibration/training annotations and other books are left out."""
    root = outputs_dir("test") / "artifacts"
    (root / "usage").mkdir(parents=True)
    g = lambda p, c, s, hit=False: Generation("", p, c, s, cached_prompt_tokens=p // 2, cache_hit=hit)  # noqa: E731
    l02, l03, l04 = UsageLedger(), UsageLedger(), UsageLedger()
    for st in ("stage1", "stage2", "stage3"):
        l02.record(UsageTag("litseg", "A", st), g(1000, 100, 3.0))
        l02.record(UsageTag("litseg", "B", st), g(1000, 100, 3.0))  # B: not segmented by lumber
    l02.record(UsageTag("litseg-calibration", "A", "stage3"), g(999, 99, 9.0))
    l02.record(UsageTag("litseg-train", "T", "stage3"), g(999, 99, 9.0))
    l03.record(UsageTag("litseg-lite", "A", "single-pass"), g(1200, 300, 3.0, hit=True))
    l03.record(UsageTag("litseg-lite", "A", "heldout-eval"), g(1200, 300, 3.0))  # evaluation: not timed
    l03.record(UsageTag("litseg-lite-base", "A", "heldout-eval"), g(1200, 300, 3.0))
    l04.record(UsageTag("lumber", "A", "04"), g(400, 10, 2.0))
    l04.record(UsageTag("lumber", "A", "04"), g(400, 10, 2.0))
    for nb, led in (("02", l02), ("03", l03), ("04", l04)):
        led.to_frame().to_csv(root / "usage" / f"{nb}.csv", index=False)
    save_chunks(root / "chunks" / "litseg.jsonl", [_c("A", "u1", 1, 50, "litseg"), _c("B", "u1", 1, 50, "litseg")])
    save_chunks(root / "chunks" / "litseg-lite.jsonl", [_c("A", "u1", 1, 50, "litseg-lite"),
                                                        _c("B", "u1", 1, 50, "litseg-lite")])
    save_chunks(root / "chunks" / "lumber.jsonl", [_c("A", "u1", 1, 50, "lumber")])
    table, note = efficiency.paper_efficiency_table("test", models={"litseg": "T-32B"})
    t = table.set_index("method")
    assert "1 unit(s) of 1 book(s)" in note
    assert t.loc["litseg", "calls"] == 3 and t.loc["litseg", "model_seconds"] == pytest.approx(9.0)
    assert t.loc["litseg", "computed_prefill_tokens"] == 1500 and t.loc["litseg", "model"] == "T-32B"
    assert t.loc["litseg-lite", "calls"] == 1 and t.loc["litseg-lite", "cache_hits"] == 1
    assert t.loc["litseg-lite", "model_seconds"] == pytest.approx(3.0)  # cached: cost as recorded
    assert t.loc["lumber", "calls"] == 2 and t.loc["lumber", "model_seconds_per_1k_sent"] == pytest.approx(80.0)
    assert set(t["sentences"]) == {50} and t["same_units"].all()
    ratios = efficiency.paper_ratio_table(table).set_index("ratio")
    assert ratios.loc["litseg-lite / litseg", "model_seconds_per_1k_sent"] == pytest.approx(3.0 / 9.0)
    assert ratios.loc["litseg-lite / lumber", "model_seconds_per_1k_sent"] == pytest.approx(3.0 / 4.0)
    assert ratios.loc["litseg-lite / litseg", "paper (end-to-end seconds)"] == 0.37
    # a warm rerun (every call now a cache hit, cost replayed) gives the same numbers
    warm = table.copy()
    assert efficiency.paper_efficiency_table("test", models={"litseg": "T-32B"})[0].equals(warm)


def test_untagged_usage_rows_stay_visible(fresh_dirs):
    root = outputs_dir("test") / "artifacts" / "usage"
    root.mkdir(parents=True)
    led = UsageLedger()
    led.record(UsageTag(stage="generate"), Generation("", 10, 2, 0.5))  # no method tag
    led.record(UsageTag("lumber", "bk", "04"), Generation("", 10, 2, 0.5))
    led.to_frame().to_csv(root / "05.csv", index=False)
    usage = efficiency.load_usage("test")
    assert set(usage["method"]) == {"lumber", efficiency.UNTAGGED}
    eff = efficiency.efficiency_table(usage, {})
    assert set(eff["method"]) == {"lumber", efficiency.UNTAGGED} and eff["calls"].sum() == 2


def _three_methods_on(root, units, usage_nb=("02", "03", "04")):
    """LitSeg, Lite and LumberChunker ledgers and chunk sets on ``units`` [(book, unit, sentences)]."""
    g = lambda s: Generation("", 100, 10, s)  # noqa: E731
    l02, l03, l04 = UsageLedger(), UsageLedger(), UsageLedger()
    for book, _, _ in units:
        for st in ("stage1", "stage2", "stage3"):
            l02.record(UsageTag("litseg", book, st), g(4.0))
        l03.record(UsageTag("litseg-lite", book, "single-pass"), g(2.0))
        l04.record(UsageTag("lumber", book, "04"), g(1.0))
    (root / "usage").mkdir(parents=True, exist_ok=True)
    for nb, led in zip(usage_nb, (l02, l03, l04)):
        led.to_frame().to_csv(root / "usage" / f"{nb}.csv", index=False)
    for m in ("litseg", "litseg-lite", "lumber"):
        save_chunks(root / "chunks" / f"{m}.jsonl", [_c(b, u, 1, n, m) for b, u, n in units])


def test_paper_efficiency_times_the_literaryqa_test_units_in_full(fresh_dirs):
    """§4.4: the paper times the LiteraryQA test set; GutenQA units that all three
    segmented are left out of the timing in ``full`` (timing_dataset="literaryqa")."""
    root = outputs_dir("test") / "artifacts"
    _three_methods_on(root, [("gutenqa:G", "u1", 40), ("literaryqa:L", "u1", 10)])
    assert efficiency.EfficiencyConfig.for_profile("full").timing_dataset == "literaryqa"
    assert efficiency.EfficiencyConfig.for_profile("test").timing_dataset == "all"
    lit, note = efficiency.paper_efficiency_table("test", timing_dataset="literaryqa")
    assert set(lit["sentences"]) == {10} and set(lit["books"]) == {1} and lit["same_units"].all()
    assert lit.set_index("method").loc["litseg", "calls"] == 3  # only the LiteraryQA book's ledger rows
    assert note.startswith("the literaryqa units all three methods segmented: 1 unit(s)")
    every, note_all = efficiency.paper_efficiency_table("test", timing_dataset="all")
    assert set(every["sentences"]) == {50} and "the profile's evaluation set" in note_all
    none, note_none = efficiency.paper_efficiency_table("test", timing_dataset="gutenqa")
    assert set(none["sentences"]) == {40}
    with pytest.raises(ValueError, match="timing_dataset"):
        efficiency.paper_efficiency_table("test", timing_dataset="narrativeqa")


def test_lite_litseg_ratio_is_reported_against_teacher_and_against_litseg_on_the_students_model(fresh_dirs):
    """§4.4: Lite/LitSeg twice — the configured teacher, and LitSeg's three stages on
    the student's model (notebook 08's ``litseg-student`` run), each labelled."""
    root = outputs_dir("test") / "artifacts"
    _three_methods_on(root, [("literaryqa:L", "u1", 10)])
    led = UsageLedger()
    for st in ("stage1", "stage2", "stage3"):  # the student's model is 4x faster than the teacher here
        led.record(UsageTag(efficiency.STUDENT_METHOD, "literaryqa:L", st), Generation("", 100, 10, 1.0))
    led.to_frame().to_csv(root / "usage" / "08.csv", index=False)
    save_chunks(root / "efficiency" / "chunks" / f"{efficiency.STUDENT_METHOD}.jsonl",
                [_c("literaryqa:L", "u1", 1, 10, efficiency.STUDENT_METHOD)])
    models = {"litseg": "Q-32B", "litseg-lite": "Q-8B", "lumber": "Q-8B", efficiency.STUDENT_METHOD: "Q-8B"}
    table, _ = efficiency.paper_efficiency_table("test", models=models, timing_dataset="literaryqa")
    t = table.set_index("method")
    assert t.loc[efficiency.STUDENT_METHOD, "model_seconds"] == pytest.approx(3.0)
    assert t.loc[efficiency.STUDENT_METHOD, "same_units"]
    r = efficiency.paper_ratio_table(table, models).set_index("ratio")
    assert r.loc["litseg-lite / litseg", "model_seconds_per_1k_sent"] == pytest.approx(2.0 / 12.0)
    assert r.loc[f"litseg-lite / {efficiency.STUDENT_METHOD}", "model_seconds_per_1k_sent"] == pytest.approx(2.0 / 3.0)
    assert "configured teacher (Q-32B)" in r.loc["litseg-lite / litseg", "denominator"]
    assert "student's model" in r.loc[f"litseg-lite / {efficiency.STUDENT_METHOD}", "denominator"]
    assert list(r["paper (end-to-end seconds)"]) == [0.37, 0.37, 0.70]
    # switched off: no control row (a stale chunk file of an earlier run is not read)
    off, _ = efficiency.paper_efficiency_table("test", timing_dataset="literaryqa", controls=False)
    assert efficiency.STUDENT_METHOD not in set(off["method"])


def test_timing_unit_pairs_is_the_one_unit_lookup_of_notebook_08(monkeypatch):
    """LitSeg on the student's model and the paired measurement take their §4.4 units from one helper:
    (book, unit) order, every missing unit named, each caller's own error type."""
    books = [make_book("gutenqa:B", units=2, n=3), make_book("gutenqa:A", units=3, n=3)]
    monkeypatch.setattr(efficiency, "load_corpus", lambda cfg: books)
    corpus = LitSegConfig.for_profile("test").corpus
    units = {("gutenqa:B", "u0001"), ("gutenqa:A", "u0002"), ("gutenqa:A", "u0000")}
    pairs = efficiency.timing_unit_pairs(corpus, units, "test")
    assert [(b.book_id, u.unit_id) for b, u in pairs] == sorted(units)
    assert [(b.book_id, u.unit_id) for b, u in efficiency.paired_pairs("test", units, max_units=2)] == sorted(units)[:2]
    gone = units | {("gutenqa:A", "u0009"), ("gutenqa:Z", "u0000")}
    with pytest.raises(ValueError, match=r"\['gutenqa:A/u0009', 'gutenqa:Z/u0000'\] are not in profile 'test'") as e:
        efficiency.timing_unit_pairs(corpus, gone, "test")
    assert type(e.value) is ValueError
    with pytest.raises(efficiency.PairedTimingError, match="rerun notebooks 01-04"):
        efficiency.paired_pairs("test", gone)
