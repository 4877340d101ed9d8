"""Every stage config class of the package, found by importing the modules that define them.

The rehearsal's overrides (:func:`litseg_nb.front.rehearse.notebook_sets`) and ``run --set``'s key check
(:func:`litseg_nb.front.params.check_set_keys`) take the classes from here, so a config a notebook builds
inside (notebook 06's ``BoundaryConfig``, 05's ``BaselinesConfig``) is reached like the notebook's own.
A new stage config module is added to :data:`CONFIG_MODULES` (tests/test_rehearse_audit.py checks that
every ``StageConfig`` subclass in the package is found).
"""
from __future__ import annotations

import importlib

from ..config import StageConfig

#: the modules defining stage configs (imported by name: they sit above this module)
CONFIG_MODULES = ("litseg_nb.corpus", "litseg_nb.litseg.config", "litseg_nb.lite.config", "litseg_nb.chunkers.config",
                  "litseg_nb.chunkers.library", "litseg_nb.rag.config", "litseg_nb.evaluation.segment_quality",
                  "litseg_nb.evaluation.boundaries", "litseg_nb.evaluation.efficiency")


def stage_config_classes() -> list[type[StageConfig]]:
    """Every subclass of :class:`~litseg_nb.config.StageConfig` defined in the package, by name."""
    for m in CONFIG_MODULES:
        importlib.import_module(m)
    out: dict[str, type] = {}
    todo = list(StageConfig.__subclasses__())
    while todo:
        c = todo.pop()
        if c.__module__.startswith("litseg_nb.") and not c.__module__.startswith("litseg_nb.tests"):
            out[c.__name__] = c
        todo.extend(c.__subclasses__())
    return [out[k] for k in sorted(out)]
