"""Every segmentation method behind one contract, and the one registry of them.

* :mod:`.contract` – :class:`~.contract.Method` (name, needs, options class, segment entry, derived
  cache key), :class:`~.contract.Models`, :class:`~.contract.Segmentation` (the typed result).
* :mod:`.registry` – every method registered (the baselines, ``litseg``, ``litseg-lite``, ``lib:``
  splitters): :func:`~.registry.get_method`, :func:`~.registry.segment_units`, :func:`~.registry.chunk_units`.
* :mod:`.book_runs` – notebook 04's cached per-book runner of the baselines (``run_chunker``,
  ``run_methods``, ``RunReport``) and of the ``lib:`` presets.

This package sits above the method packages (:mod:`litseg_nb.chunkers`, :mod:`litseg_nb.litseg`,
:mod:`litseg_nb.lite`): they never import it.
"""
from .contract import Method, Models, Segmentation
from .registry import METHOD_NAMES, REGISTRY, SEGMENTERS, chunk_units, get_chunker, get_method, segment_units
from .book_runs import BookRun, RunReport, run_chunker, run_library_presets, run_methods

__all__ = ["BookRun", "METHOD_NAMES", "Method", "Models", "REGISTRY", "RunReport", "SEGMENTERS", "Segmentation",
           "chunk_units", "get_chunker", "get_method", "run_chunker", "run_library_presets", "run_methods",
           "segment_units"]
