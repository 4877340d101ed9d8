"""Automatic segment quality (§4.1, Table 2; Table 6) and the E.3 rubric judge.

Boundary similarity: cosine similarity of the sentences either side of every inner boundary (lower = cleaner)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..chunk_sets import discover, for_segment_quality
from ..chunkers.base import boundary_positions
from ..core.display import ANCHOR_METHODS, MAX_SERIES, pick_series
from ..config import LLMConfig, StageConfig, one_of
from ..corpus import load_corpus
from ..lite.data import annotation_length_reference, annotations_path, load_annotations
from ..lite.segmenter import METHOD as LITE
from ..litseg.prompting import reference_for
from ..llm.base import UsageTag
from ..llm.embeddings import load_embedder
from ..litseg import rubric_judge


#: ``full``'s two A.2 raters: other model families than the Qwen3 student and reward judge, which could favour Lite
FULL_RATER_MODELS = ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "google/gemma-3-27b-it")


@dataclass(frozen=True)
class SegmentQualityConfig(StageConfig):
    """Notebook 06: which chunkers, how many units the E.3 judge scores, how many chunks to export."""

    chunkers: tuple[str, ...] = ()
    judge_max_units: int = 0  # per method; 0 = all units
    judge_max_chunks_per_unit: int = 12  # the most chunks one judge call scores (E.3's rubric is per chunk)
    #: a unit with more chunks: judged in windows of that many chunks (True), or skipped and counted (False)
    judge_windows: bool = True
    judge_max_passage_chars: int = 0  # units longer than this are skipped by the judge (0 = no cap)
    judge_retries: int = 2
    judge_methods: tuple[str, ...] = ()  # empty = all
    #: E.3's "Segment Pipeline Prompt": the method's real prompt ("full"), or one line naming it ("name")
    judge_pipeline_prompt: str = one_of("full", "full", "name")
    human_sheet_chunks: int = 100  # per method on each dataset (Appendix A.1: n = 100); also the ablation sheets
    human_raters: tuple[str, ...] = ("rater1", "rater2")
    #: items per sheet set the LLM raters fill when no human sheets are filled (0 = all)
    llm_rating_items: int = 0
    #: the two A.2 LLM raters, each behind its own OpenAI-compatible server ($LITSEG_RATER_URLS, $LITSEG_RATER2_URLS)
    rater_llm: LLMConfig = field(default_factory=lambda: LLMConfig(
        backend="openai", model=FULL_RATER_MODELS[0], max_new_tokens=64, temperature=0.0, max_model_len=32768))
    rater2_llm: LLMConfig = field(default_factory=lambda: LLMConfig(
        backend="openai", model=FULL_RATER_MODELS[1], max_new_tokens=64, temperature=0.0, max_model_len=32768))

    def rater_llms(self) -> tuple[LLMConfig, ...]:
        """One LLM config per rater of ``human_raters`` (rater 1: ``rater_llm``, the others ``rater2_llm``)."""
        return tuple(self.rater_llm if k == 0 else self.rater2_llm for k in range(len(self.human_raters)))


def boundary_pairs(chunks: Sequence[Any], units: Mapping[tuple[str, str], Any], book_texts: Mapping[str, str]):
    """``(method, book_id, unit_id, left_sentence, right_sentence)`` for every inner boundary."""
    by_unit: dict[tuple[str, str, str], list[Any]] = {}
    for c in chunks:
        if c.is_source_span:
            by_unit.setdefault((c.method, c.book_id, c.unit_id), []).append(c)
    out = []
    for (m, bid, uid), cs in by_unit.items():
        unit = units.get((bid, uid))
        if unit is None:
            raise KeyError(f"{m}: chunk refers to unit {uid!r} of book {bid!r}, which the corpus does not have")
        text = book_texts[bid]
        for s in sorted({c.from_idx for c in cs if 1 < c.from_idx <= unit.n_sentences}):
            out.append((m, bid, uid, unit.sentence_text(text, s - 1), unit.sentence_text(text, s)))
    return out


def boundary_similarities(pairs: Sequence[tuple], embedder: Any):
    """DataFrame of pairs with their cosine similarity (embeddings L2-normalised → dot product)."""
    if not pairs:
        return pd.DataFrame(columns=["method", "book_id", "unit_id", "similarity"])
    # plain sentences, never the retrieval instruction prefix (the paper embeds the sentences)
    left = embedder.encode([p[3] for p in pairs], kind="sentence")
    right = embedder.encode([p[4] for p in pairs], kind="sentence")
    ln = left / np.linalg.norm(left, axis=1, keepdims=True)
    rn = right / np.linalg.norm(right, axis=1, keepdims=True)
    sims = (ln * rn).sum(axis=1)
    return pd.DataFrame({"method": [p[0] for p in pairs], "book_id": [p[1] for p in pairs],
                         "unit_id": [p[2] for p in pairs], "similarity": sims.astype(float)})


def boundary_similarity_table(chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], embedder: Any,
                              by: Sequence[str] = ("dataset", "method"),
                              names: Mapping[str, str] | None = None):
    """Mean, sd and count of boundary similarities per ``by`` group (Tables 2 and 6)."""
    units = {(b.book_id, u.unit_id): u for b in books for u in b.units}
    dataset = {b.book_id: b.dataset for b in books}
    pairs = [p for cs in chunk_sets.values() for p in boundary_pairs(cs, units, {b.book_id: b.text for b in books})]
    sims = boundary_similarities(pairs, embedder)
    sims["dataset"] = sims.book_id.map(dataset)
    agg = sims.groupby(list(by)).similarity.agg(["mean", "std", "count"]).reset_index()
    agg = agg.rename(columns={"mean": "boundary_similarity", "std": "sd", "count": "n_boundaries"})
    present = pd.DataFrame([{"method": m, "dataset": dataset.get(c.book_id), "book_id": c.book_id}
                            for m, cs in chunk_sets.items() for c in cs], columns=["method", "dataset", "book_id"])
    groups = present[list(by)].drop_duplicates()  # every group that has chunks, in chunk-set order
    agg = groups.merge(agg, on=list(by), how="left") if len(groups) else agg
    agg["n_boundaries"] = agg["n_boundaries"].fillna(0).astype(int)
    if names:
        agg.insert(0, "variant", agg["method"].map(names))
    return agg


def annotated_length_reference(profile: str) -> int | dict[str, int] | None:
    """The length references of LitSeg's annotations of ``profile``, or None when there are none."""
    if not annotations_path(profile, "eval").is_file():
        return None
    return annotation_length_reference(load_annotations(profile, "eval"))


def judge_chunk_sets(chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], backend: Any,
                     cfg: SegmentQualityConfig, seed: int = 0,
                     length_reference: int | Mapping[str, int] | None = None):
    """The E.3 rubric judge over each method's units: ``(per_unit, per_method)``."""

    book_by_id = {b.book_id: b for b in books}
    units = {(b.book_id, u.unit_id): u for b in books for u in b.units}
    rows: list[dict[str, Any]] = []
    skipped: dict[tuple[str, str], dict[str, int]] = {}
    win = max(1, int(cfg.judge_max_chunks_per_unit))
    for m, cs in chunk_sets.items():
        if cfg.judge_methods and m not in cfg.judge_methods:
            continue
        by_unit: dict[tuple[str, str], list[Any]] = {}
        for c in cs:
            by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
        done = 0
        for (bid, uid), ucs in sorted(by_unit.items()):
            if cfg.judge_max_units and done >= cfg.judge_max_units:
                break
            unit = units[(bid, uid)]
            passage = unit.indexed_text(book_by_id[bid].text)
            counts = skipped.setdefault((book_by_id[bid].dataset, m), {"n_skipped_chunks": 0, "n_skipped_passage": 0})
            if cfg.judge_max_passage_chars and len(passage) > cfg.judge_max_passage_chars:
                counts["n_skipped_passage"] += 1
                continue
            if len(ucs) > win and not cfg.judge_windows:
                counts["n_skipped_chunks"] += 1
                continue
            ref = (reference_for(length_reference, book_by_id[bid], unit)  # the unit's dataset's value
                   if rubric_judge.uses_length_reference(m, cfg.judge_pipeline_prompt) else None)
            seg_prompt = rubric_judge.segment_pipeline_prompt(m, ref, cfg.judge_pipeline_prompt,
                                                              last_index=unit.n_sentences)
            results = [rubric_judge.score_chunks_with_rubric(
                backend, passage, seg_prompt, rubric_judge.segment_pipeline_json(part, texts=[c.text for c in part]),
                len(part), retries=cfg.judge_retries, seed=seed, tag=UsageTag("rubric-judge", bid, "rubric-judge"))
                for part in (ucs[w0:w0 + win] for w0 in range(0, len(ucs), win))]
            done += 1
            dims = {d: [v for r in results for v in getattr(r, d)] for d in rubric_judge.DIMENSIONS}
            per_chunk = [x for r in results for x in r.per_chunk()]
            rows.append({"dataset": book_by_id[bid].dataset, "method": m, "book_id": bid, "unit_id": uid,
                         "n_chunks": len(ucs), **{d: sum(v) / len(v) for d, v in dims.items()},
                         "overall": sum(per_chunk) / len(per_chunk), "neutral": any(r.neutral for r in results),
                         "n_neutral_windows": sum(r.neutral for r in results), "windows": len(results),
                         "attempts": sum(r.attempts for r in results) / len(results),
                         "improper_overlap": sum(sum(r.improper_overlap) for r in results)})
    per_unit = pd.DataFrame(rows)
    cols = ["dataset", "method", "n_units", "overall", "n_neutral", "n_windowed", "n_windows",
            "n_skipped_chunks", "n_skipped_passage"]
    if per_unit.empty:
        per_method = pd.DataFrame(columns=["dataset", "method", "n_units"])
    else:
        per_method = per_unit.groupby(["dataset", "method"]).agg(
            n_units=("unit_id", "count"), event_validity=("event_validity", "mean"),
            unity_of_action=("unity_of_action", "mean"), cut_point_logic=("cut_point_logic", "mean"),
            overall=("overall", "mean"), n_neutral=("neutral", "sum"), mean_attempts=("attempts", "mean"),
            n_windowed=("windows", lambda w: int((w > 1).sum())), n_windows=("windows", "sum")).reset_index()
    # a method whose every unit was skipped still gets its row (the counts are never lost)
    extra = [{"dataset": ds, "method": m, "n_units": 0} for ds, m in skipped
             if not ((per_method["dataset"] == ds) & (per_method["method"] == m)).any()]
    if extra:
        per_method = pd.concat([per_method, pd.DataFrame(extra)], ignore_index=True)
    for k in ("n_skipped_chunks", "n_skipped_passage"):
        per_method[k] = [skipped.get((ds, m), {}).get(k, 0) for ds, m in zip(per_method["dataset"], per_method["method"])]
    per_method["n_skipped"] = per_method["n_skipped_chunks"] + per_method["n_skipped_passage"]
    return per_unit, per_method.reindex(columns=list(dict.fromkeys([*per_method.columns, *cols])))


def comparison_unit(chunk_sets: Mapping[str, Sequence[Any]], reference: str = "litseg") -> tuple[str, str]:
    """The unit of the reference (where it has one) in which most methods cut, then which most methods cover,
    ties to the most reference boundaries."""
    covered: dict[tuple[str, str], set[str]] = {}
    cut: dict[tuple[str, str], set[str]] = {}
    for m, cs in chunk_sets.items():
        for c in cs:
            covered.setdefault((c.book_id, c.unit_id), set()).add(m)
            if c.is_source_span and c.from_idx > 1:  # a boundary inside the unit (boundary_positions' rule)
                cut.setdefault((c.book_id, c.unit_id), set()).add(m)
    if not covered:
        raise ValueError("no chunks to compare")
    ref = chunk_sets.get(reference, [])
    order = list(covered)
    return max(order, key=lambda k: (reference in covered[k], len(cut.get(k, ())), len(covered[k]),
                                     len(boundary_positions(ref, *k)), -order.index(k)))


def plot_boundary_positions(book: Any, unit_id: str, chunk_sets: Mapping[str, Sequence[Any]],
                            reference: str = "litseg", tolerance: int = 1, max_rows: int = MAX_SERIES):
    """A row per method with a tick at every boundary of one unit, at most ``max_rows`` rows: the anchor methods
    (:data:`~litseg_nb.core.display.ANCHOR_METHODS`) that cut the unit, then those whose boundaries fall most
    often near the reference's; methods that do not cut it, and those left out, are named under the axis."""
    import textwrap

    import matplotlib.pyplot as plt

    unit = book.unit(unit_id)
    positions = {m: boundary_positions(cs, book.book_id, unit_id) for m, cs in chunk_sets.items()
                 if any(c.book_id == book.book_id and c.unit_id == unit_id for c in cs)}
    ref = positions.get(reference, [])
    near = {m: sum(1 for p in pos if any(abs(p - r) <= tolerance for r in ref)) for m, pos in positions.items()}
    cutting = {m: near[m] / len(pos) for m, pos in positions.items() if pos and m != reference}
    anchors = [a for a in ANCHOR_METHODS if a != reference]
    shown, left_out = pick_series(cutting, anchors, n=max_rows - (reference in positions and bool(ref)))
    rows = ([reference] if ref else []) + shown
    fig, ax = plt.subplots(figsize=(9, 0.42 * max(len(rows), 1) + 2.2))
    for r in ref:
        ax.axvspan(r - 0.5 - tolerance, r - 0.5 + tolerance, color="0.88", zorder=0)
    for y, m in enumerate(rows):
        pos = positions[m]
        ax.scatter([p - 0.5 for p in pos], [y] * len(pos), marker="|", s=160,
                   color="C3" if m == reference else "C0", zorder=2)
        if m != reference and ref:
            ax.text(1.01, y, f"{near[m]}/{len(pos)}", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    ax.set_xlim(0.5, unit.n_sentences + 0.5)
    ax.set_xlabel(f"boundary position (between sentences) in {book.title[:40]} / {unit_id}, "
                  f"{unit.n_sentences} sentences")
    what = (f"grey = {reference}'s boundaries ±{tolerance}; right: boundaries near one of them"
            if ref else f"{reference} has no boundary on this unit")
    ax.set_title(f"Where each method cuts one unit ({what})", fontsize=9)
    uncut = [m for m, pos in positions.items() if not pos]
    notes = [f"no boundary inside this unit (one chunk): {', '.join(uncut)}" if uncut else "",
             f"not shown: {len(left_out)} more methods that cut it ({', '.join(left_out)})" if left_out else ""]
    note = "\n".join(textwrap.fill(n, 110, break_on_hyphens=False) for n in notes if n)
    if not rows:
        ax.set_yticks([])
        note = "no method cuts inside this unit\n" + note
    if note:  # anchored under the x label, whatever its height
        ax.annotate(note, xy=(0, 0), xycoords=("axes fraction", ax.xaxis.label), xytext=(0, -6),
                    textcoords="offset points", ha="left", va="top", fontsize=7, color="0.25")
    fig.tight_layout()
    return fig


def table2_lite_reference(profile: str, embedder: Any = None, embedding: Any = None) -> dict[str, float]:
    """Table 2's boundary similarity of LitSeg-Lite per dataset ({} without its chunks)."""
    if LITE not in discover(profile, ())[0]:  # no Lite chunk set (notebook 03 has not run)
        return {}
    cfg = SegmentQualityConfig.for_profile(profile)
    books = load_corpus(cfg.corpus)
    sets, _ = for_segment_quality(profile, (LITE,), books)
    if LITE not in sets:
        return {}
    if embedder is None or embedding != cfg.embedding:
        embedder = load_embedder(cfg.embedding)
    t2 = boundary_similarity_table({LITE: sets[LITE]}, books, embedder)
    return {d: float(v) for d, v in zip(t2["dataset"], t2["boundary_similarity"])}


def with_table2_reference(t6: Any, profile: str, embedder: Any = None, embedding: Any = None) -> Any:
    """Table 6 with ``table2_litseg_lite``: Table 2's value of LitSeg-Lite on that dataset."""
    out = t6.copy()
    ref = table2_lite_reference(profile, embedder, embedding)
    out["table2_litseg_lite"] = out["dataset"].map(ref).astype(float) if "dataset" in out else float("nan")
    return out
