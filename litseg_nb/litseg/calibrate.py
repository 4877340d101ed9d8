"""Dataset-calibrated soft length reference (paper section 3.1.2): one value per dataset.

LitSeg is run on a calibration subset of ``cfg.calibration_units`` units with the *no length
constraint* system prompt (:func:`.prompting.system_prompt` with ``None``). Per dataset, the
``cfg.calibration_quantile`` quantile of that dataset's segment lengths (in sentences, main range
only) – rounded up to an integer – becomes the "recommended maximum length" of the real run on
that dataset's units. The result's ``length_reference`` is the mapping dataset -> value that
:func:`.pipeline.annotate_units` takes: each unit's prompt carries its own dataset's value, each
annotation record says which (``length_reference``, ``length_reference_dataset``), and Lite reuses
the mapping from its training records (:func:`litseg_nb.lite.data.annotation_length_reference`), so
a GutenQA unit gets GutenQA's value and a LiteraryQA unit LiteraryQA's, in training and at inference.
A unit of a dataset that was not calibrated is an error naming the unit and the dataset.

Which segments count: those of units whose output was usable (fallback ``none``,
``schema_repair``, ``index_repair`` or ``coverage_repair``); units that fell back to the whole
unit are excluded, because their one "segment" is the preprocessing unit, not a LitSeg segment.
When no segment of a dataset remains, that dataset gets the configured ``cfg.length_reference``
(the paper's 100) and the artifact says so (``by_dataset[ds]["source"] = "default"``, with the
reason) – never silently.

The subset (:func:`calibration_subset`) is a seeded sample stratified by dataset: the units are
shared out as evenly as possible over the datasets (at least one unit each, since each needs its
own value; GutenQA and LiteraryQA test in ``full``, where corpus order would make the first 50
GutenQA-only), each dataset's share drawn at random with ``cfg.seed``, and kept in corpus order.
Notebook 02 (:func:`calibrate_length_reference`) calibrates every dataset LitSeg annotates: a dataset
of Lite's training corpus on its training units (``full``: LiteraryQA on the train split, so no
LiteraryQA test unit shapes the value its own evaluation prompts carry; ``test``/``smoke``: Gutenberg
46), every other dataset of the selection on the selection's units (GutenQA has no training split).
The pooled quantile over all datasets is recorded for comparison only (``pooled``); no unit uses it.

The artifact ``outputs/<profile>/artifacts/litseg/calibration.json`` records the values, the
quantile, the subset (book/unit ids, per dataset), the lengths, the excluded units and the model;
:func:`calibration_table` is notebook 02's table of it (one row per dataset).
"""
from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.artifacts import artifact_path
from ..core.schema import Book, Unit
from .config import LitSegConfig
from .pipeline import annotate_with, training_items


def calibration_subset(items: Sequence[tuple[Book, Unit]], n: int, seed: int = 0) -> list[tuple[Book, Unit]]:
    """``n`` of ``items`` (0 or ``n >= len(items)``: all), stratified by the books' dataset: an even share
    per dataset, at least one unit each (``n`` is raised to the number of datasets; a dataset with
    fewer units gives its rest to the others), each share a seeded random sample; returned in the
    order of ``items``."""
    items = list(items)
    by_ds: dict[str, list[int]] = {}
    for i, (b, _) in enumerate(items):
        by_ds.setdefault(b.dataset, []).append(i)
    n = max(n, len(by_ds)) if n else 0  # every dataset needs its own value: at least one unit each
    if not n or n >= len(items):
        return items
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
                               progress: bool = True,
                               train_items: Sequence[tuple[Book, Unit]] | None = None) -> dict[str, Any]:
    """Notebook 02's calibration: every dataset of Lite's training units (``train_items``; ``None`` =
    :func:`.pipeline.training_items` of ``cfg``) on those units, and every other dataset of ``items``
    (the selection) on the selection's units, so a dataset evaluated and trained on (``full``'s
    LiteraryQA: test and train splits) is calibrated on its training units, not its evaluation units.
    ``backend``: an LLM backend or what :func:`~litseg_nb.litseg.ray_annotate.annotator_for` returns (the
    calibration's annotation then runs where the notebook's does).
    Writes ``artifacts/litseg/calibration.json``; returns its content."""
    if train_items is None and cfg.train_corpus.datasets:
        train_items = training_items(cfg)[1]
    train = list(train_items or ())
    trained = {b.dataset for b, _ in train}
    pool = [(b, u) for b, u in items if b.dataset not in trained] + train
    result = measure_length_reference(
        pool, backend, cfg, progress=progress,
        annotations_path=artifact_path(cfg.profile, "litseg", "calibration_annotations.jsonl"))
    result["training_datasets"] = sorted(trained)
    path = artifact_path(cfg.profile, "litseg", "calibration.json")
    Path(path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def _quantile_value(values: Sequence[int], q: float) -> int:
    return max(1, int(math.ceil(float(np.quantile(values, q)))))


def calibration_table(calibration: dict[str, Any], model: str = ""):
    """Notebook 02's calibration table: one row per dataset (its value, whether calibrated, its units
    and segments), from :func:`calibrate_length_reference`'s result; a result with ONE value for every
    unit (calibration off: ``{"length_reference": cfg.length_reference, "source": ...}``) is one row
    ``dataset = "(every dataset)"``."""
    import pandas as pd

    by = calibration.get("by_dataset") or {}
    if not isinstance(calibration.get("length_reference"), dict):
        by = {"(every dataset)": {"length_reference": calibration.get("length_reference"),
                                  "source": calibration.get("source"), "n_units": len(calibration.get("subset") or []),
                                  "n_segments": calibration.get("n_segments", 0), "subset": calibration.get("subset") or [],
                                  "excluded_units": calibration.get("excluded_units") or []}}
    rows = [{"model": model, "dataset": ds, "length_reference": d["length_reference"], "source": d["source"],
             "quantile": calibration.get("quantile"), "n_units": d.get("n_units"), "n_segments": d.get("n_segments"),
             "subset": ",".join(d.get("subset") or []), "excluded_units": ",".join(d.get("excluded_units") or [])}
            for ds, d in by.items()]
    pooled = (calibration.get("pooled") or {}).get("quantile_value")
    if pooled is not None:
        rows.append({"model": model, "dataset": "(pooled, not used)", "length_reference": pooled,
                     "source": "comparison", "quantile": calibration.get("quantile"),
                     "n_units": len(calibration.get("subset") or []), "n_segments": calibration.get("n_segments"),
                     "subset": "", "excluded_units": ""})
    return pd.DataFrame(rows)


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
    run = annotate_with(backend, subset, cfg, length_reference=None, method="litseg-calibration",
                         annotations_path=annotations_path, max_retries=retries, progress=progress)
    dataset_of = {b.book_id: b.dataset for b, _ in subset}
    datasets = sorted(set(dataset_of.values()))
    lengths: list[int] = []
    excluded: list[str] = []
    per_ds: dict[str, list[int]] = {ds: [] for ds in datasets}
    for rec in run.records:
        if rec["fallback"] == "whole_unit":
            excluded.append(f"{rec['book_id']}/{rec['unit_id']}")
            continue
        seg_lengths = [s["to_idx"] - s["from_idx"] + 1 for s in rec["segments"]]
        lengths.extend(seg_lengths)
        per_ds[dataset_of[rec["book_id"]]].extend(seg_lengths)
    by_dataset: dict[str, dict[str, Any]] = {}
    for ds in datasets:
        unit_ids = [f"{b.book_id}/{u.unit_id}" for b, u in subset if b.dataset == ds]
        v = per_ds[ds]
        by_dataset[ds] = {
            "length_reference": _quantile_value(v, q) if v else int(cfg.length_reference),
            "source": "calibrated" if v else "default",
            "reason": "" if v else ("no usable segments on this dataset's calibration units (all fell back "
                                    "to the whole unit): the configured length_reference"),
            "n_units": len(unit_ids), "n_segments": len(v), "segment_lengths": v, "subset": unit_ids,
            "excluded_units": [x for x in excluded if x in set(unit_ids)],
        }
    sources = {d["source"] for d in by_dataset.values()}
    result = {
        "length_reference": {ds: d["length_reference"] for ds, d in by_dataset.items()},
        "per_dataset": True,
        "source": sources.pop() if len(sources) == 1 else "calibrated, default for "
                  + ",".join(ds for ds, d in by_dataset.items() if d["source"] == "default"),
        "reason": "; ".join(f"{ds}: {d['reason']}" for ds, d in by_dataset.items() if d["reason"]),
        "quantile": q,
        "n_segments": len(lengths),
        "segment_lengths": lengths,
        "subset": [f"{b.book_id}/{u.unit_id}" for b, u in subset],
        "sampling": f"stratified by dataset, seeded (seed={cfg.seed}), {len(subset)} of {len(items)} units",
        "subset_by_dataset": {ds: d["subset"] for ds, d in by_dataset.items()},
        "by_dataset": by_dataset,
        "pooled": {"n_segments": len(lengths), "quantile_value": _quantile_value(lengths, q) if lengths else None,
                   "note": "all datasets' lengths together, for comparison only: no unit uses it"},
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
