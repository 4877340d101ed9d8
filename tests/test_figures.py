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


FIGURES = {"01_unit_lengths": unit_lengths_figure, "08_llm_cost": llm_cost_figure, "07_ablation": ablation_figure,
           "07_ablation_nan": ablation_figure_without_boundaries,
           "05_dcg_recall_hybrid": dcg_figure, "02_segment_lengths": segment_length_figure,
           "03_training_curves": training_figure}


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


def test_ablation_figure_names_every_variant_even_without_values(fresh_dirs):
    fig = ablation_figure_without_boundaries()
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sorted(labels) == sorted(["LitSeg-Lite", "w/o GRPO", "w/o FT", "+w/o Theo.S.1", "+w/o Theory"])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("n/a (no inner boundary)") == 5 and texts.count("n/a") == 1
    plt.close(fig)


def test_cost_figure_draws_no_empty_rows_and_names_the_stages_it_leaves_out(fresh_dirs):
    """The ledger's non-segmentation stages (RAG, judges, calibration, ...) have no per-1,000-sentence
    value: they used to be drawn as empty bars; now only methods with a cost are rows, the rest named."""
    fig = llm_cost_figure()
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == METHODS[:7]
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
    assert len(legends) == 1 and len(legends[0].get_texts()) == len(methods)  # one legend for both panels
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
