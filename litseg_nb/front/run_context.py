"""One notebook run: ``cfg, run = setup("05", globals())`` after the ``parameters`` cell is the one seam
between a notebook and the package; :class:`RunContext` saves tables captioned with the run's label
(profile, models, data) and prints the takeaways that close a notebook.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core import artifacts
from ..config import ConfigError, use_sets
from .params import NOTEBOOK_CONFIGS, RESOLVED, from_namespace
from ..core.paths import outputs_dir
from ..core.safe_io import atomic_path
from ..llm.threads import follow_thread_budget

# direction -> (sort ascending, what the direction means)
_DIRECTIONS = {"max": (False, "higher is better"), "min": (True, "lower is better"),
               "largest": (False, "largest first"), "smallest": (True, "smallest first")}
COLUMNS = ["metric", "direction", "best", "value", "runner_up", "runner_up_value", "margin", "n_compared",
           "n_missing"]


def _cols(x: str | Sequence[str] | None) -> list[str]:
    return [] if x is None else [x] if isinstance(x, str) else list(x)


def _name(row: pd.Series, by: list[str]) -> str:
    return " / ".join(str(row[c]) for c in by)


def best_per_metric(table: pd.DataFrame, metrics: Mapping[str, str], by: str | Sequence[str] = "method",
                    group: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Per ``group`` and metric (column -> a :data:`_DIRECTIONS` key): the best row named by ``by`` (ties
    joined), its value, the runner-up and the margin; a missing column is an error."""
    import pandas as pd

    by_c, group_c = _cols(by), _cols(group)
    bad = {m: d for m, d in metrics.items() if d not in _DIRECTIONS}
    if bad:
        raise ValueError(f"best_per_metric: direction must be one of {', '.join(_DIRECTIONS)}, got {bad}")
    missing = [c for c in [*by_c, *group_c, *metrics] if c not in table.columns]
    if missing:
        raise KeyError(f"best_per_metric: table has no column {missing}; it has {list(table.columns)}")
    rows: list[dict[str, Any]] = []
    groups = table.groupby(group_c, sort=False, dropna=False) if group_c else [((), table)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        for metric, direction in metrics.items():
            values = pd.to_numeric(part[metric], errors="coerce")
            ok = part[values.notna()].assign(_v=values[values.notna()])
            ascending, meaning = _DIRECTIONS[direction]
            row = {**dict(zip(group_c, key)), "metric": metric, "direction": meaning,
                   "best": None, "value": math.nan, "runner_up": None, "runner_up_value": math.nan,
                   "margin": math.nan, "n_compared": int(len(ok)), "n_missing": int(len(part) - len(ok))}
            if len(ok):
                ordered = ok.sort_values("_v", ascending=ascending, kind="stable")
                top = ordered["_v"].iloc[0]
                tied = ordered[ordered["_v"] == top]
                rest = ordered[ordered["_v"] != top]
                row["best"] = ", ".join(_name(r, by_c) for _, r in tied.iterrows())
                row["value"] = float(top)
                if len(rest):
                    row["runner_up"] = _name(rest.iloc[0], by_c)
                    row["runner_up_value"] = float(rest["_v"].iloc[0])
                    row["margin"] = abs(float(top) - row["runner_up_value"])
            rows.append(row)
    return pd.DataFrame(rows, columns=[*group_c, *COLUMNS])


def _fmt(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def takeaway_lines(best: pd.DataFrame) -> list[str]:
    """One sentence per row of :func:`best_per_metric`'s frame."""
    import pandas as pd

    group_c = [c for c in best.columns if c not in COLUMNS]
    lines = []
    for _, r in best.iterrows():
        where = " / ".join(str(r[c]) for c in group_c)
        head = f"[{where}] " if where else ""
        if pd.isna(r["best"]):
            lines.append(f"{head}{r['metric']}: no value in any row ({r['n_missing']} row(s) empty)")
            continue
        word = "best" if r["direction"].endswith("is better") else r["direction"].split()[0]
        names = str(r["best"]).split(", ")
        best = ", ".join(names) if len(names) <= 4 else ", ".join(names[:3]) + f" and {len(names) - 3} more"
        text = f"{head}{r['metric']} ({r['direction']}): {word} {best} = {_fmt(r['value'])}"
        if not pd.isna(r["runner_up"]):
            text += f", next {r['runner_up']} = {_fmt(r['runner_up_value'])} (margin {_fmt(r['margin'])})"
        elif r["n_compared"] > 1:
            text += " (all rows tie)"
        text += f"; {r['n_compared']} compared"
        if r["n_missing"]:
            text += f", {r['n_missing']} without a value"
        lines.append(text)
    return lines


def join_label(label: str, note: str | None) -> str:
    return f"{label} | {note}" if note else label


@dataclass(frozen=True)
class RunContext:
    """Profile, notebook (``NN_name``) and label of one notebook run; from :func:`setup` also its parameters,
    stage config and ``--set`` overrides."""

    profile: str
    notebook: str
    label: str
    parameters: Mapping[str, Any] | None = field(default=None, compare=False)
    config: Any = field(default=None, compare=False)
    sets: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @classmethod
    def for_config(cls, notebook: str, cfg: Any, note: str | None = None, *,
                   parameters: Mapping[str, Any] | None = None,
                   sets: Sequence[tuple[str, Any]] = ()) -> "RunContext":
        return cls(cfg.profile, notebook, join_label(cfg.describe(), note), parameters=parameters, config=cfg,
                   sets=tuple((k, v) for k, v in sets))

    def with_note(self, note: str | None) -> "RunContext":
        return replace(self, label=join_label(self.label, note))

    def relabel(self, label: str) -> "RunContext":
        return replace(self, label=label)

    def label_for(self, note: str | None = None, label: str | None = None) -> str:
        return label if label is not None else join_label(self.label, note)

    def figure_path(self, filename: str) -> Path:
        return outputs_dir(self.profile) / "figures" / filename

    def artifact_path(self, *parts: str) -> Path:
        return artifacts.artifact_path(self.profile, *parts)

    def artifact_dir(self, *parts: str) -> Path:
        return artifacts.artifact_dir(self.profile, *parts)

    def save_table(self, df: Any, name: str, note: str | None = None, *, label: str | None = None,
                   index: bool = False, show: Sequence[str] | None = None) -> Any:
        """``tables/<name>.csv`` and ``.md`` captioned with the run's label (+ note), or ``label``; returns
        ``df`` (or its ``show`` columns: the paper's, where the files keep every column), so that a cell
        ending in a save shows the table."""
        artifacts.save_table(df, name, self.profile, self.label_for(note, label), index=index)
        missing = [c for c in show or () if c not in df.columns]
        if missing:
            raise KeyError(f"{name}: no column {missing} to show; the table has {list(df.columns)}")
        return df if show is None else df[list(show)]

    def save_figure(self, fig: Any, name: str, note: str | None = None, *,
                    label: str | None = None) -> None:
        """``figures/<name>.png`` and ``.pdf`` with the run's label (+ note), or ``label``, as footer (returns
        nothing: the notebook shows the figure itself; :meth:`figure_path` names the files)."""
        artifacts.save_figure(fig, name, self.profile, self.label_for(note, label))

    def save_usage(self, *ledgers: Any):
        """Write the LLM usage of ``ledgers`` to ``artifacts/usage/<NN>.csv``; returns the frame."""
        import pandas as pd

        if not ledgers:
            raise ValueError(f"{self.notebook}: save_usage() needs at least one usage ledger")
        frames = [x if isinstance(x, pd.DataFrame) else x.to_frame() for x in ledgers]
        usage = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        with atomic_path(self.artifact_path("usage", f"{self.notebook[:2]}.csv")) as tmp:
            usage.to_csv(tmp, index=False)
        return usage

    def write_manifest(self, parameters: Mapping[str, Any] | None = None, data_files: Iterable[Path] = (),
                       extra: Mapping[str, Any] | None = None) -> None:
        """``manifests/<notebook>.json`` (commit, parameters, data hashes, versions, config, ``--set``): the
        run's record, not a result, so a notebook's last cell shows nothing (:meth:`manifest_path` names it)."""
        if parameters is None:
            if self.parameters is None:
                raise ValueError(f"{self.notebook}: write_manifest() needs the parameters (this run is not from setup())")
            parameters = self.parameters
        own: dict[str, Any] = {"config": self.config.to_dict()} if self.config is not None else {}
        if self.sets:
            own["sets"] = [[k, v] for k, v in self.sets]
        extra = {**own, **dict(extra or {})}
        artifacts.write_manifest(self.profile, self.notebook, dict(parameters), data_files=data_files,
                                 extra=extra or None)

    def manifest_path(self) -> Path:
        return outputs_dir(self.profile) / "manifests" / f"{self.notebook}.json"

    def takeaways(self, table: Any, metrics: Mapping[str, str], by: str | Sequence[str] = "method",
                  group: str | Sequence[str] | None = None, title: str | None = None):
        """Print the best and the runner-up per metric of ``table`` (:func:`best_per_metric`); returns that frame."""
        best = best_per_metric(table, metrics, by=by, group=group)
        title = title or f"{self.notebook}: what the numbers say"
        print("\n".join([title, f"  ({self.label})", *(f"  - {line}" for line in takeaway_lines(best))]))
        return best


def setup(notebook: str, namespace: Mapping[str, Any]) -> tuple[Any, RunContext]:
    """``(cfg, run)`` of the running package notebook ``notebook`` (``"05"``) from its parameters, or from the
    configuration and ``--set`` overrides the runner injected."""
    stems = [s for s in NOTEBOOK_CONFIGS if notebook in (s, s[:2])]  # "05" or "05_rag_evaluation"
    if len(stems) != 1:
        raise ConfigError(f"no package notebook {notebook!r}; expected one of "
                          f"{', '.join(s[:2] for s in NOTEBOOK_CONFIGS)}")
    stem = stems[0]
    cfg, parameters, sets = from_namespace(stem, namespace)
    follow_thread_budget()  # torch work before the first batch follows the runner's budget too
    if RESOLVED in namespace:
        use_sets(sets)
    return cfg, RunContext.for_config(stem, cfg, parameters=parameters, sets=sets)
