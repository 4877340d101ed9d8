"""Notebook 02's annotation on a Ray cluster (extra ``ray``): each actor holds ONE engine and annotates whole
books with :func:`~litseg_nb.litseg.pipeline.annotate_units` itself (a book's requests share its prefix cache);
keys, resuming and records are those of one process, the actors' usage merges into the driver's ledger."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..core.ray_cluster import cluster, parse_address, run_on_actors
from ..core.schema import Book, Unit
from ..errors import LitsegError, UsageError
from ..llm import UsageLedger, make_backend
from .config import LitSegConfig
from .pipeline import annotate_units


class RayAnnotationError(LitsegError):
    """A Ray worker died while annotating a book (its finished books are kept: rerun to resume)."""


class BookAnnotator:
    """A Ray actor holding one engine, built on its first book."""

    def __init__(self, cfg: LitSegConfig) -> None:
        self.cfg = cfg
        self.backend: Any = None

    def annotate(self, items: list[tuple[Book, Unit]], kwargs: dict[str, Any]
                 ) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
        """One book's units: (records, chat calls, this book's usage rows)."""
        if self.backend is None:
            self.backend = make_backend(self.cfg.llm, UsageLedger())
        self.backend.ledger.reset()
        run = annotate_units(items, self.backend, self.cfg, progress=False, **kwargs)
        return run.records, run.llm_calls, self.backend.ledger.rows()


class RayAnnotator:
    """The cluster of ``cfg.ray`` as :func:`~litseg_nb.litseg.pipeline.annotate_units`' backend: the units left
    to do go book by book to the actors. ``backend`` (this process's engine, the one the actors rebuild)
    names the engine in the keys and holds the ledger; without it both come from ``cfg.llm``."""

    def __init__(self, cfg: LitSegConfig, backend: Any = None) -> None:
        if not cfg.ray.address:
            raise UsageError("RayAnnotator needs LitSegConfig.ray.address (notebook 02's ray_address)")
        self.cfg = cfg
        self.ledger: UsageLedger | None = getattr(backend, "ledger", None)
        self.name = getattr(backend, "name", cfg.llm.backend)
        self.model_id = getattr(backend, "model_id", cfg.llm.lora_adapter or cfg.llm.model)

    def annotate_books(self, items: Sequence[tuple[Book, Unit]], cfg: LitSegConfig,
                       keep: Callable[[list[dict[str, Any]]], None], **kwargs: Any) -> int:
        """Annotate ``items`` book by book on the actors, ``keep(records)`` as each book comes back; the chat calls."""
        books: dict[str, list[tuple[Book, Unit]]] = {}
        for book, unit in items:
            books.setdefault(book.book_id, []).append((book, unit))
        if not books:
            return 0
        calls = 0

        def on_result(book_id: str, value: Any) -> None:
            nonlocal calls
            records, n, usage = value
            calls += n
            if self.ledger is not None:
                self.ledger.merge(usage)
            keep(records)

        def on_death(book_id: str, exc: BaseException) -> None:
            raise RayAnnotationError(f"the Ray worker annotating book {book_id} died ({type(exc).__name__}); "
                                     "the books finished before are kept; rerun to resume")

        opts = self.cfg.ray
        with cluster(parse_address(opts.address), num_cpus=opts.cpus or None) as ray:
            res = ray.cluster_resources()
            n = opts.actors or max(1, int(res.get("GPU", 0) // opts.gpus_per_actor if opts.gpus_per_actor
                                          else res.get("CPU", 1)))
            run_on_actors(ray, BookAnnotator, (cfg,), min(n, len(books)), list(books),
                          lambda actor, book_id: actor.annotate.remote(books[book_id], kwargs), on_result, on_death,
                          name="litseg-annotate", num_gpus=opts.gpus_per_actor)
        return calls


def annotator_for(cfg: LitSegConfig, backend: Any) -> Any:
    """What notebook 02 annotates with: ``backend`` itself when ``cfg.ray.address`` is empty, else a
    :class:`RayAnnotator` over ``cfg.ray`` (the same records either way)."""
    return RayAnnotator(cfg, backend) if cfg.ray.address else backend
