"""The one shape of every segmentation method: :class:`Method`, its :class:`Models`, its :class:`Segmentation`.

A method is

* a **name** (``"lumber"``, ``"litseg"``, ``"lib:semchunk"``) and what it **needs** (``"text"``: rules only,
  ``"embedder"``, ``"llm"``);
* an **options class** beside the method (``LumberOptions`` in chunkers/llm_chunkers.py, ``LitSegOptions`` in
  litseg/segmenter.py, ...): a frozen :class:`~litseg_nb.config.Options` dataclass whose fields are
  every knob that changes the method's chunks, taken out of the method's **stage config**
  (``BaselinesConfig``, ``LitSegConfig``, ``LiteConfig``, ``LibraryConfig``) by :meth:`Method.options_of`;
* one **segment entry**, ``run(items, options, models) -> Segmentation``: chunks per ``(book, unit)``
  pair, in order, and the method's counters (fallbacks, invalid replies, details);
* optionally a **prepare** step, ``prepare(items, options, models) -> options``, run once on the whole
  input before it is cut into batches (LitSeg's length calibration), so that batches give the same
  chunks as one call.

The **cache key** of a method's chunks is derived, never listed by hand: :meth:`Method.key_parts` is the
method's name, its options (every field), the options of the methods it builds on (the base of a
``+merge`` variant, the chunks a completion rewrites) and the identity of the models it is given.
Two methods with equal options differ by name; changing any option changes the key.

The registry of every method is :mod:`litseg_nb.segmenters.registry`; this module sits below it and
imports no method.
"""
from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..config import Options
from ..core.schema import Book, Chunk, Unit

NEEDS = ("text", "embedder", "llm")

#: ``(book, unit)`` pairs, the input of every method
Items = Sequence[tuple[Book, Unit]]


@dataclass(frozen=True)
class Models:
    """What a method is given besides its options: the LLM backend, the embedder and (for the methods
    that count tokens) an already-loaded statistics tokenizer; None = not given (the tokenizer is
    then loaded from the options' ``tokenizer``)."""

    backend: Any = None
    embedder: Any = None
    tokenizer: Any = None

    def identity(self, needs: str, cfg: Any = None) -> dict[str, Any]:
        """The models part of a cache key: the model ids of what ``needs`` uses (from the models, else
        from the stage config ``cfg``)."""
        out: dict[str, Any] = {}
        if needs == "llm":
            out["llm"] = getattr(self.backend, "model_id", None) or getattr(getattr(cfg, "llm", None), "model", None)
        if needs == "embedder":
            out["embedding"] = getattr(self.embedder, "model_id", None) or getattr(
                getattr(cfg, "embedding", None), "model", None)
        return out


@dataclass
class Segmentation:
    """The typed result of a method on ``(book, unit)`` pairs: ``per_unit[i]`` are the chunks of the
    i-th pair; ``fallbacks`` and ``invalid_replies`` count the paper's fallbacks and the LLM replies that
    were invalid; ``details`` holds what else the method reports (LitSeg's length reference, a library
    splitter's alignment counts, ...)."""

    per_unit: list[list[Chunk]]
    fallbacks: int = 0
    invalid_replies: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def chunks(self) -> list[Chunk]:
        return [c for cs in self.per_unit for c in cs]

    def counters(self) -> dict[str, Any]:
        """The counters as one mapping (``fallbacks``, ``invalid_replies`` and the details)."""
        return {"fallbacks": self.fallbacks, "invalid_replies": self.invalid_replies, **self.details}


def _project(options: type[Options]) -> Callable[[Any], Options]:
    return options.of


@dataclass(frozen=True, kw_only=True)
class Method:
    """One registered segmentation method (keyword-only: every field is named where it is declared).

    ``run`` is the segment entry; a ``+merge`` variant has no ``run`` of its own but a ``base`` method
    whose chunks the dynamic merge (its :class:`~litseg_nb.chunkers.base.MergeOptions`) combines.
    ``uses`` are methods whose chunks this one builds on: the registry runs them on the same units and
    passes their :class:`Segmentation` to ``run`` after ``models`` (their options enter the key).
    ``build`` takes the options out of the stage config (default: :meth:`Options.of`, the fields of
    the options class); ``config`` is the stage config's ``"module:Class"``. ``check(options, models)``
    refuses options and models that cannot work together before anything runs; ``prepare`` is the
    step over the whole input (see the module docstring).
    """

    name: str
    needs: str
    options: type[Options]
    config: str
    run: Callable[..., Segmentation] | None = None  # (items, options, models, *segmentations of uses)
    base: "Method | None" = None
    uses: tuple["Method", ...] = ()
    build: Callable[[Any], Options] | None = None
    check: Callable[[Any, Models], None] | None = None
    prepare: Callable[[Items, Any, Models], Any] | None = None
    # when the prepare step depends on the input, given the stage config (None: whenever there is one)
    prepares_when: Callable[[Any], bool] | None = None
    internal: bool = False  # a building block of another method, not a method of its own
    baseline: bool = False  # one of notebook 04's baselines (chunkers.config.BASELINES)

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise ValueError(f"{self.name}: needs must be one of {NEEDS}, got {self.needs!r}")
        if (self.run is None) == (self.base is None):
            raise ValueError(f"{self.name}: give exactly one of run and base")
        if not (isinstance(self.options, type) and issubclass(self.options, Options)):
            raise ValueError(f"{self.name}: options must be an Options class, got {self.options!r}")

    @property
    def needs_llm(self) -> bool:
        return self.needs == "llm"

    @property
    def needs_embedder(self) -> bool:
        return self.needs == "embedder"

    @property
    def is_baseline(self) -> bool:
        return self.baseline

    def whole_input(self, cfg: Any) -> bool:
        """True when, with stage config ``cfg``, the method's prepare step depends on its input (LitSeg
        calibrating its length): its batches cannot pool several books' units, each book prepares on
        its own."""
        return self.prepare is not None and (self.prepares_when is None or bool(self.prepares_when(cfg)))

    def config_class(self) -> type:
        module, name = self.config.split(":")
        return getattr(importlib.import_module(module), name)

    def options_of(self, cfg: Any) -> Options:
        """The method's options held by its stage config ``cfg``."""
        return (self.build or _project(self.options))(cfg)

    def key_parts(self, cfg: Any, models: Models | None = None) -> dict[str, Any]:
        """Everything that decides this method's chunks of given units: the derived cache key."""
        parts: dict[str, Any] = {"method": self.name, "options": self.options_of(cfg).to_dict()}
        deps = ([self.base] if self.base is not None else []) + list(self.uses)
        if deps:
            parts["builds_on"] = [dep.key_parts(cfg) for dep in deps]
        if models is not None:
            parts["models"] = models.identity(self.needs, cfg)
        return parts

    def key(self, cfg: Any, models: Models | None = None) -> str:
        """:meth:`key_parts` as one hash."""
        blob = json.dumps(self.key_parts(cfg, models), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def per_unit_lists(items: Items, chunks: Sequence[Chunk]) -> list[list[Chunk]]:
    """``chunks`` (of several units, any order) as the lists of the pairs of ``items``."""
    by_unit: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
    return [by_unit.get((b.book_id, u.unit_id), []) for b, u in items]
