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

* **usage**: each actor's engine records its calls in a ledger of its own; the rows of every book come
  back with its records and are merged into ``ledger`` (the notebook's, saved to ``usage/02.csv`` for
  notebook 08), so a run on Ray costs what the same run in one process costs in the ledger.

The options are :class:`~litseg_nb.litseg.config.RayOptions`, the field ``LitSegConfig.ray`` (notebook
02's parameter ``ray_address``; frozen, unknown keys refused); ``RayOptions().address == ""`` means
"not on Ray". :func:`annotator_for` gives notebook 02 one object for both places (:class:`RayAnnotator`
on Ray, the backend itself in this process), which :func:`~litseg_nb.litseg.pipeline.annotate_with`
and the calibration take.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from ..core.ray_cluster import cluster, parse_address, task_env
from ..core.schema import Book, Unit, write_jsonl
from ..errors import LitsegError, UsageError
from ..llm import make_backend
from ..llm import UsageLedger
from .config import LitSegConfig, RayOptions  # noqa: F401  (RayOptions: re-exported, its home was here)
from .pipeline import AnnotationRun, _append, annotate_units, read_annotations
from .prompting import PAPER_LENGTH_REFERENCE, LengthReference


class RayAnnotationError(LitsegError):
    """A Ray worker died while annotating a book (its finished books are kept: rerun to resume)."""


class BookAnnotator:
    """A Ray actor holding one engine (``make_backend(cfg.llm)``, built on its first book)."""

    def __init__(self, cfg: LitSegConfig) -> None:
        self.cfg = cfg
        self.backend: Any = None

    def annotate(self, items: list[tuple[Book, Unit]], done: list[dict[str, Any]], kwargs: dict[str, Any]
                 ) -> tuple[list[dict[str, Any]], int, int, list[dict[str, Any]]]:
        """One book's units: (records in input order, chat calls, units resumed from ``done``, the usage
        rows of this book: its engine's ledger, emptied before the book)."""
        if self.backend is None:
            self.backend = make_backend(self.cfg.llm, UsageLedger())
        self.backend.ledger.reset()
        with tempfile.TemporaryDirectory(prefix="litseg-ray-annotate-") as tmp:
            path = Path(tmp) / "annotations.jsonl"
            if done:
                write_jsonl(path, done)
            run = annotate_units(items, self.backend, self.cfg, annotations_path=path, progress=False, **kwargs)
        return run.records, run.llm_calls, run.resumed, self.backend.ledger.rows()


def annotate_units_on_ray(items: Sequence[tuple[Book, Unit]], cfg: LitSegConfig, ray_options: RayOptions, *,
                          length_reference: LengthReference = PAPER_LENGTH_REFERENCE,
                          annotations_path: Path | None = None, method: str = "litseg",
                          structured_output: bool | None = None, max_retries: int | None = None,
                          progress: bool = True, ledger: UsageLedger | None = None) -> AnnotationRun:
    """:func:`~litseg_nb.litseg.pipeline.annotate_units` over ``ray_options``' cluster (module docstring):
    the same records (one per unit, input order) and the same ``annotations_path`` file; the actors'
    usage is merged into ``ledger`` (book by book, as each comes back)."""
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
                    recs, c, r, usage = ray.get(ready[0])
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
                if ledger is not None:
                    ledger.merge(usage)
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



class RayAnnotator:
    """Notebook 02's annotation on the cluster of ``cfg.ray``: :meth:`annotate` takes what
    :func:`~litseg_nb.litseg.pipeline.annotate_units` takes but the backend, and merges the actors' usage
    into ``ledger``. ``backend`` (this process's engine) is what the notebook still needs here: its
    walk-through and token counts; on a GPU node it holds a GPU of its own (leave one: ``RayOptions.actors``)."""

    def __init__(self, cfg: LitSegConfig, backend: Any) -> None:
        if not cfg.ray.address:
            raise UsageError("RayAnnotator needs LitSegConfig.ray.address (notebook 02's ray_address)")
        self.cfg = cfg
        self.backend = backend
        self.ledger: UsageLedger | None = getattr(backend, "ledger", None)
        self.name = getattr(backend, "name", "")  # the engine the actors build: the same config
        self.model_id = getattr(backend, "model_id", "")

    def annotate(self, items: Sequence[tuple[Book, Unit]], cfg: LitSegConfig | None = None, **kwargs: Any
                 ) -> AnnotationRun:
        """``cfg`` (default: this annotator's) says how to annotate; the engine the actors build is this
        annotator's (``self.cfg.llm``, the config of ``backend``), as in one process the backend is."""
        kwargs.pop("batch_by_book", None)  # a book per actor: always by book
        run_cfg = self.cfg if cfg is None else cfg.replace(llm=self.cfg.llm.to_dict())
        return annotate_units_on_ray(items, run_cfg, self.cfg.ray, ledger=self.ledger, **kwargs)

    def describe(self) -> str:
        return self.cfg.ray.describe()


def annotator_for(cfg: LitSegConfig, backend: Any) -> Any:
    """What notebook 02 annotates with: ``backend`` itself (this process) when ``cfg.ray.address`` is
    empty, else a :class:`RayAnnotator` over ``cfg.ray`` (the same records either way)."""
    return RayAnnotator(cfg, backend) if cfg.ray.address else backend
