"""Notebook 02's annotation (LitSeg's three stages over a corpus) on a Ray cluster: :func:`annotate_units_on_ray`.

The single-process :func:`~litseg_nb.litseg.pipeline.annotate_units` drives one backend. Past one GPU,
the same function runs inside ``actors`` Ray actors (the optional extra ``ray``), each holding ONE
engine built from ``cfg.llm`` (a vLLM engine on a GPU node with ``gpus_per_actor=1``, or a client of
an OpenAI-compatible server):

* **a book is the unit of work**: an actor annotates all of a book's selected units, with
  :func:`~litseg_nb.litseg.pipeline.annotate_units` itself, so each unit's stages run in their order
  (1, 2, 3, each seeing the previous replies) and every request of a book — the shared system prompt,
  the book's units repeated across its three stages — reaches the same engine, whose prefix cache
  holds them (the prefix cache is per engine: spreading a unit's stages over engines would recompute
  its prompt on each). Books go to whichever actor is free next;
* **resumable as the single process is**: records already done in ``annotations_path`` (by either
  path: the keys are the same, since they hash the backend's name and model, not where it ran) are
  handed to the actor that gets their book and are not asked again; each book's new records are
  appended to ``annotations_path`` by this process as soon as the book is done, and the file is
  rewritten in input order at the end, as :func:`annotate_units` does;
* **failures**: an :class:`~litseg_nb.llm.base.LLMError` in an actor stops the run (the books finished
  before it are kept in ``annotations_path``) and is raised here; a worker that dies raises
  :class:`RayAnnotationError` naming the book (rerun to resume).

The options live in :class:`RayOptions` (frozen, unknown keys refused), so a notebook's parameters or
a config file can carry them; ``RayOptions().address == ""`` means "not on Ray".
The length reference is given (calibrate first, or take the config's value): calibration is a
separate, small run.
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.ray_cluster import cluster, parse_address, task_env
from ..core.schema import Book, Unit, write_jsonl
from ..errors import LitsegError, UsageError
from ..llm import make_backend
from .config import LitSegConfig
from .pipeline import AnnotationRun, _append, annotate_units, read_annotations
from .prompting import PAPER_LENGTH_REFERENCE, LengthReference


class RayAnnotationError(LitsegError):
    """A Ray worker died while annotating a book (its finished books are kept: rerun to resume)."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide the annotation runs: ``address`` as :func:`~litseg_nb.core.ray_cluster.parse_address`
    reads it (``""``: not on Ray; ``local``, ``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), ``actors`` engines
    (0: one per cluster GPU when ``gpus_per_actor`` > 0, else per CPU), ``gpus_per_actor`` GPUs each engine
    reserves, ``cpus`` of a local cluster (0: this machine's)."""

    address: str = ""
    actors: int = 0
    gpus_per_actor: float = 0.0
    cpus: int = 0

    def __post_init__(self) -> None:
        if self.address:
            parse_address(self.address)  # RayAddressError: a usage error naming the value
        if self.actors < 0 or self.cpus < 0 or not self.gpus_per_actor >= 0:
            raise UsageError(f"RayOptions: actors, cpus and gpus_per_actor must be >= 0, got {self}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RayOptions":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UsageError(f"RayOptions: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**dict(values))


class BookAnnotator:
    """A Ray actor holding one engine (``make_backend(cfg.llm)``, built on its first book)."""

    def __init__(self, cfg: LitSegConfig) -> None:
        self.cfg = cfg
        self.backend: Any = None

    def annotate(self, items: list[tuple[Book, Unit]], done: list[dict[str, Any]], kwargs: dict[str, Any]
                 ) -> tuple[list[dict[str, Any]], int, int]:
        """One book's units: (records in input order, chat calls, units resumed from ``done``)."""
        if self.backend is None:
            self.backend = make_backend(self.cfg.llm)
        with tempfile.TemporaryDirectory(prefix="litseg-ray-annotate-") as tmp:
            path = Path(tmp) / "annotations.jsonl"
            if done:
                write_jsonl(path, done)
            run = annotate_units(items, self.backend, self.cfg, annotations_path=path, progress=False, **kwargs)
        return run.records, run.llm_calls, run.resumed


def annotate_units_on_ray(items: Sequence[tuple[Book, Unit]], cfg: LitSegConfig, ray_options: RayOptions, *,
                          length_reference: LengthReference = PAPER_LENGTH_REFERENCE,
                          annotations_path: Path | None = None, method: str = "litseg",
                          structured_output: bool | None = None, max_retries: int | None = None,
                          progress: bool = True) -> AnnotationRun:
    """:func:`~litseg_nb.litseg.pipeline.annotate_units` over ``ray_options``' cluster (module docstring):
    the same records (one per unit, input order) and the same ``annotations_path`` file."""
    # deferred: tqdm.auto picks the notebook or terminal bar at run time
    from tqdm.auto import tqdm

    if not ray_options.address:
        raise UsageError("annotate_units_on_ray needs RayOptions.address (local, auto, HOST:PORT or ray://HOST:PORT)")
    t0 = time.perf_counter()
    books: dict[str, list[tuple[Book, Unit]]] = {}
    seen: set[tuple[str, str]] = set()
    for book, unit in items:
        if (book.book_id, unit.unit_id) in seen:
            raise ValueError(f"unit {unit.unit_id} of book {book.book_id} given twice")
        seen.add((book.book_id, unit.unit_id))
        books.setdefault(book.book_id, []).append((book, unit))
    prior: dict[str, list[dict[str, Any]]] = {}
    if annotations_path is not None:
        for rec in read_annotations(Path(annotations_path)):
            if rec.get("status") == "done" and (rec.get("book_id"), rec.get("unit_id")) in seen:
                prior.setdefault(rec["book_id"], []).append(rec)
    kwargs = {"length_reference": length_reference, "method": method, "structured_output": structured_output,
              "max_retries": max_retries}
    address = parse_address(ray_options.address)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    calls = resumed = 0
    with cluster(address, num_cpus=ray_options.cpus or None) as ray:
        # deferred: ray is the optional extra (cluster() has checked it is installed)
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

        res = ray.cluster_resources()
        n = ray_options.actors or max(1, int(res.get("GPU", 0) // ray_options.gpus_per_actor if ray_options.gpus_per_actor
                                             else res.get("CPU", 1)))
        n = min(n, len(books)) or 1
        opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "runtime_env": {"env_vars": task_env()}}
        if ray_options.gpus_per_actor:
            opts["num_gpus"] = ray_options.gpus_per_actor
        Actor = ray.remote(**opts)(BookAnnotator)
        actors = [Actor.remote(cfg) for _ in range(n)]
        queue = list(books)
        pending: dict[Any, tuple[str, Any]] = {}

        def submit(actor: Any) -> None:
            if queue:
                book_id = queue.pop(0)
                pending[actor.annotate.remote(books[book_id], prior.get(book_id, []), kwargs)] = (book_id, actor)

        bar = tqdm(total=len(items), desc=f"{method} on Ray ({n} engine(s))", unit="unit", disable=not progress)
        try:
            for a in actors:
                submit(a)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                book_id, actor = pending.pop(ready[0])
                try:
                    recs, c, r = ray.get(ready[0])
                except RayTaskError as exc:  # LLMError, a bad reply the pipeline raised ...: the cause itself
                    raise exc.as_instanceof_cause() from None
                except (RayActorError, WorkerCrashedError) as exc:
                    raise RayAnnotationError(f"the Ray worker annotating book {book_id} died "
                                             f"({type(exc).__name__}); the books finished before are kept in "
                                             f"{annotations_path}; rerun to resume") from None
                old = {rec["key"] for rec in prior.get(book_id, [])}
                for rec in recs:
                    records[(rec["book_id"], rec["unit_id"])] = rec
                    if annotations_path is not None and rec["key"] not in old:
                        _append(Path(annotations_path), rec)
                calls += c
                resumed += r
                bar.update(len(recs))
                submit(actor)
        finally:
            bar.close()
            for a in actors:
                ray.kill(a)
    ordered = [records[(b.book_id, u.unit_id)] for b, u in items]
    if annotations_path is not None:
        write_jsonl(Path(annotations_path), ordered)
    structured = cfg.llm.structured_output if structured_output is None else bool(structured_output)
    return AnnotationRun(ordered, time.perf_counter() - t0, calls, resumed,
                         Path(annotations_path) if annotations_path is not None else None,
                         length_reference, structured, method)

