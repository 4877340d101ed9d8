"""One notebook run's context: profile, label and output paths, in one object, and :func:`setup`,
the one seam between a notebook and the package.

Every notebook's first code cell after its ``parameters`` cell is::

    cfg, run = setup("05", globals())       # the stage config and this run's RunContext

:func:`setup` resolves the notebook's configuration once (or, under ``python -m litseg_nb run``,
takes the one the runner resolved and papermill injected: :data:`litseg_nb.front.params.RESOLVED`),
makes the run's ``--set`` overrides active for the configs the notebook builds inside, and returns
the typed config and the run's context. The parameters are named only in the ``parameters`` cell.

Every notebook saves its tables and figures under ``outputs/<profile>/`` with a label naming the
profile, models and data, writes its LLM usage ledger to ``artifacts/usage/<NN>.csv`` and a manifest.
:class:`RunContext` holds what those calls share (the profile, the notebook, the label, the parameters
and the resolved config), so a notebook says ``run.save_table(df, "05_latency")`` instead of threading
``profile`` and ``label`` through every call::

    run = run.with_note("hybrid=rrf")                               # label = cfg.describe() + " | hybrid=rrf"
    run.save_table(df, "05_latency", "ms per question")             # caption: label + " | ms per question"
    run.save_figure(fig, "05_dcg_recall_hybrid")
    run.save_usage(backend.ledger)                                  # artifacts/usage/05.csv
    run.write_manifest(data_files=..., extra=...)                   # parameters and config: the run's own

The files are written by the existing helpers (:func:`litseg_nb.core.artifacts.save_table`,
:func:`~litseg_nb.core.artifacts.save_figure`, :func:`~litseg_nb.core.artifacts.artifact_path`,
:func:`~litseg_nb.core.artifacts.write_manifest`), so names, contents and atomic writes are theirs.
``note`` extends the run's label for one table (``label + " | " + note``); ``label=`` replaces it
(a table that does not depend on the profile's models, say). :meth:`with_note` gives a context whose
label is extended for every later call, :meth:`relabel` one with another label. :meth:`takeaways`
prints what a table's numbers say, computed from the table (:mod:`litseg_nb.front.takeaways`), under the
run's label.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core import artifacts
from ..config import PROFILES, ConfigError, use_sets
from .params import RESOLVED, from_namespace, notebook_stem
from ..core.paths import outputs_dir
from ..core.safe_io import atomic_path
from ..llm.threads import follow_thread_budget
from .takeaways import best_per_metric, format_takeaways

_NOTEBOOK_RE = re.compile(r"^(\d{2})_[\w\-]+$")


def join_label(label: str, note: str | None) -> str:
    """``label | note`` (``label`` alone when there is no note)."""
    return f"{label} | {note}" if note else label


@dataclass(frozen=True)
class RunContext:
    """Profile, notebook (file stem, ``NN_name``) and label of one notebook run; from :func:`setup`
    also the notebook's parameters, its resolved stage config and the run's ``--set`` overrides (what
    :meth:`write_manifest` records)."""

    profile: str
    notebook: str
    label: str
    parameters: Mapping[str, Any] | None = field(default=None, compare=False)
    config: Any = field(default=None, compare=False)
    sets: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError(f"RunContext: unknown profile {self.profile!r}; expected one of {', '.join(PROFILES)}")
        if not _NOTEBOOK_RE.match(self.notebook):
            raise ValueError(f"RunContext: notebook {self.notebook!r} is not a notebook file stem like '05_rag_evaluation'")
        if not self.label.strip():
            raise ValueError(f"RunContext for {self.notebook}: empty label (every table names profile, models and data)")

    @classmethod
    def for_config(cls, notebook: str, cfg: Any, note: str | None = None, *,
                   parameters: Mapping[str, Any] | None = None,
                   sets: Sequence[tuple[str, Any]] = ()) -> "RunContext":
        """The context of ``notebook`` run with stage config ``cfg``: label ``cfg.describe()`` (+ note)."""
        return cls(cfg.profile, notebook, join_label(cfg.describe(), note), parameters=parameters, config=cfg,
                   sets=tuple((k, v) for k, v in sets))

    # ------------------------------------------------------------------ label
    def with_note(self, note: str | None) -> "RunContext":
        """The same run with ``note`` appended to its label (for every later table and figure)."""
        return replace(self, label=join_label(self.label, note))

    def relabel(self, label: str) -> "RunContext":
        """The same run under another label (a table set that names its own models and data)."""
        return replace(self, label=label)

    def label_for(self, note: str | None = None, label: str | None = None) -> str:
        """The caption of one table or figure: ``label`` if given, else the run's label (+ note)."""
        return label if label is not None else join_label(self.label, note)

    # ------------------------------------------------------------------ paths
    @property
    def number(self) -> str:
        """The notebook's two-digit number (``"05"``): the usage ledger's file name."""
        return self.notebook[:2]

    @property
    def outputs(self) -> Path:
        """``outputs/<profile>`` (created with its standard sub-folders)."""
        return outputs_dir(self.profile)

    def figure_path(self, filename: str) -> Path:
        """``outputs/<profile>/figures/<filename>`` (an HTML figure, for instance)."""
        return self.outputs / "figures" / filename

    def artifact_path(self, *parts: str) -> Path:
        """``outputs/<profile>/artifacts/<parts...>`` (a file; its folder is created)."""
        return artifacts.artifact_path(self.profile, *parts)

    def artifact_dir(self, *parts: str) -> Path:
        """``outputs/<profile>/artifacts/<parts...>`` (a folder, created)."""
        return artifacts.artifact_dir(self.profile, *parts)

    # ------------------------------------------------------------------ saving
    def save_table(self, df: Any, name: str, note: str | None = None, *, label: str | None = None,
                   index: bool = False) -> dict[str, Path]:
        """``tables/<name>.csv`` and ``.md`` captioned with the run's label (+ note), or ``label``."""
        return artifacts.save_table(df, name, self.profile, self.label_for(note, label), index=index)

    def save_figure(self, fig: Any, name: str, note: str | None = None, *,
                    label: str | None = None) -> dict[str, Path]:
        """``figures/<name>.png`` and ``.pdf`` with the run's label (+ note), or ``label``, as footer."""
        return artifacts.save_figure(fig, name, self.profile, self.label_for(note, label))

    def save_usage(self, *ledgers: Any):
        """Write the LLM usage of ``ledgers`` (:class:`~litseg_nb.llm.base.UsageLedger`, or frames of
        one) to ``artifacts/usage/<NN>.csv`` atomically (never a half-written ledger: notebook 08 reads
        it); returns the frame."""
        import pandas as pd

        if not ledgers:
            raise ValueError(f"{self.notebook}: save_usage() needs at least one usage ledger")
        frames = [x if isinstance(x, pd.DataFrame) else x.to_frame() for x in ledgers]
        usage = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        with atomic_path(self.artifact_path("usage", f"{self.number}.csv")) as tmp:
            usage.to_csv(tmp, index=False)
        return usage

    def write_manifest(self, parameters: Mapping[str, Any] | None = None, data_files: Iterable[Path] = (),
                       extra: Mapping[str, Any] | None = None) -> Path:
        """``manifests/<notebook>.json`` (commit, parameters, data hashes, package versions). A run from
        :func:`setup` records its own parameters, its resolved ``config`` and the ``--set`` overrides
        (``sets``, when any) besides ``extra``."""
        if parameters is None:
            if self.parameters is None:
                raise ValueError(f"{self.notebook}: write_manifest() needs the parameters (this run is not from setup())")
            parameters = self.parameters
        own: dict[str, Any] = {}
        if self.config is not None:
            own["config"] = self.config.to_dict()
        if self.sets:
            own["sets"] = [[k, v] for k, v in self.sets]
        extra = {**own, **dict(extra or {})}
        return artifacts.write_manifest(self.profile, self.notebook, dict(parameters), data_files=data_files,
                                        extra=extra or None)

    # ------------------------------------------------------------------ reading the results
    def takeaways(self, table: Any, metrics: Mapping[str, str], by: str | Sequence[str] = "method",
                  group: str | Sequence[str] | None = None, title: str | None = None, *, show: bool = True):
        """Print, under the run's label, the best and the runner-up per metric of ``table`` (see
        :func:`litseg_nb.front.takeaways.best_per_metric`); returns that frame."""
        best = best_per_metric(table, metrics, by=by, group=group)
        if show:
            print(format_takeaways(best, title or f"{self.notebook}: what the numbers say", self.label))
        return best


def setup(notebook: str, namespace: Mapping[str, Any]) -> tuple[Any, RunContext]:
    """``(cfg, run)`` of the running package notebook ``notebook`` (``"05"``), called as
    ``cfg, run = setup("05", globals())`` right after the ``parameters`` cell.

    The parameters are the annotated names of that cell (``namespace["__annotations__"]``); their
    values are converted and checked as the runner does. Under ``python -m litseg_nb run`` the
    configuration the runner resolved comes in ``namespace`` too (:data:`litseg_nb.front.params.RESOLVED`,
    injected by papermill) and is used as it is, and the run's ``--set`` overrides become this
    process's (:func:`litseg_nb.config.use_sets`): the configs the notebook builds inside see them.
    ``cfg`` is the notebook's stage config; ``run`` its :class:`RunContext` (label ``cfg.describe()``,
    the parameters and config for :meth:`RunContext.write_manifest`).
    """
    stem = notebook_stem(notebook)
    cfg, parameters, sets = from_namespace(stem, namespace)
    follow_thread_budget()  # torch work before the first batch follows the runner's budget too
    if RESOLVED in namespace:
        use_sets(sets)
    return cfg, RunContext.for_config(stem, cfg, parameters=parameters, sets=sets)
