"""LitSeg as a registered method (``litseg``): its options, its length calibration, typed results.

The soft length reference (section 3.1.2) is calibrated once per dataset: the ``calibration_quantile`` of
the segment lengths of an unconstrained run on a seeded, stratified subset (whole-unit fallbacks excluded)."""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..config import Options
from ..core.artifacts import artifact_path
from ..core.schema import Book, Chunk, Unit
from .config import LitSegConfig
from .pipeline import annotate_units, records_to_chunks, training_items

METHOD = "litseg"


@dataclass(frozen=True)
class LitSegOptions(Options):
    """LitSeg's configuration and the length reference in force (``None`` until :func:`prepare`)."""

    config: LitSegConfig = field(default_factory=LitSegConfig)
    length_reference: int | dict[str, int] | None = None

    @classmethod
    def of(cls, cfg: LitSegConfig) -> "LitSegOptions":  # noqa: D102
        return cls(config=cfg)


@dataclass(frozen=True)
class LitSegUnitResult:

    book_id: str
    unit_id: str
    n_segments: int
    fallback: str  # "none", or the paper's fallback the unit ended with
    fallback_types: tuple[str, ...]
    length_reference: int | None

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> "LitSegUnitResult":
        return cls(rec["book_id"], rec["unit_id"], len(rec["segments"]), rec["fallback"], tuple(rec["fallback_types"]),
                   rec["length_reference"])


def calibrates(cfg: LitSegConfig) -> bool:
    return bool(cfg.calibrate)


def prepare(items: Sequence[tuple[Book, Unit]], options: LitSegOptions, backend: Any) -> LitSegOptions:
    """``options`` with the length reference resolved for ``items`` (calibrated once, per dataset)."""
    if options.length_reference is not None:
        return options
    cfg = options.config
    if cfg.calibrate and items:
        reference = measure_length_reference(list(items), backend, cfg, progress=True)["length_reference"]
    else:
        reference = cfg.length_reference
    return LitSegOptions(config=cfg, length_reference=reference)


def segment_units(items: Sequence[tuple[Book, Unit]], options: LitSegOptions, backend: Any
                  ) -> tuple[list[Chunk], list[LitSegUnitResult], LitSegOptions]:
    """LitSeg's three stages on ``items``: the chunks, one result per unit and the options used."""
    options = prepare(items, options, backend)
    run = annotate_units(items, backend, options.config, length_reference=options.length_reference, progress=True)
    books = list({id(b): b for b, _ in items}.values())
    return records_to_chunks(books, run.records), [LitSegUnitResult.from_record(r) for r in run.records], options


def calibration_subset(items: Sequence[tuple[Book, Unit]], n: int, seed: int = 0) -> list[tuple[Book, Unit]]:
    """``n`` of ``items`` (0: all), an even seeded share per dataset (at least one), in the order of ``items``."""
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
    """Notebook 02's calibration (a dataset of Lite's training units on those units, others on the selection);
    writes ``artifacts/litseg/calibration.json`` and returns its content."""
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
    """Notebook 02's calibration table: one row per dataset, plus the pooled value for comparison."""
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
    """The calibration itself (annotations written only to ``annotations_path``, for resuming)."""
    q = float(cfg.calibration_quantile)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"calibration_quantile must be in (0, 1], got {q}")
    subset = calibration_subset(items, cfg.calibration_units, cfg.seed)
    if not subset:
        raise ValueError("calibration subset is empty (no units selected)")
    retries = cfg.max_retries if cfg.calibration_max_retries < 0 else cfg.calibration_max_retries
    run = annotate_units(subset, backend, cfg, length_reference=None, method="litseg-calibration",
                         annotations_path=annotations_path, max_retries=retries, progress=progress)
    dataset_of = {b.book_id: b.dataset for b, _ in subset}
    datasets = sorted(set(dataset_of.values()))
    excluded = [f"{r['book_id']}/{r['unit_id']}" for r in run.records if r["fallback"] == "whole_unit"]
    usable = [r for r in run.records if r["fallback"] != "whole_unit"]
    lengths = [s["to_idx"] - s["from_idx"] + 1 for r in usable for s in r["segments"]]
    per_ds = {ds: [s["to_idx"] - s["from_idx"] + 1 for r in usable if dataset_of[r["book_id"]] == ds
                   for s in r["segments"]] for ds in datasets}
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
    return {
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
