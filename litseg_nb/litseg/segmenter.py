"""LitSeg as a registered method (``litseg``): its options, its one length calibration, typed results.

:class:`LitSegOptions` are the teacher's configuration (:class:`~litseg_nb.litseg.config.LitSegConfig`)
plus the soft length reference the run uses. :func:`prepare` resolves that reference once for the whole
input — calibrated per dataset on a seeded sample of the units (:func:`~.calibrate.measure_length_reference`)
when ``calibrate`` is on, else the configured ``length_reference`` — so that a run cut into batches
gives the same chunks as one call: this is the only place LitSeg's length is calibrated for a
segmentation. :func:`segment_units` runs the three stages (:func:`~.pipeline.annotate_units`) and
returns the chunks with one :class:`LitSegUnitResult` per unit (the record of the run, typed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..config import Options
from ..core.schema import Book, Chunk, Unit
from .calibrate import measure_length_reference
from .config import LitSegConfig
from .pipeline import annotate_units, records_to_chunks

METHOD = "litseg"


@dataclass(frozen=True)
class LitSegOptions(Options):
    """LitSeg's options: its configuration and the length reference in force (``None`` until
    :func:`prepare` resolves it: one value for every unit, or dataset -> value)."""

    config: LitSegConfig = field(default_factory=LitSegConfig)
    length_reference: int | dict[str, int] | None = None

    @classmethod
    def of(cls, cfg: LitSegConfig) -> "LitSegOptions":  # noqa: D102
        return cls(config=cfg)


@dataclass(frozen=True)
class LitSegUnitResult:
    """One unit's outcome of a LitSeg run (read from its annotation record)."""

    book_id: str
    unit_id: str
    n_segments: int
    fallback: str  # "none", or the paper's fallback the unit ended with
    fallback_types: tuple[str, ...]
    length_reference: int | None

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> "LitSegUnitResult":
        fallback = rec.get("fallback")
        return cls(rec["book_id"], rec["unit_id"], len(rec.get("segments") or ()),
                   "none" if fallback in (None, "none") else str(fallback),
                   tuple(rec.get("fallback_types") or ()), rec.get("length_reference"))


def calibrates(cfg: LitSegConfig) -> bool:
    """Whether :func:`prepare` depends on the units (it calibrates on them)."""
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
