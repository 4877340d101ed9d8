"""``segment DIR --ray [ADDRESS]``: the library run of :mod:`litseg_nb.front.batch_segment` on a Ray cluster.

The same per-book pipeline, spread over the cluster's workers (the optional extra ``ray``):

* **One unit of work per book.** A worker reads the book, cleans it, finds its units and segments
  them (:func:`segment_book`: :func:`~litseg_nb.api.prepare_book`, :func:`~litseg_nb.api.segment_items`,
  :func:`~litseg_nb.api.iter_segment`, as the single process does) and sends back the book and its
  chunks. A rule-based method runs as plain Ray tasks (one CPU each); a method with a model (an LLM
  method, ``semantic``) runs on ``--ray-actors`` actors that each hold ONE backend and embedder for the
  whole run (an engine per actor: on a GPU node give each actor a GPU with ``--ray-gpus``; over
  OpenAI-compatible servers each actor keeps ``llm.max_concurrency`` requests per ``--base-url`` in flight).
* **The driver writes.** Skipping complete books, refusing foreign outputs, the atomic writer, the
  raw spans, the token counts and the meta file are the single process's own code, run on the machine
  that started the command; so the outputs are byte-identical to a run without ``--ray``, the workers
  need no shared file system for the outputs (they do need the input files and the models at the same
  paths, and the package installed), and a killed run resumes: a rerun skips every book already written.
* **Failures.** A book that cannot be read or segmented is listed, as without ``--ray``. A worker that
  dies (killed, out of memory, its node lost) fails the book it held ("Ray worker died ... rerun to
  resume"); a new actor takes the next books. A dead LLM server stops the run as without
  ``--ray``: no new book is started, the books in flight are finished or written with their finished
  units (``complete: false``), and one line names the server.

``--ray`` alone starts a local cluster of this machine (its CPUs, or ``--ray-cpus``), shut down at the
end; see :mod:`litseg_nb.core.ray_cluster` for the addresses. The environment variables that place
outputs, caches, models and data (:data:`~litseg_nb.core.ray_cluster.TASK_ENV`) travel with every
task; an API key does not (set it on the nodes).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..api import build_models, checkpoint_units, iter_segment, prepare_book, segment_items
from ..chunkers.base import ChunkerError
from ..core.ray_cluster import cluster, parse_address, task_env
from ..llm.base import LLMError
from ..llm.embeddings import EmbeddingError
from ..llm.request_cache import CachedBackend
from ..segmenters.registry import get_method
from .batch_segment import (BookResult, SegmentUsageError, _book_calls, _existing_foreign, _finish, _one_line,
                            _server_name, _sha256, is_complete, paths_of)

#: what a worker's book can fail with and the run go on (the single process's list)
BOOK_ERRORS = (ValueError, OSError, ChunkerError, UnicodeError, AssertionError)


@dataclass
class BookOutcome:
    """What a worker sends back for one book: ``status`` done | failed | stopped."""

    status: str
    book: Any = None
    chunks: list[Any] | None = None
    calls: int = 0
    reason: str = ""
    seconds: float = 0.0


def segment_book(path: str, cfg: Any, method: str, max_units: int, backend: Any = None,
                 embedder: Any = None) -> BookOutcome:
    """One book through the single process's pipeline (clean, units, segment). A dead backend
    (:class:`~litseg_nb.llm.base.LLMError`, :class:`~litseg_nb.llm.embeddings.EmbeddingError`) returns
    ``stopped`` with the units finished before it."""
    t0 = time.perf_counter()
    spec = get_method(method)
    try:
        book = prepare_book(Path(path), cfg)
        items = segment_items(book, max_units)
    except BOOK_ERRORS as exc:
        return BookOutcome("failed", reason=f"{type(exc).__name__}: {_one_line(exc)}",
                           seconds=time.perf_counter() - t0)
    calls0 = _book_calls(backend, book.book_id)
    size = None if spec.whole_input(cfg) else checkpoint_units(cfg, spec.needs_llm)
    chunks: list[Any] = []
    try:
        for part in iter_segment(spec, items, cfg, backend, embedder, batch_units=size):
            chunks.extend(part)
    except (LLMError, EmbeddingError) as exc:
        return BookOutcome("stopped", book, chunks, _book_calls(backend, book.book_id) - calls0,
                           f"{type(exc).__name__}: {_one_line(exc)}", time.perf_counter() - t0)
    except BOOK_ERRORS as exc:
        return BookOutcome("failed", reason=f"{type(exc).__name__}: {_one_line(exc)}",
                           seconds=time.perf_counter() - t0)
    return BookOutcome("done", book, chunks, _book_calls(backend, book.book_id) - calls0,
                       seconds=time.perf_counter() - t0)


def _task(path: str, cfg: Any, method: str, max_units: int) -> BookOutcome:
    """A rule-based method's book (a plain Ray task: no model to hold)."""
    return segment_book(path, cfg, method, max_units)


class BookSegmenter:
    """A Ray actor holding one backend and embedder for the run (built once, on its first book)."""

    def __init__(self, cfg: Any, method: str, max_units: int) -> None:
        self.cfg, self.method, self.max_units = cfg, method, max_units
        self.backend = self.embedder = None
        self.built = False

    def segment(self, path: str) -> BookOutcome:
        if not self.built:
            try:
                self.backend, self.embedder = build_models(get_method(self.method), self.cfg)
            except (LLMError, EmbeddingError) as exc:
                return BookOutcome("stopped", reason=f"{type(exc).__name__}: {_one_line(exc)}")
            self.built = True
        return segment_book(path, self.cfg, self.method, self.max_units, self.backend, self.embedder)

    def cache_counts(self) -> tuple[int, int, str]:
        """(hits, misses, cache path) of this actor's request cache ((0, 0, "") without one)."""
        b = self.backend
        if isinstance(b, CachedBackend):
            return b.hits, b.misses, str(b.cache.path)
        return 0, 0, ""


@dataclass
class _Pending:
    res: BookResult
    input_sha: str


class RayRun:
    """The ``--ray`` counterpart of ``batch_segment._Run``: same ``results`` and ``stopped``."""

    def __init__(self, args: Any, cfg: Any, spec: Any, files: Sequence[Path], bases: Sequence[Path],
                 fingerprint: str, single: bool):
        self.args, self.cfg, self.spec, self.fingerprint, self.single = args, cfg, spec, fingerprint, single
        self.address = parse_address(args.ray)
        self.files, self.bases = list(files), list(bases)
        self.results: list[BookResult] = []
        self.stopped: str | None = None
        self.backend = None  # the models live in the actors (see cache_line)
        self.cache_line = ""
        self.bar: Any = None

    def close_bars(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def _plan(self) -> list[_Pending]:
        """Every book's skip / refuse decision before any work (the single process makes it as it
        opens each book; here all books are sent at once)."""
        todo: list[_Pending] = []
        for f, base in zip(self.files, self.bases):
            res = BookResult(f, base)
            self.results.append(res)
            t0 = time.perf_counter()
            try:
                input_sha = _sha256(f)
            except OSError as exc:
                res.status, res.reason = "failed", f"{type(exc).__name__}: {_one_line(exc)}"
                res.seconds = time.perf_counter() - t0
                continue
            if not self.args.force and is_complete(base, input_sha, self.fingerprint):
                meta = json.loads(paths_of(base)["meta"].read_text(encoding="utf-8"))
                res.status, res.reason = "skipped", "already complete (use --force to redo)"
                res.units, res.chunks = meta["n_units"], meta["n_chunks"]
                res.fallbacks = meta.get("fallbacks", {})
                continue
            foreign = _existing_foreign(base, input_sha, self.fingerprint)
            if foreign is not None and not self.args.force:
                raise SegmentUsageError(f"output {foreign} exists (from another input or other settings); "
                                        "pass --force to replace it, or choose another -o")
            todo.append(_Pending(res, input_sha))
        return todo

    def go(self) -> None:
        # deferred: tqdm.auto picks the notebook or terminal bar at run time (as batch_segment does)
        from tqdm.auto import tqdm

        todo = self._plan()
        if not todo:
            return
        uses_models = self.spec.needs_llm or self.spec.needs_embedder
        with cluster(self.address, num_cpus=self.args.ray_cpus or None) as ray:
            self.bar = tqdm(total=len(todo), desc=f"segment {self.args.method} (ray)", unit="book",
                            disable=len(self.files) < 2, delay=1)
            env = {"env_vars": task_env()}
            if uses_models:
                self._with_actors(ray, todo, env)
            else:
                task = ray.remote(num_cpus=1, max_retries=0, runtime_env=env)(_task)
                refs = {task.remote(str(p.res.source), self.cfg, self.args.method, self.args.max_units): p
                        for p in todo}
                self._collect(ray, refs, resubmit=None)

    def _with_actors(self, ray: Any, todo: list[_Pending], env: dict[str, Any]) -> None:
        # deferred: ray is the optional extra; this module is only imported with it installed
        from ray.exceptions import RayActorError

        n = self.args.ray_actors or max(1, min(len(todo), int(ray.cluster_resources().get("CPU", 1))))
        # no restarts, no task retries: a dead actor fails the book it held and a new actor takes its place
        opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0, "runtime_env": env}
        if self.args.ray_gpus:
            opts["num_gpus"] = self.args.ray_gpus
        Actor = ray.remote(**opts)(BookSegmenter)
        run_id = f"{time.time_ns():x}"
        made = 0

        def new_actor() -> Any:
            nonlocal made
            made += 1
            return Actor.options(name=f"litseg-segment-{run_id}-{made - 1}").remote(self.cfg, self.args.method,
                                                                                   self.args.max_units)

        actors = [new_actor() for _ in range(n)]
        queue = list(todo)
        refs: dict[Any, tuple[_Pending, Any]] = {}

        def submit(actor: Any, died: bool = False) -> None:
            if died:  # its book is listed as failed; the next book goes to a fresh actor
                actors[actors.index(actor)] = actor = new_actor()
            if queue and self.stopped is None:
                p = queue.pop(0)
                refs[actor.segment.remote(str(p.res.source))] = (p, actor)

        for a in actors:
            submit(a)
        try:
            self._collect(ray, refs, resubmit=submit)
            counts, lost = [], 0
            for a in actors:
                try:
                    counts.append(ray.get(a.cache_counts.remote()))
                except RayActorError:  # an actor that died for good took its counts with it
                    lost += 1
            hits, misses = sum(c[0] for c in counts), sum(c[1] for c in counts)
            paths = sorted({c[2] for c in counts if c[2]})
            gone = f"; the counts of {lost} dead actor(s) are lost" if lost else ""
            if paths:
                total = hits + misses
                self.cache_line = (f"LLM request cache ({n} Ray actor(s)): {hits} of {total} "
                                   f"repl{'y' if total == 1 else 'ies'} from the cache, {misses} computed "
                                   f"({', '.join(paths)}){gone}")
            elif self.spec.needs_llm:
                self.cache_line = "LLM request cache: off (every reply computed)"
        finally:
            for a in actors:
                ray.kill(a)
        for p in queue:  # never started: the run stopped on a dead server
            self.results.remove(p.res)

    def _collect(self, ray: Any, refs: dict[Any, Any], resubmit: Any) -> None:
        # deferred: ray is the optional extra; this module is only imported with it installed
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError, ObjectLostError

        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            ref = ready[0]
            entry = refs.pop(ref)
            p, actor = entry if isinstance(entry, tuple) else (entry, None)
            try:
                out = ray.get(ref)
            except RayTaskError as exc:  # a bug in the worker: its traceback, after the books written so far
                raise exc.as_instanceof_cause() from None
            except (RayActorError, WorkerCrashedError, ObjectLostError) as exc:
                died = True
                out = BookOutcome("failed", reason=f"Ray worker died ({type(exc).__name__}: "
                                                   f"{_one_line(exc)[:160]}); rerun to resume")
            else:
                died = False
            self._record(p, out)
            if resubmit is not None:
                resubmit(actor, died)

    def _record(self, p: _Pending, out: BookOutcome) -> None:
        res = p.res
        res.seconds = out.seconds
        if out.status == "failed":
            res.status, res.reason = "failed", out.reason
        elif out.status == "done":
            _finish(res, res.output, out.book, out.chunks, self.cfg, self.args, p.input_sha, self.fingerprint,
                    complete=True, calls=out.calls)
        else:  # stopped: the server (or embedder) died; its finished units are written, marked incomplete
            what = "embedding model" if out.reason.startswith("EmbeddingError") else _server_name(self.cfg)
            self.stopped = self.stopped or f"{what}: {out.reason.split(': ', 1)[-1]}"
            if out.chunks:
                _finish(res, res.output, out.book, out.chunks, self.cfg, self.args, p.input_sha, self.fingerprint,
                        complete=False, calls=out.calls, stop_reason=self.stopped)
            res.status, res.reason = "stopped", out.reason
        if self.bar is not None:
            self.bar.update(1)
