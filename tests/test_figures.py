"""Saved figures: the label footer sits below every other text, no text overlaps, atomic files."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from litseg_nb.core.artifacts import FOOTER_GID, save_figure  # noqa: E402
from checks import text_overlaps  # noqa: E402
from fakes import chunks_at, window_books  # noqa: E402

LABEL = ("profile=test | LLM=tiny-random (hf) | embeddings=all-MiniLM-L6-v2 | data=gutenqa+gutenberg "
         "max_books=2 max_units/book=2 (questions) | n=300 words | extra words to make it long enough to wrap")
METHODS = ["litseg", "litseg-lite", "lumberchunker", "meta-chunking-margin", "meta-chunking-perplexity",
           "proposition", "litseg-calibration", "semantic", "recursive", "token"]


def unit_lengths_figure():  # notebook 01's figure, as the notebook draws it
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for ds in ("gutenqa", "gutenberg"):
        ax.hist(rng.integers(200, 300, 12), bins=30, alpha=0.55, label=f"{ds} (12 units)")
    ax.axvline(300, ls="--", color="k", lw=1, label="n = 300 words")
    ax.set_xlabel("words per unit"); ax.set_ylabel("units"); ax.legend(fontsize=8)
    ax.set_title("Unit lengths after structure + recursive splitting")
    return fig


NOT_SEGMENTING = ["rag-generate", "rag-pairwise-judge", "litseg-calibration", "llm-rater", "litseg-train"]


def cost_table():  # 08_llm_cost's shape: stages that segmented nothing have no per-1,000-sentence value
    nan = float("nan")
    return pd.DataFrame({"method": METHODS[:7] + NOT_SEGMENTING,
                         "prompt_tokens_per_1k_sent": [*np.linspace(1e3, 9e6, 7), *[nan] * 5],
                         "completion_tokens_per_1k_sent": [*np.linspace(1e2, 9e5, 7), *[nan] * 5]})


def llm_cost_figure():  # notebook 08's figure
    from litseg_nb.evaluation import efficiency

    return efficiency.plot_cost(cost_table()).figure


def ablation_figure():
    from litseg_nb.evaluation.ablation import plot_ablation

    variants = ["full", "no-context", "no-subtitle", "no-format-reward", "sft-only", "grpo-only", "base"]
    b = pd.DataFrame({"variant": variants, "boundary_similarity": np.linspace(0.2, 0.5, 7)})
    r = pd.DataFrame({"variant": variants, "MRR": np.linspace(0.1, 0.9, 7)})
    return plot_ablation(b, r)


def ablation_figure_without_boundaries():  # the test profile: no inner boundary, NaN similarity
    from litseg_nb.evaluation.ablation import plot_ablation

    variants = ["LitSeg-Lite", "w/o GRPO", "w/o FT", "+w/o Theo.S.1", "+w/o Theory"]
    b = pd.DataFrame({"variant": variants, "boundary_similarity": [float("nan")] * 5})
    r = pd.DataFrame({"variant": variants, "MRR": [0.3, 0.3, float("nan"), 0.2, 0.1]})
    return plot_ablation(b, r)


def ablation_figure_two_datasets():  # the full profile: Table 6 per dataset, Table 7 on GutenQA
    from litseg_nb.evaluation.ablation import plot_ablation

    v = ["LitSeg-Lite", "w/o GRPO", "w/o FT", "+w/o Theory"]
    b = pd.DataFrame({"variant": v * 2, "dataset": ["gutenqa"] * 4 + ["literaryqa"] * 4,
                      "boundary_similarity": [0.4025, 0.41, 0.43, 0.44, 0.3699, 0.3711, 0.3989, 0.3991]})
    r = pd.DataFrame({"variant": v, "dataset": "gutenqa", "MRR": [0.683, 0.675, 0.646, 0.632]})
    return plot_ablation(b, r)


def dcg_figure(methods=METHODS):
    from litseg_nb.rag.report import plot_dcg_recall

    rows = []
    for m in methods:
        row = {"method": m, "mode": "hybrid"}
        for k in (1, 2, 5, 10, 20):
            row[f"DCG@{k}"], row[f"Recall@{k}"] = 0.1 * np.log1p(k), min(1.0, 0.05 * k)
        rows.append(row)
    return plot_dcg_recall(pd.DataFrame(rows), "hybrid")


def segment_length_figure():
    from litseg_nb.litseg.report import length_figure

    rng = np.random.default_rng(1)
    seg = pd.DataFrame({"len_sentences": rng.integers(1, 30, 80), "len_tokens": rng.integers(20, 900, 80),
                        "structured_output": [True, False] * 40})
    return length_figure(seg, "LitSeg segment lengths — tiny-random (hf), test profile")


def training_figure():
    from litseg_nb.lite.segmenter import plot_training_curves

    sft = pd.DataFrame({"step": [1, 2, 3], "loss": [2.0, 1.5, 1.2]})
    grpo = pd.DataFrame({"step": [1, 2], "loss": [0.1, 0.05], "reward": [0.2, 0.4], "kl": [0.0, 0.01],
                         "rewards/format_reward/mean": [0.5, 0.6], "rewards/narratological_reward/mean": [0.1, 0.2]})
    return plot_training_curves(sft, grpo)


SMOKE_METHODS = ["token", "recursive", "semantic", "paragraph", "texttiling", "c99", "boundary-model", "perplexity",
                 "margin", "lumber", "perplexity+merge", "margin+merge", "lumber+merge", "proposition",
                 "perplexity+merge+completion", "litseg", "litseg-lite",
                 *[f"lib:{lib}-{kind}" for lib in ("chonkie", "langchain", "llamaindex")
                   for kind in ("recursive", "semantic", "token", "sentence")], "recursive@published"]
assert len(SMOKE_METHODS) == 30  # as many chunk sets as a smoke run evaluates


def smoke_dcg_figure():  # notebook 05 at smoke scale: 30 chunk sets, 5 questions, so many curves coincide
    from litseg_nb.rag.report import plot_dcg_recall

    rows = []
    for i, m in enumerate(SMOKE_METHODS):
        row = {"method": m, "mode": "hybrid", "n_questions": 5}
        for k in (1, 2, 5, 10, 20):
            row[f"DCG@{k}"] = row[f"Recall@{k}"] = min(1.0, (i % 12 + 1) * k / 60)  # 12 distinct curves
        rows.append(row)
    return plot_dcg_recall(pd.DataFrame(rows), "hybrid")


def smoke_boundary_positions_figure():  # notebook 06 at smoke scale: 30 chunk sets on one 16-sentence unit
    from litseg_nb.evaluation.segment_quality import plot_boundary_positions

    book = window_books(n_books=1, per_book=1, n=16, gold_per_window=0)[0]
    unit = book.units[0]
    starts = {"litseg": [5], "lumber": [], "recursive": [], "token": [9]}  # LumberChunker kept the unit whole
    for i, m in enumerate(SMOKE_METHODS):
        starts.setdefault(m, [] if i % 2 else [2 + i % 10])  # half of them never cut it
    sets = {m: chunks_at(book, unit, s, m) for m, s in starts.items()}
    return plot_boundary_positions(book, unit.unit_id, sets, reference="litseg")


def duplicated_cost_figure():  # notebook 08 at smoke scale: teacher = student, ablation variants in the ledgers
    from litseg_nb.evaluation import efficiency

    names = ["litseg", "litseg-student", "litseg-lite", "lite", "wo-grpo", "wo-ft", "lumber", "margin", "perplexity",
             "proposition", "lib:chonkie-slumber", "wo-theory"]
    cost = [600, 600, 200, 260, 260, 260, 130, 250, 340, 120, 250, 100]
    t = pd.DataFrame({"method": names, "calls": [6, 6, 2, 1, 1, 1, 6, 20, 6, 14, 13, 1], "sentences": 22.0,
                      "prompt_tokens_per_1k_sent": [1000.0 * c for c in cost],
                      "completion_tokens_per_1k_sent": [100.0 * c for c in cost]})
    return efficiency.plot_cost(t).figure


def readability_problems(fig) -> list[str]:
    """What makes a figure unreadable: a panel with more than 8 series (lines, bar groups, scatter rows or
    legend entries), a series with nothing drawn, a panel with nothing drawn."""
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer

    out = []
    for i, ax in enumerate(fig.axes):
        lines = [ln for ln in ax.get_lines() if np.isfinite(np.asarray(ln.get_ydata(), float)).any()]
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
        legend = ax.get_legend()
        entries = len(legend.get_texts()) if legend else 0
        n = max(len(lines), len(bars), len(scatters), entries)
        if n > 8:
            out.append(f"panel {i} ({ax.get_title()!r}): {n} series")
        if any(len(c.get_offsets()) == 0 for c in scatters):
            out.append(f"panel {i} ({ax.get_title()!r}): a scatter row with no point")
        drawn = lines or any(p.get_width() > 0 and p.get_height() > 0 for p in ax.patches) or \
            any(len(c.get_offsets()) for c in scatters) or ax.images
        if ax.axison and not drawn:
            out.append(f"panel {i} ({ax.get_title()!r}): nothing drawn")
    for legend in fig.legends:
        if len(legend.get_texts()) > 8:
            out.append(f"figure legend: {len(legend.get_texts())} entries")
    return out


FIGURES = {"01_unit_lengths": unit_lengths_figure, "08_llm_cost": llm_cost_figure, "07_ablation": ablation_figure,
           "07_ablation_nan": ablation_figure_without_boundaries, "07_ablation_two_datasets": ablation_figure_two_datasets,
           "05_dcg_recall_hybrid": dcg_figure, "02_segment_lengths": segment_length_figure,
           "03_training_curves": training_figure, "05_dcg_recall_smoke": smoke_dcg_figure,
           "06_boundary_positions_smoke": smoke_boundary_positions_figure, "08_llm_cost_smoke": duplicated_cost_figure}

#: the figures of notebooks 05-08 (their package functions), at the scale of a smoke run
NOTEBOOK_FIGURES = ["05_dcg_recall_hybrid", "05_dcg_recall_smoke", "06_boundary_positions_smoke", "07_ablation",
                    "07_ablation_nan", "07_ablation_two_datasets", "08_llm_cost", "08_llm_cost_smoke"]


@pytest.mark.parametrize("name", NOTEBOOK_FIGURES)
def test_notebook_figure_has_at_most_8_series_and_no_empty_panel(name, fresh_dirs):
    fig = FIGURES[name]()
    assert readability_problems(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("name", FIGURES)
def test_saved_figure_has_no_overlapping_text(name, fresh_dirs):
    fig = FIGURES[name]()
    paths = save_figure(fig, name, "test", LABEL)
    assert text_overlaps(fig) == []
    footer = [t for t in fig.texts if t.get_gid() == FOOTER_GID]
    assert len(footer) == 1
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    fb = footer[0].get_window_extent(r)
    lowest = min(t.get_window_extent(r).y0 for ax in fig.axes for t in
                 [ax.xaxis.label, *ax.get_xticklabels()] if t.get_text())
    assert fb.y1 <= lowest  # the footer is below every x label and tick label
    for p in paths.values():
        assert p.stat().st_size > 0
    assert not [p for p in paths["png"].parent.iterdir() if ".tmp-" in p.name]
    plt.close(fig)


def test_overlap_check_sees_the_old_footer_placement():
    """The old footer (fig.text at y=0.005) covered the x-axis label of notebook 01's figure."""
    fig = unit_lengths_figure()
    fig.text(0.01, 0.005, LABEL, fontsize=7, ha="left", va="bottom")
    assert any("words per unit" in pair for pair in text_overlaps(fig))
    plt.close(fig)


def test_saving_twice_keeps_one_footer(fresh_dirs):
    fig = unit_lengths_figure()
    save_figure(fig, "x", "test", LABEL)
    save_figure(fig, "x", "test", LABEL)
    assert len([t for t in fig.texts if t.get_gid() == FOOTER_GID]) == 1
    plt.close(fig)


def test_ablation_figure_draws_no_empty_panel_and_names_the_measure_it_leaves_out(fresh_dirs):
    """Every variant without an inner boundary (the small profiles: whole-unit fallbacks): Table 6's panel used
    to be drawn all "n/a"; now only the measures with a value are panels, the other is named under them."""
    fig = ablation_figure_without_boundaries()
    fig.canvas.draw()
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "Table 7 shape"
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["LitSeg-Lite", "w/o GRPO", "w/o FT", "+w/o Theo.S.1", "+w/o Theory"][::-1] or \
        sorted(labels) == sorted(["LitSeg-Lite", "w/o GRPO", "w/o FT", "+w/o Theo.S.1", "+w/o Theory"])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("n/a") == 1 and texts.count("0.3") == 2  # every bar's value written beside it
    assert any("Table 6 shape not drawn: no variant put a boundary inside a unit" in t for t in texts)
    assert readability_problems(fig) == []
    plt.close(fig)


def test_ablation_figure_says_when_all_variants_tie(fresh_dirs):
    from litseg_nb.evaluation.ablation import plot_ablation

    variants = ["LitSeg-Lite", "w/o GRPO", "w/o FT"]
    b = pd.DataFrame({"variant": variants, "dataset": "gutenqa", "boundary_similarity": [float("nan")] * 3})
    r = pd.DataFrame({"variant": variants, "dataset": "gutenqa", "MRR": [1 / 3] * 3})
    v = pd.DataFrame({"variant": variants, "segments_per_unit": [1.0] * 3})
    fig = plot_ablation(b, r, v)
    assert [ax.get_title() for ax in fig.axes] == ["Table 7 shape (all variants tie)",
                                                   "Segments per unit (all variants tie)"]
    assert readability_problems(fig) == []
    plt.close(fig)


def test_cost_figure_draws_no_empty_rows_and_names_the_stages_it_leaves_out(fresh_dirs):
    """The ledger's non-segmentation stages (RAG, judges, calibration, ...) have no per-1,000-sentence
    value: they used to be drawn as empty bars; now only methods with a cost are rows, the rest named."""
    fig = llm_cost_figure()
    fig.canvas.draw()
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows[:2] == ["litseg", "litseg-lite"] and sorted(rows) == sorted(METHODS[:7])  # the paper's first
    assert all(p.get_width() > 0 for p in ax.patches)  # every drawn bar has a length
    note = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert "not shown (5: no sentences segmented" in note and all(m in note for m in NOT_SEGMENTING)
    r = fig.canvas.get_renderer()
    assert ax.texts[0].get_window_extent(r).y1 <= ax.xaxis.label.get_window_extent(r).y0  # under the x label
    assert text_overlaps(fig) == []
    plt.close(fig)


def test_dcg_recall_legend_sits_under_both_panels_with_many_methods(fresh_dirs):
    """The smoke run compares 27 chunk sets: the legend used to sit in the Recall panel and cover it."""
    methods = METHODS + [f"lib:chonkie-{i}" for i in range(10)] + ["recursive@published", "semantic@published",
                                                                    "perplexity+merge+completion-long-name"] * 2
    fig = dcg_figure(methods)
    paths = save_figure(fig, "05_dcg_recall_many", "test", LABEL)
    r = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    assert len(legends) == 1 and len(legends[0].get_texts()) <= 8  # one legend for both panels
    legend = legends[0].get_window_extent(r)
    for ax in fig.axes:  # the whole panel, its tick and axis labels included
        panel = ax.get_tightbbox(r)
        assert legend.y1 <= panel.y0, (legend, panel)
    footer = next(t for t in fig.texts if t.get_gid() == FOOTER_GID).get_window_extent(r)
    assert footer.y1 <= legend.y0
    assert text_overlaps(fig) == []
    assert paths["png"].stat().st_size > 0
    plt.close(fig)


def test_budget_curves_figure_is_readable(tmp_path, monkeypatch):
    """Notebook 05's tier-A figure: at most 8 lines, budget ticks without minor labels, no overlapping text."""
    from litseg_nb.rag.benchmark import plot_budget_curves

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path))
    methods = ["recursive", "token", "paragraph", "semantic", "texttiling", "c99", "boundary-model"]
    rows = [{"mode": "hybrid", "dataset": ds, "method": m, "n_questions": 30, **{f"hit@{b}": (i + 1) * b / 20000
                                                                                  for b in (256, 512, 1024, 2048)}}
            for ds in ("gutenqa", "literaryqa") for i, m in enumerate(methods)]
    fig = plot_budget_curves(pd.DataFrame(rows), methods)
    assert [len(ax.get_lines()) for ax in fig.axes] == [7, 7]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["256", "512", "1024", "2048"]
    save_figure(fig, "budget", "test", LABEL)
    assert text_overlaps(fig) == []
    with pytest.raises(ValueError, match="at most 8"):
        plot_budget_curves(pd.DataFrame(rows), methods + ["a", "b"])
    plt.close(fig)


def test_dcg_figure_shows_the_papers_methods_and_the_best_of_the_rest(fresh_dirs):
    """Smoke scale: 30 chunk sets on 5 questions used to be 30 overlapping lines and a 30-entry legend."""
    fig = smoke_dcg_figure()
    legend = fig.legends[0]
    labels = [t.get_text().replace("\n", " ") for t in legend.get_texts()]
    assert len(labels) == 8
    shown = [m for lab in labels for m in lab.split(" = ")]
    assert {"litseg", "litseg-lite", "lumber", "recursive"} <= set(shown)  # the anchors, whatever their score
    # then the best of the rest: curve i % 12 == 11 is the highest, and every set with that curve shares a line
    best = [m for i, m in enumerate(SMOKE_METHODS) if i % 12 == 11]
    assert any(lab.split(" = ") == best for lab in labels)
    assert len(fig.axes[0].get_lines()) == 8
    assert all(ax.get_title().endswith("(hybrid, 5 questions)") for ax in fig.axes)
    note = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    left_out = [m for m in SMOKE_METHODS if m not in shown]
    assert f"not shown: {len(left_out)} more chunk sets" in note and all(m in note for m in left_out)
    assert "table 05_retrieval_all_modes" in note
    save_figure(fig, "05_dcg_smoke", "test", LABEL)
    assert text_overlaps(fig) == []
    plt.close(fig)


def test_boundary_positions_draws_only_methods_that_cut_and_names_the_others(fresh_dirs):
    """Smoke scale: one unit, 30 chunk sets, most of them one chunk: 30 mostly empty rows before."""
    fig = smoke_boundary_positions_figure()
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert len(rows) == 8 and rows[:2] == ["litseg", "litseg-lite"]  # the reference, then an anchor that cuts it
    assert "lumber" not in rows and "recursive" not in rows  # they keep the unit whole
    assert all(len(c.get_offsets()) for c in ax.collections)  # every drawn row has a boundary
    note = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert "no boundary inside this unit (one chunk): lumber, recursive" in note
    assert "not shown:" in note
    save_figure(fig, "06_positions_smoke", "test", LABEL)
    assert text_overlaps(fig) == []
    assert readability_problems(fig) == []
    plt.close(fig)


def test_comparison_unit_prefers_the_unit_the_methods_cut(fresh_dirs):
    """Not the unit with the most reference boundaries, where the others keep the text whole."""
    from litseg_nb.evaluation.segment_quality import comparison_unit

    book = window_books(n_books=1, per_book=2, n=16, gold_per_window=0)[0]
    u0, u1 = book.units
    sets = {"litseg": chunks_at(book, u0, [5, 9], "litseg") + chunks_at(book, u1, [5], "litseg"),
            "a": chunks_at(book, u0, [], "a") + chunks_at(book, u1, [3], "a"),
            "b": chunks_at(book, u0, [], "b") + chunks_at(book, u1, [9], "b")}
    assert comparison_unit(sets) == (book.book_id, u1.unit_id)


def test_cost_figure_gives_one_row_to_methods_with_the_same_cost(fresh_dirs):
    """Smoke scale: teacher and student are one model (LitSeg on the student replays LitSeg's cost) and three
    ablation variants of the student cost the same: they were one bar each under several names."""
    fig = duplicated_cost_figure()
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows[:3] == ["litseg = litseg-student", "litseg-lite", "lumber"]  # §4.4's methods on top
    assert len(rows) <= 8 and len(rows) == len(set(rows))
    assert all(len(r.split(" = ")) == len(set(r.split(" = "))) for r in rows)
    shown = [m for r in rows for m in r.split(" = ")]
    note = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert all(m in shown or m in note for m in ["lite", "wo-grpo", "wo-ft", "margin", "perplexity", "proposition",
                                               "lib:chonkie-slumber", "wo-theory"])
    assert "every one is in table 08_llm_cost" in note
    assert readability_problems(fig) == []
    plt.close(fig)


def test_training_curves_draw_only_what_was_logged():
    """A one-step run without KL (the CPU profiles): three panels, each with its point, none empty."""
    from litseg_nb.lite.segmenter import plot_training_curves

    sft = pd.DataFrame({"step": [1], "loss": [0.76]})
    grpo = pd.DataFrame({"step": [1], "loss": [0.0], "reward": [0.0], "kl": [float("nan")],
                         "rewards/format_reward/mean": [0.0], "rewards/narratological_reward/mean": [0.0]})
    fig = plot_training_curves(sft, grpo)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["SFT loss (completion tokens)", "GRPO (DAPO) loss", "GRPO rewards (mean over rollouts)"]
    assert all(ax.lines for ax in fig.axes)
    assert "SFT loss: 0.76" in [t.get_text() for t in fig.axes[0].texts]
    assert text_overlaps(fig) == []
    plt.close(fig)
    full = training_figure()  # several steps with KL: four panels
    assert len(full.axes) == 4 and all(ax.lines for ax in full.axes)
    plt.close(full)
