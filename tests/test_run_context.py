"""RunContext writes through the existing save helpers (same files, same bytes) and takeaways are
computed from the table."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from litseg_nb.core import artifacts  # noqa: E402
from litseg_nb.llm.base import Generation, UsageLedger, UsageTag  # noqa: E402
from litseg_nb.core.paths import outputs_dir  # noqa: E402
from litseg_nb.front.run_context import RunContext  # noqa: E402
from litseg_nb.front.run_context import best_per_metric, takeaway_lines  # noqa: E402


def _ledger(method: str, tokens: int) -> UsageLedger:
    ledger = UsageLedger()
    ledger.record(UsageTag(method, "b1", "stage1"),
                  Generation(text="x", prompt_tokens=tokens, completion_tokens=2, latency_s=0.5))
    return ledger


def test_saves_match_the_helpers_byte_for_byte(fresh_dirs):
    df = pd.DataFrame({"method": ["a", "b"], "MRR": [0.5, 0.25]})
    run = RunContext("test", "05_rag_evaluation", "profile=test | LLM=tiny")
    assert run.save_table(df, "05_x", "q in scope") is df  # a cell ending in a save shows the table
    assert list(run.save_table(df, "05_w", show=["MRR"]).columns) == ["MRR"]  # the file keeps every column
    assert list(pd.read_csv(outputs_dir("test") / "tables" / "05_w.csv").columns) == ["method", "MRR"]
    with pytest.raises(KeyError, match="no column"):
        run.save_table(df, "05_v", show=["nDCG"])
    artifacts.save_table(df, "05_y", "test", "profile=test | LLM=tiny | q in scope")
    tables = outputs_dir("test") / "tables"
    assert (tables / "05_x.csv").read_bytes() == (tables / "05_y.csv").read_bytes()
    assert (tables / "05_x.md").read_text().replace("05_x", "05_y") == (tables / "05_y.md").read_text()
    assert (tables / "05_x.label.txt").read_text() == "profile=test | LLM=tiny | q in scope\n"
    run.save_table(df, "05_z", label="independent of the profile")  # label= replaces the run's label
    assert (tables / "05_z.label.txt").read_text() == "independent of the profile\n"
    noted = run.with_note("fallback set")  # a context whose label is extended for every later call
    assert noted.label == "profile=test | LLM=tiny | fallback set" and run.label == "profile=test | LLM=tiny"
    figs = {}
    assert run.save_figure(plt.figure(), "05_f0") is None  # no {'png': PosixPath(...)} under a figure
    plt.close("all")
    for name, save in (("05_f1", lambda f: run.save_figure(f, "05_f1", "k=20")),
                       ("05_f2", lambda f: artifacts.save_figure(f, "05_f2", "test", "profile=test | LLM=tiny | k=20"))):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([1, 2, 3])
        save(fig)
        plt.close(fig)
        figs[name] = (outputs_dir("test") / "figures" / f"{name}.png").read_bytes()
    assert figs["05_f1"] == figs["05_f2"]


def test_usage_and_manifest(fresh_dirs):
    run = RunContext("test", "07_ablations", "profile=test")
    a, b = _ledger("lite", 10), _ledger("judge", 7)
    usage = run.save_usage(a, b)
    path = outputs_dir("test") / "artifacts" / "usage" / "07.csv"
    written = pd.read_csv(path)
    assert list(written["method"]) == ["lite", "judge"] and list(written["prompt_tokens"]) == [10, 7]
    assert len(usage) == 2
    # one ledger: the same bytes the notebooks wrote before (ledger.to_frame().to_csv(index=False))
    run.save_usage(a)
    assert path.read_text() == a.to_frame().to_csv(index=False)
    with pytest.raises(ValueError, match="at least one"):
        run.save_usage()
    assert run.write_manifest({"profile": "test", "seed": 0}, extra={"units": 3}) is None  # a last cell shows nothing
    m = run.manifest_path()
    assert m == outputs_dir("test") / "manifests" / "07_ablations.json"
    assert json.loads(m.read_text())["units"] == 3


def test_for_config_uses_describe():
    class Cfg:
        profile = "smoke"

        def describe(self):
            return "profile=smoke | LLM=SmolLM2"

    run = RunContext.for_config("01_preprocessing", Cfg(), "n=2000 words")
    assert run.label == "profile=smoke | LLM=SmolLM2 | n=2000 words" and run.notebook == "01_preprocessing"


def test_takeaways_from_the_table(capsys):
    t = pd.DataFrame({"dataset": ["g", "g", "g", "l", "l"], "method": ["a", "b", "c", "a", "b"],
                      "MRR": [0.5, 0.25, None, 0.1, 0.3], "sim": [0.4, 0.2, 0.3, 0.5, 0.5]})
    best = best_per_metric(t, {"MRR": "max", "sim": "min"}, group="dataset")
    g_mrr = best[(best.dataset == "g") & (best.metric == "MRR")].iloc[0]
    assert (g_mrr.best, g_mrr.value, g_mrr.runner_up, g_mrr.margin) == ("a", 0.5, "b", 0.25)
    assert (g_mrr.n_compared, g_mrr.n_missing) == (2, 1)
    assert best[(best.dataset == "g") & (best.metric == "sim")].iloc[0].best == "b"  # lower is better
    l_sim = best[(best.dataset == "l") & (best.metric == "sim")].iloc[0]
    assert l_sim.best == "a, b" and pd.isna(l_sim.runner_up)  # a tie is named, not broken
    assert best[(best.dataset == "l") & (best.metric == "MRR")].iloc[0].best == "b"
    lines = takeaway_lines(best)
    assert lines[0] == "[g] MRR (higher is better): best a = 0.5, next b = 0.25 (margin 0.25); 2 compared, 1 without a value"
    run = RunContext("test", "05_rag_evaluation", "profile=test | LLM=tiny")
    run.takeaways(t, {"MRR": "max"}, group="dataset")
    out = capsys.readouterr().out
    assert "(profile=test | LLM=tiny)" in out and "[l] MRR (higher is better): best b = 0.3" in out
    sizes = takeaway_lines(best_per_metric(t, {"sim": "smallest"}, group="dataset"))
    assert sizes[0] == "[g] sim (smallest first): smallest b = 0.2, next c = 0.3 (margin 0.1); 3 compared"
    many = pd.DataFrame({"method": list("abcdef"), "x": [1.0] * 6})
    assert takeaway_lines(best_per_metric(many, {"x": "max"}))[0].startswith("x (higher is better): best a, b, c and 3 more = 1 (all rows tie)")
    with pytest.raises(KeyError, match="no column \\['MRR@20'\\]"):
        best_per_metric(t, {"MRR@20": "max"})
    with pytest.raises(ValueError, match="direction"):
        best_per_metric(t, {"MRR": "up"})
