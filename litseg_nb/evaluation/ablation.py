"""LitSeg-Lite ablations (§4.3, Tables 5-8): single-pass variants over the same units.

Every variant runs through :class:`~litseg_nb.lite.segmenter.LiteSegmenter`, so validity and fallbacks compare."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ..core.artifacts import artifact_dir, artifact_path
from ..lite.config import LiteConfig
from ..lite.segmenter import LiteSegmenter, results_frame
from ..core.schema import Book, Chunk, Unit, assert_full_coverage, load_chunks, save_chunks
from ..errors import LitsegError
from ..lite.train import student_backend
from ..llm import make_backend
from ..corpus import select_units
from ..llm.base import UsageLedger
from ..lite.data import PAPER_LENGTH_REFERENCE, lite_conversation, student_length_reference
from ..rag import report
from ..rag.pipeline import select_subset


class AblationError(LitsegError, RuntimeError):
    pass


@dataclass(frozen=True)
class AblationVariant:
    key: str  # file-safe id, also the chunk ``method``
    name: str  # the paper's row label
    model: str  # "lite" (SFT+GRPO), "sft" or "base"
    template: str  # system prompt template
    removes: str


VARIANTS: tuple[AblationVariant, ...] = (
    AblationVariant("lite", "LitSeg-Lite", "lite", "lite/system", "nothing (SFT + GRPO adapters, E.2 prompt)"),
    AblationVariant("wo-grpo", "w/o GRPO", "sft", "lite/system", "the GRPO stage (SFT adapter only)"),
    AblationVariant("wo-ft", "w/o FT", "base", "lite/system", "fine-tuning (base model, E.2 prompt)"),
    AblationVariant("wo-theo-s1", "+w/o Theo.S.1", "base", "ablation/wo_theo_s1", "fine-tuning and theory stage 1"),
    AblationVariant("wo-theo-s2", "+w/o Theo.S.2", "base", "ablation/wo_theo_s2", "fine-tuning and theory stage 2"),
    AblationVariant("wo-theo-s3", "+w/o Theo.S.3", "base", "ablation/wo_theo_s3", "fine-tuning and theory stage 3"),
    AblationVariant("wo-theory", "+w/o Theory", "base", "ablation/wo_theory",
                    "fine-tuning and the whole narratological pipeline (generic prompt)"),
)


THEORY_STEPS = {"events": "events (Theo.S.1)", "threads": "threads (Theo.S.2)",
                "turning_points": "turning points (Theo.S.3)"}
WEIGHTS = {"lite": "base + SFT + GRPO", "sft": "base + SFT", "base": "base"}


def prompt_table(book: Book, unit: Unit, variants: Sequence[AblationVariant] = VARIANTS) -> pd.DataFrame:
    """What each variant gives the model for ``unit``: its weights, the theory steps its prompt's JSON schema asks
    for (``step_N_<name>`` keys), the steps it removes, and the prompt's size; every prompt built as the run builds
    it (``lite_conversation``)."""
    rows = []
    for v in variants:
        messages = lite_conversation(book, unit, v.template, PAPER_LENGTH_REFERENCE)
        text = "\n".join(m["content"] for m in messages)
        asked = [name for name in THEORY_STEPS if re.search(rf'"step_\d_{name}"', text)]
        rows.append({"variant": v.name, "weights": WEIGHTS[v.model],
                     "theory steps asked": ", ".join(THEORY_STEPS[n] for n in asked) or "none (generic prompt)",
                     "steps removed": ", ".join(THEORY_STEPS[n] for n in THEORY_STEPS if n not in asked) or "-",
                     "prompt words": len(text.split())})
    return pd.DataFrame(rows)


def differences(table: pd.DataFrame, metric: str, reference: str = "LitSeg-Lite", by: str = "variant",
                group: str | None = "dataset") -> pd.DataFrame:
    """Per variant (and ``group``): ``metric`` and :math:`\\Delta = m(\\text{reference}) - m(\\text{variant})`; a
    group without the reference row, or a missing value, gives NaN."""
    keys = [group] if group and group in table else []
    out = []
    for _, g in (table.groupby(keys, sort=False) if keys else [((), table)]):
        ref = pd.to_numeric(g.loc[g[by] == reference, metric], errors="coerce")
        r = float(ref.iloc[0]) if len(ref) else float("nan")
        part = g[[*keys, by, metric]].copy()
        part[metric] = pd.to_numeric(part[metric], errors="coerce")
        part[f"delta ({reference} - variant)"] = r - part[metric]
        out.append(part)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=[*keys, by, metric])


def select_variants(keys: Sequence[str]) -> list[AblationVariant]:
    """Variants by key (all when ``keys`` is empty); unknown keys raise, naming them."""
    if not keys:
        return list(VARIANTS)
    by_key = {v.key: v for v in VARIANTS}
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        raise AblationError(f"unknown ablation variant(s) {unknown}; known: {list(by_key)}")
    return [by_key[k] for k in keys]


def adapter_dirs(profile: str) -> dict[str, Path]:
    """The SFT and GRPO adapters notebook 03 saved for ``profile`` (clear error when missing)."""
    root = artifact_dir(profile, "lite", "adapters")
    dirs = {"sft": root / "sft", "grpo": root / "grpo"}
    missing = [str(p) for p in dirs.values() if not p.is_dir()]
    if missing:
        raise AblationError(f"LitSeg-Lite adapters not found: {missing}; run notebook 03 for profile {profile!r} first")
    return dirs


def variant_backend(cfg: LiteConfig, variant: AblationVariant, profile: str, ledger: Any = None):
    """The backend a variant runs on: ``cfg.llm``, or base + its adapters."""
    if variant.model == "base":
        return make_backend(cfg.llm, ledger)
    dirs = adapter_dirs(profile)
    adapters = [dirs["sft"]] if variant.model == "sft" else [dirs["sft"], dirs["grpo"]]
    return student_backend(cfg.llm, adapters, artifact_dir(profile, "lite", "merged"), ledger)[0]


def ablation_units(cfg: LiteConfig, books: Sequence[Book]) -> list[tuple[Book, Unit]]:
    """The shared units (first ``cfg.ablation_max_units``, 0 = all); LitSeg must have segmented each."""
    path = artifact_path(cfg.profile, "chunks", "litseg.jsonl")
    if not path.is_file():
        raise AblationError(f"{path} not found; run notebook 02 for profile {cfg.profile!r} first")
    pairs = select_units(books, cfg.selection)[:cfg.ablation_max_units or None]
    done = {(c.book_id, c.unit_id) for c in load_chunks(path)}
    missing = [f"{b.book_id}/{u.unit_id}" for b, u in pairs if (b.book_id, u.unit_id) not in done]
    if missing or not pairs:
        raise AblationError(f"LitSeg did not segment the selected unit(s) {missing} ({path}); rerun notebook 02 "
                            "with the same profile")
    return pairs


def run_ablations(cfg: LiteConfig, profile: str, pairs: Sequence[tuple[Book, Unit]],
                  variants: Sequence[AblationVariant],
                  ledger: Any = None) -> tuple[dict[str, list[Chunk]], pd.DataFrame]:
    """Segment ``pairs`` with every variant; returns chunk sets by variant key and per-unit results."""
    ledger = ledger if ledger is not None else UsageLedger()
    length_reference = student_length_reference(cfg.annotations_profile or profile)  # the teacher's value
    chunk_sets: dict[str, list[Chunk]] = {}
    frames = []
    for v in variants:
        backend = variant_backend(cfg, v, profile, ledger)
        # unconstrained for every variant: the E.4 prompts ask for other JSON shapes than E.2's schema
        seg = LiteSegmenter(backend, cfg.infer_max_new_tokens, cfg.infer_retries, seed=cfg.seed,
                            method=v.key, system_template=v.template, length_reference=length_reference,
                            structured=False)
        chunks, results = seg.segment_units(pairs)
        for book in {b.book_id: b for b, _ in pairs}.values():
            units = [u for b, u in pairs if b.book_id == book.book_id]
            sub = Book(book.book_id, book.title, book.dataset, book.text, units=units)
            assert_full_coverage(sub, [c for c in chunks if c.book_id == book.book_id], v.key)
        chunk_sets[v.key] = chunks
        df = results_frame(results)
        df.insert(0, "variant", v.name)
        frames.append(df)
        del backend, seg
    return chunk_sets, pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def validity_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per variant: units, first-try validity, mean attempts, fallbacks by type, segments per unit."""
    if results.empty:
        return pd.DataFrame(columns=["variant", "units", "first_try_valid", "mean_attempts", "fallback_units",
                                     "segments_per_unit", "completion_tokens"])
    rows = []
    for name, g in results.groupby("variant", sort=False):
        types = Counter(t for ft in g["fallback_types"] for t in ft)
        rows.append({"variant": name, "units": len(g), "first_try_valid": float(g["first_try_valid"].mean()),
                     "mean_attempts": float(g["attempts"].mean()),
                     "fallback_units": int((g["fallback"] != "none").sum()),
                     "fallback_types": ", ".join(f"{k}={v}" for k, v in sorted(types.items())) or "-",
                     "segments_per_unit": float(g["n_segments"].mean()),
                     "completion_tokens": int(g["completion_tokens"].sum())})
    return pd.DataFrame(rows)


def plot_ablation(boundary: pd.DataFrame, retrieval: pd.DataFrame, validity: pd.DataFrame | None = None):
    """Per variant, a panel per measure that has a value: Table 6's boundary similarity (lower is better),
    Table 7's MRR (higher is better), one bar per dataset, its value written beside it; with ``validity``
    (``validity_table``) also the segments per unit, which says when every variant fell back to whole units.
    A measure no variant has (no inner boundary, no question) is named under the figure, not drawn empty."""
    import textwrap

    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys([*boundary.get("variant", []), *retrieval.get("variant", [])]))
    panels, missing = [], []
    for frame, col, title, xlabel, why in (
            (boundary, "boundary_similarity", "Table 6 shape", "boundary similarity (lower = cleaner cuts)",
             "no variant put a boundary inside a unit"),
            (retrieval, "MRR", "Table 7 shape", "MRR, Table 3 ranking (higher is better)",
             "no question in scope"),
            (validity if validity is not None else pd.DataFrame(), "segments_per_unit", "Segments per unit",
             "segments per unit (1 = whole units, see 07_validity)", None)):
        if frame.empty or col not in frame:
            continue
        values = pd.to_numeric(frame[col], errors="coerce")
        if values.notna().any():
            panels.append((frame.assign(_v=values), title, xlabel))
        elif why:
            missing.append(f"{title} not drawn: {why} ({col} is empty for every variant)")
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.6 * max(len(panels), 1) + 1,
                                                              0.45 * max(len(variants), 3) + 1.6), squeeze=False)
    axes = axes[0]
    ys = list(range(len(variants)))[::-1]  # the first variant on top
    for ax, (frame, title, xlabel) in zip(axes, panels):
        datasets = list(dict.fromkeys(frame["dataset"])) if "dataset" in frame else [None]
        height = 0.8 / len(datasets)
        for j, ds in enumerate(datasets):
            part = frame if ds is None else frame[frame["dataset"] == ds]
            v = part.groupby("variant", sort=False)["_v"].first().reindex(variants)
            pos = [y + (len(datasets) - 1) / 2 * height - j * height for y in ys]
            ax.barh(pos, v.fillna(0.0).to_numpy(), height=height, label=ds, color=f"C{j}")
            for y, x in zip(pos, v):
                ax.annotate("n/a" if pd.isna(x) else f"{x:.3g}", xy=(0 if pd.isna(x) else x, y), xytext=(3, 0),
                            textcoords="offset points", va="center", fontsize=7, color="0.25")
        tie = frame.groupby("dataset")["_v"].nunique().max() if "dataset" in frame else frame["_v"].nunique()
        ax.set_title(title + (" (all variants tie)" if tie == 1 and len(variants) > 1 else ""), fontsize=10)
        ax.set_xlabel(xlabel)
        room = 1.25 if len(datasets) == 1 else 1.6  # the values written beside the bars, and the legend
        ax.set_xlim(0, room * max(float(frame["_v"].max()), 1e-9))
        if len(datasets) > 1:
            ax.legend(fontsize=7, loc="upper right", frameon=False)
    for i, ax in enumerate(axes):
        ax.set_yticks(ys, variants if i == 0 else [""] * len(ys))
        ax.set_ylim(-0.6, len(variants) - 0.4)
    if not panels:
        axes[0].set_axis_off()
        missing.insert(0, "nothing to draw: no variant has a value in Table 6 or Table 7")
    fig.tight_layout()
    if missing:  # anchored under the first panel's x label
        axes[0].annotate("\n".join(textwrap.fill(m, 100) for m in missing), xy=(0, 0),
                         xycoords=("axes fraction", axes[0].xaxis.label), xytext=(0, -6),
                         textcoords="offset points", ha="left", va="top", fontsize=7, color="0.25")
    return fig


def save_ablation_chunks(profile: str, chunk_sets: Mapping[str, Sequence[Chunk]]) -> list[Path]:
    """``artifacts/ablation/chunks/<variant>.jsonl`` (kept apart from notebook 05's chunk sets)."""
    paths = [artifact_path(profile, "ablation", "chunks", f"{key}.jsonl") for key in chunk_sets]
    for path, cs in zip(paths, chunk_sets.values()):
        save_chunks(path, list(cs))
    return paths


def generation_tables(ev: Any, questions: Sequence[Any], rows: Sequence[Mapping[str, Any]], retrieval: pd.DataFrame,
                      backend: Any, rag_cfg: Any, books: Mapping[str, Book], names: Mapping[str, str],
                      seed: int = 0, target: str = "lite",
                      chunk_sets: Mapping[str, Sequence[Chunk]] | None = None,
                      judge_backend: Any = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 7's CR column and Table 8 with notebook 05's code; returns ``(table7_with_cr, table8)``."""

    gen_q = select_subset(questions, rag_cfg.generation_max_questions, seed)
    gen = report.generate_for_subset(ev, gen_q, rows, list(names))
    if rag_cfg.ragas:
        gen = report.add_ragas(backend, gen, rag_cfg.ragas_max_questions, seed, rag_cfg.ragas_max_new_tokens,
                               rag_cfg.ragas_retries)
    if judge_backend is None:
        if (rag_cfg.judge_llm.backend, rag_cfg.judge_llm.model) != (rag_cfg.llm.backend, rag_cfg.llm.model):
            raise ValueError(f"generation_tables: the pairwise judge ({rag_cfg.judge_llm.model}) is not the generator "
                             f"({rag_cfg.llm.model}); pass its backend as judge_backend")
        judge_backend = backend
    pair = (report.pairwise_vs_target(judge_backend, gen, books, questions, target, rag_cfg.pairwise_max_questions,
                                      rag_cfg.pairwise_context_chars, rag_cfg.pairwise_max_new_tokens, seed,
                                      chunk_sets=chunk_sets, max_model_len=rag_cfg.judge_llm.max_model_len,
                                      book_max_tokens=rag_cfg.pairwise_book_max_tokens)
            if rag_cfg.pairwise and target in names and len(names) > 1 else pd.DataFrame())
    t7 = report.table3_final(rows, gen, k=rag_cfg.retrieve_top_k)  # Table 3's ranking: reranked where reranked
    t8 = report.table4(gen, pair)
    for t in (t7, t8):
        if not t.empty:
            t.insert(0, "variant", t["method"].map(names))
    return t7, t8
