"""One notebook run's context: profile, label and output paths, in one object.

Every notebook saves its tables and figures under ``outputs/<profile>/`` with a label naming the
profile, models and data, writes its LLM usage ledger to ``artifacts/usage/<NN>.csv`` and a manifest.
:class:`RunContext` holds the three things those calls share (the profile, the notebook and the
label), so a notebook says ``run.save_table(df, "05_latency")`` instead of threading ``profile`` and
``label`` through every call::

    run = RunContext.for_config("05_rag_evaluation", cfg)           # label = cfg.describe()
    run.save_table(df, "05_latency", "ms per question")             # caption: label + " | ms per question"
    run.save_figure(fig, "05_dcg_recall_hybrid")
    run.save_usage(backend.ledger)                                  # artifacts/usage/05.csv
    run.write_manifest({"profile": profile, "seed": seed}, data_files=...)

The files are written by the existing helpers (:func:`litseg_nb.artifacts.save_table`,
:func:`~litseg_nb.artifacts.save_figure`, :func:`~litseg_nb.artifacts.artifact_path`,
:func:`~litseg_nb.artifacts.write_manifest`), so names, contents and atomic writes are theirs.
``note`` extends the run's label for one table (``label + " | " + note``); ``label=`` replaces it
(a table that does not depend on the profile's models, say). :meth:`with_note` gives a context whose
label is extended for every later call. :meth:`takeaways` prints what a table's numbers say, computed
from the table (:mod:`litseg_nb.takeaways`), under the run's label.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from . import artifacts
from .config import PROFILES, ConfigError
from .paths import outputs_dir
from .safe_io import atomic_path

_NOTEBOOK_RE = re.compile(r"^(\d{2})_[\w\-]+$")


def join_label(label: str, note: str | None) -> str:
    """``label | note`` (``label`` alone when there is no note)."""
    return f"{label} | {note}" if note else label


@dataclass(frozen=True)
class RunContext:
    """Profile, notebook (file stem, ``NN_name``) and label of one notebook run."""

    profile: str
    notebook: str
    label: str

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError(f"RunContext: unknown profile {self.profile!r}; expected one of {', '.join(PROFILES)}")
        if not _NOTEBOOK_RE.match(self.notebook):
            raise ValueError(f"RunContext: notebook {self.notebook!r} is not a notebook file stem like '05_rag_evaluation'")
        if not self.label.strip():
            raise ValueError(f"RunContext for {self.notebook}: empty label (every table names profile, models and data)")

    @classmethod
    def for_config(cls, notebook: str, cfg: Any, note: str | None = None) -> "RunContext":
        """The context of ``notebook`` run with stage config ``cfg``: label ``cfg.describe()`` (+ note)."""
        return cls(cfg.profile, notebook, join_label(cfg.describe(), note))

    # ------------------------------------------------------------------ label
    def with_note(self, note: str | None) -> "RunContext":
        """The same run with ``note`` appended to its label (for every later table and figure)."""
        return replace(self, label=join_label(self.label, note))

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

    def write_manifest(self, parameters: Mapping[str, Any], data_files: Iterable[Path] = (),
                       extra: Mapping[str, Any] | None = None) -> Path:
        """``manifests/<notebook>.json`` (commit, parameters, data hashes, package versions)."""
        return artifacts.write_manifest(self.profile, self.notebook, dict(parameters), data_files=data_files,
                                        extra=dict(extra) if extra is not None else None)

    # ------------------------------------------------------------------ reading the results
    def takeaways(self, table: Any, metrics: Mapping[str, str], by: str | Sequence[str] = "method",
                  group: str | Sequence[str] | None = None, title: str | None = None, *, show: bool = True):
        """Print, under the run's label, the best and the runner-up per metric of ``table`` (see
        :func:`litseg_nb.takeaways.best_per_metric`); returns that frame."""
        from .takeaways import best_per_metric, format_takeaways

        best = best_per_metric(table, metrics, by=by, group=group)
        if show:
            print(format_takeaways(best, title or f"{self.notebook}: what the numbers say", self.label))
        return best
