"""LitSeg-Lite is never evaluated on a unit it was trained on — enforced here, in every profile.

Training records which units a student learned from (:func:`trained_units_of` the examples): book
id, unit id, title and a fingerprint of the sentence-indexed unit text. The record travels with the
model: every LoRA adapter folder and the merged model folder hold ``lite_trained_units.json``, and
the profile keeps ``artifacts/lite/trained_units.json``.

Enforcement points (each raises :class:`TrainedUnitError` naming the units):

* :class:`~litseg_nb.lite.segmenter.LiteSegmenter` built on a trained model folder refuses to segment
  a trained unit (same book and unit id, or the same text under another id);
* :func:`~litseg_nb.lite.segmenter.check_and_save_chunks` refuses to write a Lite chunk set that
  contains a trained unit of the profile;
* :func:`refuse_trained_chunks` (called when evaluation loads a ``litseg-lite*`` chunk set) refuses
  chunk sets that contain one.

There is no switch to turn this off.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.artifacts import artifact_path
from ..core.schema import Book, Unit
from ..errors import UsageError

TRAINED_UNITS_FILE = "lite_trained_units.json"


class TrainedUnitError(UsageError, ValueError):
    """A Lite evaluation would include a unit the student was trained on."""


def unit_fingerprint(book: Book, unit: Unit) -> str:
    """Hash of the sentence-indexed unit text (what the student sees)."""
    return hashlib.sha256(unit.indexed_text(book.text).encode("utf-8")).hexdigest()[:24]


@dataclass
class TrainedUnits:
    """The units a student was trained on."""

    entries: list[dict[str, str]] = field(default_factory=list)  # book_id, unit_id, title, fingerprint

    @property
    def keys(self) -> set[tuple[str, str]]:
        return {(e["book_id"], e["unit_id"]) for e in self.entries}

    @property
    def fingerprints(self) -> set[str]:
        return {e["fingerprint"] for e in self.entries if e.get("fingerprint")}

    def __len__(self) -> int:
        return len(self.entries)

    def union(self, other: "TrainedUnits | None") -> "TrainedUnits":
        if other is None:
            return self
        seen = {(e["book_id"], e["unit_id"], e.get("fingerprint")) for e in self.entries}
        extra = [e for e in other.entries if (e["book_id"], e["unit_id"], e.get("fingerprint")) not in seen]
        return TrainedUnits(self.entries + extra)

    def overlap(self, pairs: Iterable[tuple[Book, Unit]]) -> list[str]:
        """``book/unit`` of every pair that is a trained unit (by id or by text)."""
        keys, fps = self.keys, self.fingerprints
        return [f"{b.book_id}/{u.unit_id}" for b, u in pairs
                if (b.book_id, u.unit_id) in keys or unit_fingerprint(b, u) in fps]

    def to_json(self) -> dict[str, Any]:
        return {"n_units": len(self.entries), "units": self.entries}

    def save(self, path: Path) -> Path:
        """Write the record to ``path``; a file that already holds this record is left as it is.

        Not rewriting an unchanged record keeps the folder's file stamp: a merged model folder's
        :func:`~litseg_nb.llm.models.model_revision` (part of every request-cache key) would
        otherwise change each time the folder is asked for, and every request to it would miss."""
        path = Path(path)
        text = json.dumps(self.to_json(), indent=2)
        try:
            if path.read_text(encoding="utf-8") == text:
                return path
        except (OSError, UnicodeDecodeError):  # absent or unreadable: (re)written below
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path) -> "TrainedUnits":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls([dict(e) for e in data["units"]])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TrainedUnitError(f"cannot read the trained-units record {path}: {e}") from e


def trained_units_of(examples: Sequence[Any]) -> TrainedUnits:
    """The record of training ``examples`` (:class:`~litseg_nb.lite.data.LiteExample`)."""
    return TrainedUnits([{"book_id": e.book_id, "unit_id": e.unit_id, "fingerprint": e.fingerprint}
                         for e in examples])


def profile_record_path(profile: str) -> Path:
    return artifact_path(profile, "lite", "trained_units.json")


def save_profile_record(profile: str, trained: TrainedUnits) -> Path:
    """``artifacts/lite/trained_units.json``: accumulates every unit any student of the profile saw."""
    path = profile_record_path(profile)
    old = TrainedUnits.load(path) if path.is_file() else None
    return trained.union(old).save(path)


def profile_record(profile: str) -> TrainedUnits:
    path = profile_record_path(profile)
    return TrainedUnits.load(path) if path.is_file() else TrainedUnits()


def model_record(model: str | Path) -> TrainedUnits | None:
    """The trained units stored in a model or adapter folder (``None``: not a Lite-trained folder)."""
    path = Path(str(model)) / TRAINED_UNITS_FILE
    return TrainedUnits.load(path) if path.is_file() else None


def assert_not_trained(pairs: Sequence[tuple[Book, Unit]], trained: TrainedUnits | None, what: str) -> None:
    """Raise :class:`TrainedUnitError` when any of ``pairs`` is a trained unit."""
    if not trained:
        return
    bad = trained.overlap(pairs)
    if bad:
        raise TrainedUnitError(
            f"{what}: {len(bad)} unit(s) were in the student's training data and cannot be used to "
            f"evaluate it: {', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}")


def refuse_trained_chunks(method: str, chunks: Sequence[Any], profile_or_record: str | TrainedUnits,
                          books: Sequence[Book] = ()) -> None:
    """Evaluation guard for a ``litseg-lite*`` chunk set: no chunk of a trained unit (by id, or by
    unit text when ``books`` are given)."""
    if not str(method).startswith("litseg-lite"):
        return
    trained = (profile_or_record if isinstance(profile_or_record, TrainedUnits)
               else profile_record(profile_or_record))
    if not trained:
        return
    units = {(c.book_id, c.unit_id) for c in chunks}
    bad = sorted(f"{b}/{u}" for b, u in units & trained.keys)
    by_id = {b.book_id: b for b in books}
    fps = trained.fingerprints
    for b, u in sorted(units - trained.keys):
        if b in by_id:
            try:
                unit = by_id[b].unit(u)
            except KeyError:
                continue
            if unit_fingerprint(by_id[b], unit) in fps:
                bad.append(f"{b}/{u}")
    if bad:
        raise TrainedUnitError(
            f"chunk set {method!r} contains {len(bad)} unit(s) the student was trained on "
            f"({', '.join(bad[:10])}); Lite is never evaluated on its training units")


def refuse_trained_chunk_file(method: str, path: Path, chunks: Sequence[Any]) -> None:
    """:func:`refuse_trained_chunks` for a chunk artifact ``<artifacts>/chunks/<method>.jsonl``,
    against the trained-units record of the same ``<artifacts>`` folder."""
    record = Path(path).resolve().parent.parent / "lite" / "trained_units.json"
    if str(method).startswith("litseg-lite") and record.is_file():
        refuse_trained_chunks(method, chunks, TrainedUnits.load(record))
