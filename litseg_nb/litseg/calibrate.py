"""Dataset-calibrated soft length reference (paper section 3.1.2).

LitSeg is run on a calibration subset of ``cfg.calibration_units`` of the selected units with
the *no length constraint* system prompt (:func:`.prompting.system_prompt` with ``None``). The
``cfg.calibration_quantile`` quantile of the resulting segment lengths (in sentences, main range
only) – rounded up to an integer – becomes the "recommended maximum length" of the real run.

Which segments count: those of units whose output was usable (fallback ``none``,
``schema_repair``, ``index_repair`` or ``coverage_repair``); units that fell back to the whole
unit are excluded, because their one "segment" is the preprocessing unit, not a LitSeg segment.
When no segment remains, the configured ``cfg.length_reference`` (the paper's 100) is used and
the artifact says so (``source = "default"``, with the reason) – never silently.

The subset (:func:`calibration_subset`) is a seeded sample stratified by dataset: the units are
shared out as evenly as possible over the datasets of the selection (GutenQA and LiteraryQA test in
``full``; corpus order would make the first 50 GutenQA-only), each dataset's share drawn at random
with ``cfg.seed``, and kept in corpus order. The one calibrated value is used for every unit of the
run, Lite's training annotations included (every annotation record carries the value it used,
``length_reference``, and the student reads it from there: :mod:`litseg_nb.lite.data`); the
artifact also records the same quantile per dataset (``by_dataset``) for comparison.

The artifact ``outputs/<profile>/artifacts/litseg/calibration.json`` records the value, the
quantile, the subset (book/unit ids, per dataset), the lengths, the excluded units and the model.
"""
from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..artifacts import artifact_path
from ..schema import Book, Unit
from .config import LitSegConfig
from .pipeline import annotate_units


def calibration_subset(items: Sequence[tuple[Book, Unit]], n: int, seed: int = 0) -> list[tuple[Book, Unit]]:
    """``n`` of ``items`` (0 or ``n >= len(items)``: all), stratified by the books' dataset: an even share
    per dataset (a dataset with fewer units gives its rest to the others), each share a seeded random
    sample; returned in the order of ``items``."""
    items = list(items)
    if not n or n >= len(items):
        return items
    by_ds: dict[str, list[int]] = {}
    for i, (b, _) in enumerate(items):
        by_ds.setdefault(b.dataset, []).append(i)
    quota = {ds: 0 for ds in by_ds}
    left = n
    while left:  # round-robin over the datasets that still have units
        open_ds = [ds for ds in sorted(by_ds) if quota[ds] < len(by_ds[ds])]
        for ds in open_ds[:left]:
            quota[ds] += 1
        left = n - sum(quota.values())
    keep: set[int] = set()
    for ds, idx in by_ds.items():
        keep.update(random.Random(f"{seed}-calibration-{ds}").sample(idx, quota[ds]))
    return [items[i] for i in sorted(keep)]


def calibrate_length_reference(items: Sequence[tuple[Book, Unit]], backend: Any, cfg: LitSegConfig,
                               progress: bool = True) -> dict[str, Any]:
    """Run the calibration and write ``artifacts/litseg/calibration.json``; returns its content."""
    result = measure_length_reference(
        items, backend, cfg, progress=progress,
        annotations_path=artifact_path(cfg.profile, "litseg", "calibration_annotations.jsonl"))
    path = artifact_path(cfg.profile, "litseg", "calibration.json")
    Path(path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def measure_length_reference(items: Sequence[tuple[Book, Unit]], backend: Any, cfg: LitSegConfig,
                             progress: bool = True, annotations_path: Path | None = None) -> dict[str, Any]:
    """The calibration itself (no file written unless ``annotations_path`` is given, for resuming)."""
    q = float(cfg.calibration_quantile)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"calibration_quantile must be in (0, 1], got {q}")
    subset = calibration_subset(items, cfg.calibration_units, cfg.seed)
    if not subset:
        raise ValueError("calibration subset is empty (no units selected)")
    retries = cfg.max_retries if cfg.calibration_max_retries < 0 else cfg.calibration_max_retries
    run = annotate_units(subset, backend, cfg, length_reference=None, method="litseg-calibration",
                         annotations_path=annotations_path, max_retries=retries, progress=progress)
    lengths: list[int] = []
    excluded: list[str] = []
    dataset_of = {b.book_id: b.dataset for b, _ in subset}
    per_ds: dict[str, list[int]] = {}
    for rec in run.records:
        if rec["fallback"] == "whole_unit":
            excluded.append(f"{rec['book_id']}/{rec['unit_id']}")
            continue
        seg_lengths = [s["to_idx"] - s["from_idx"] + 1 for s in rec["segments"]]
        lengths.extend(seg_lengths)
        per_ds.setdefault(dataset_of[rec["book_id"]], []).extend(seg_lengths)
    if lengths:
        value = max(1, int(math.ceil(float(np.quantile(lengths, q)))))
        source, reason = "calibrated", ""
    else:
        value = int(cfg.length_reference)
        source = "default"
        reason = "no usable segments on the calibration subset (all units fell back to the whole unit)"
    result = {
        "length_reference": value,
        "source": source,
        "reason": reason,
        "quantile": q,
        "n_segments": len(lengths),
        "segment_lengths": lengths,
        "subset": [f"{b.book_id}/{u.unit_id}" for b, u in subset],
        "sampling": f"stratified by dataset, seeded (seed={cfg.seed}), {len(subset)} of {len(items)} units",
        "subset_by_dataset": {ds: [f"{b.book_id}/{u.unit_id}" for b, u in subset if b.dataset == ds]
                              for ds in sorted({b.dataset for b, _ in subset})},
        "by_dataset": {ds: {"n_segments": len(v), "quantile_value": max(1, int(math.ceil(float(np.quantile(v, q)))))}
                       for ds, v in sorted(per_ds.items())},
        "excluded_units": excluded,
        "fallbacks": {f"{r['book_id']}/{r['unit_id']}": r["fallback"] for r in run.records},
        "max_retries": retries,
        "model": getattr(backend, "model_id", ""),
        "backend": getattr(backend, "name", ""),
        "structured_output": run.structured_output,
        "llm_calls": run.llm_calls,
        "wall_s": round(run.wall_s, 3),
        "paper_default": 100,
        "label": cfg.describe(),
    }
    return result
