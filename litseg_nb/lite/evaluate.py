"""Notebook 03's evaluation helpers: corpus for Lite, before/after table, curves, teacher vs student.

* :func:`load_lite_books` – the evaluated and the training books exactly as notebook 02 indexed them
  (``LitSegConfig.corpus`` and ``LitSegConfig.train_corpus``); they never share a book.
* :func:`evaluation_pairs` – the units the student is evaluated on: LitSeg's annotated units (the
  teacher's segmentation exists for each), never a trained unit.
* :func:`evaluate_segmenter` – runs a :class:`~litseg_nb.lite.segmenter.LiteSegmenter` on held-out
  units and scores its first replies with the GRPO reward (format + narratological).
* :func:`teacher_rows` – the same metrics for the teacher (LitSeg annotations) on the same units.
* :func:`before_after_table` – one row per system: first-try validity, fallback rate, rewards,
  segments per unit.
* :func:`plot_training_curves` – SFT loss; GRPO loss, reward components, KL.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

from ..core.schema import Book, Unit
from .config import LiteConfig
from .data import single_pass_target, target_text, view_annotation, lite_conversation
from .rewards import NarratologicalReward, format_reward_breakdown
from .segmenter import LiteSegmenter, LiteUnitResult
from ..corpus import load_corpus


def _book_names(b: Book) -> set[str]:
    return {b.book_id, b.book_id.split(":", 1)[-1].lower(), b.title.strip().lower(),
            str(b.meta.get("gutenqa_name") or b.title).strip().lower()}


def load_lite_books(cfg: LiteConfig, need_extra: bool = True) -> tuple[list[Book], list[Book]]:
    """``(evaluation_books, training_books)`` as notebook 02 indexed them (same units and sentence
    indices): LitSeg's corpus and its ``train_corpus`` of the annotations' profile
    (``need_extra=False``: the evaluation books only).

    The split is by book: a training book that is also an evaluation book (same id or title, e.g.
    another edition) is an error naming it.
    """
    lit = cfg.teacher()
    evaluated = load_corpus(lit.corpus)
    if not need_extra:
        return evaluated, []
    training = load_corpus(lit.train_corpus)
    names = set().union(*(_book_names(b) for b in evaluated)) if evaluated else set()
    shared = [b.book_id for b in training if _book_names(b) & names]
    if shared:
        raise ValueError(f"Lite training book(s) {shared} are also evaluated (LitSegConfig.corpus); "
                         "the training corpus must hold other books")
    return evaluated, training


def evaluation_pairs(records: Sequence[Mapping[str, Any]], books: Sequence[Book],
                     max_units: int = 0) -> list[tuple[Book, Unit]]:
    """The annotated (``annotations.jsonl``) units, in record order, first ``max_units`` (0 = all)."""
    by_id = {b.book_id: b for b in books}
    pairs = []
    for r in records:
        if r["book_id"] not in by_id:
            raise ValueError(f"annotation of unknown book {r['book_id']!r} (corpus settings changed since notebook 02?)")
        pairs.append((by_id[r["book_id"]], by_id[r["book_id"]].unit(r["unit_id"])))
    return pairs[:max_units] if max_units else pairs


def score_reply(text: str, n: int, passage: str, system_prompt: str,
                judge: NarratologicalReward | None, weights: Sequence[float]) -> dict[str, float]:
    """Format reward, narratological reward (nan without a judge) and their weighted sum."""
    fmt = format_reward_breakdown(text, n)["total"]
    narr = judge.score_one(text, passage, system_prompt, n) if judge is not None else float("nan")
    total = weights[0] * fmt + (weights[1] * narr if judge is not None else 0.0)
    return {"format_reward": fmt, "narratological_reward": narr,
            "reward": total if judge is not None else float("nan")}


def rows_from_results(system: str, pairs: Sequence[tuple[Book, Unit]], results: Sequence[LiteUnitResult],
                      judge: NarratologicalReward | None, weights: Sequence[float],
                      length_reference: int | Mapping[str, int] = 100) -> list[dict[str, Any]]:
    """Per-unit rows of a finished Lite run; the FIRST reply is scored with the GRPO reward."""
    rows = []
    for (book, unit), r in zip(pairs, results):
        conv = lite_conversation(book, unit, length_reference=length_reference)
        sc = score_reply(r.replies[0], unit.n_sentences, conv[1]["content"].split("\n", 1)[-1],
                         conv[0]["content"], judge, weights)
        rows.append({"system": system, "book_id": book.book_id, "unit_id": unit.unit_id,
                     "first_try_valid": r.first_try_valid, "fallback": r.fallback,
                     "segments": r.n_segments, "attempts": r.attempts,
                     "completion_tokens": r.completion_tokens, **sc})
    return rows


def evaluate_segmenter(system: str, segmenter: LiteSegmenter, pairs: Sequence[tuple[Book, Unit]],
                       judge: NarratologicalReward | None, weights: Sequence[float]):
    """Segment ``pairs``; per-unit rows (first reply scored with the GRPO reward), chunks, results.
    (A trained segmenter refuses its training units: :mod:`litseg_nb.lite.heldout`.)"""
    chunks, results = segmenter.segment_units(pairs)
    return (rows_from_results(system, pairs, results, judge, weights, segmenter.length_reference),
            chunks, results)


def teacher_rows(records: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[Book, Unit]],
                 judge: NarratologicalReward | None, weights: Sequence[float],
                 length_reference: int | Mapping[str, int] = 100) -> list[dict[str, Any]]:
    """The teacher (LitSeg, 3 calls/unit) on the same units, from its annotation records.

    First-try validity = every stage valid at its first attempt; the reward is computed on the
    teacher's final segments reformatted into the single-pass schema (so it is comparable).
    Units without an annotation are skipped.
    """
    by_key = {(r["book_id"], r["unit_id"]): r for r in records}
    rows = []
    for book, unit in pairs:
        rec = by_key.get((book.book_id, unit.unit_id))
        if rec is None:
            continue
        view = view_annotation(rec)
        text = target_text(single_pass_target(view, unit.title))
        conv = lite_conversation(book, unit, length_reference=length_reference)
        sc = score_reply(text, unit.n_sentences, conv[1]["content"].split("\n", 1)[-1],
                         conv[0]["content"], judge, weights)
        ftv = rec.get("first_try_valid") or {}
        rows.append({"system": "teacher (LitSeg)", "book_id": book.book_id, "unit_id": unit.unit_id,
                     "first_try_valid": bool(ftv) and all(ftv.values()), "fallback": rec.get("fallback"),
                     "segments": len(rec["segments"]), "attempts": (rec.get("tokens") or {}).get("calls"),
                     "completion_tokens": (rec.get("tokens") or {}).get("completion"), **sc})
    return rows


def before_after_table(rows: Sequence[Mapping[str, Any]]):
    """One row per system: units, first-try validity, fallback rate, rewards, segments/unit."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        return df
    g = df.groupby("system", sort=False)
    out = pd.DataFrame({
        "units": g.size(),
        "first-try validity": g["first_try_valid"].mean(),
        "fallback rate": g["fallback"].apply(lambda s: float((s != "none").mean())),
        "format reward": g["format_reward"].mean(),
        "narratological reward": g["narratological_reward"].mean(),
        "mean reward": g["reward"].mean(),
        "segments/unit": g["segments"].mean(),
        "completion tokens/unit": g["completion_tokens"].mean(),
    }).reset_index()
    return out


def segmentation_view(book: Book, unit: Unit, segments: Sequence[Mapping[str, Any]], who: str,
                      max_chars: int = 160):
    """A small table of one segmentation: subtitle, range, context, first words of the main text."""
    import pandas as pd

    rows = []
    for s in segments:
        lo, hi = int(s["from_idx"]), int(s["to_idx"])
        start, end = unit.sentences[lo - 1].start, unit.sentences[hi - 1].end
        txt = book.text[start:end].replace("\n", " ")
        rows.append({"by": who, "subtitle": s.get("subtitle") or "", "from_idx": lo, "to_idx": hi,
                     "context_idx": list(s.get("context_idx") or []),
                     "main text": txt[:max_chars] + ("…" if len(txt) > max_chars else "")})
    return pd.DataFrame(rows)


def plot_training_curves(sft_log, grpo_log):
    """Figure: SFT loss | GRPO loss | GRPO reward components | GRPO KL (per step)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.4))
    ax = axes[0]
    if sft_log is not None and "loss" in sft_log:
        ax.plot(sft_log["step"], sft_log["loss"], marker="o")
    ax.set(title="SFT loss (completion tokens)", xlabel="step")
    ax = axes[1]
    if grpo_log is not None and "loss" in grpo_log:
        ax.plot(grpo_log["step"], grpo_log["loss"], marker="o")
    ax.set(title="GRPO (DAPO) loss", xlabel="step")
    ax = axes[2]
    if grpo_log is not None:
        for col, label in (("rewards/format_reward/mean", "format"),
                           ("rewards/narratological_reward/mean", "narratological"),
                           ("reward", "weighted sum")):
            if col in grpo_log:
                ax.plot(grpo_log["step"], grpo_log[col], marker="o", label=label)
        ax.legend(fontsize=8)
    ax.set(title="GRPO rewards (mean over rollouts)", xlabel="step")
    ax = axes[3]
    if grpo_log is not None and "kl" in grpo_log and grpo_log["kl"].notna().any():
        ax.plot(grpo_log["step"], grpo_log["kl"], marker="o")
    else:
        ax.text(0.5, 0.5, "KL not logged\n(beta = 0, or every step skipped:\nall groups had zero reward variance)",
                ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4")
    ax.set(title="GRPO KL to the SFT policy", xlabel="step")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def json_preview(text: str, limit: int = 600) -> str:
    """A reply shortened for display (valid JSON is re-dumped compactly)."""
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, TypeError):
        pass
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def nan_to_none(x: Any) -> Any:
    return None if isinstance(x, float) and math.isnan(x) else x
