"""Headless execution of the numbered notebooks with papermill (a library: the command line is
:mod:`litseg_nb.cli`).

``python -m litseg_nb run --profile smoke [--only 01,04] [-p key=value ...]`` executes
``notebooks/NN_*.ipynb`` in order, each in a fresh kernel, injects the parameters (``profile`` and
``seed`` always, plus any ``-p`` overrides the notebook declares; a package notebook also gets the
configuration resolved here, :data:`litseg_nb.front.params.RESOLVED`), writes the executed copy to
``outputs/<profile>/executed/``, prints per-notebook wall time and stops with a clear message at
the first failing notebook. While a notebook runs, the console shows each section as it starts and
a heartbeat at least every 30 s, plus the package's tqdm progress bars (:mod:`litseg_nb.front.execution`).
The executed copy is ``NN_name.RUNNING.ipynb`` while running, ``NN_name.ipynb`` once finished and
``NN_name.FAILED.ipynb`` (kept for inspection) after a failure or Ctrl-C (one line, exit code 130).
An unwritable outputs folder is one line naming it, before any kernel starts.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..config import PROFILES, ConfigError
from ..core.paths import NOTEBOOKS_DIR, outputs_dir, outputs_root
from ..core.run_record import record
from ..core.safe_io import ensure_writable
from .execution import HEARTBEAT_S, Interrupted, NotebookFailed, NotebookRun, execute, executed_paths
from .params import check_parameters, resolved_parameter
from .schedule import run_side_by_side

__all__ = ["DEFAULT_JOBS", "Interrupted", "NotebookFailed", "NotebookRun", "declared_parameters", "default_jobs",
           "discover_notebooks", "run_notebooks"]

#: notebooks side by side by default: two in ``smoke`` on a machine with >= 2 cores (the package's
#: Python, not arithmetic, bounds one notebook there: issue #35 measured 02->03 beside 04 in 352 s
#: against 521 s one after another); one in ``full``, whose notebooks each hold a GPU engine (two would
#: need twice the GPU memory), and in ``test`` (CI runs its notebooks one at a time; tests/test_schedule.py
#: runs the side-by-side path)
DEFAULT_JOBS = {"test": 1, "smoke": 2, "full": 1}


def default_jobs(profile: str) -> int:
    return min(DEFAULT_JOBS.get(profile, 1), os.cpu_count() or 1)

_NB_RE = re.compile(r"^(\d{2})_[\w\-]+\.ipynb$")


def discover_notebooks(only: Iterable[str] = (), notebooks_dir: Path | None = None) -> list[Path]:
    """The numbered notebooks in order, optionally restricted to numbers like ``("01", "04")``."""
    notebooks_dir = notebooks_dir or NOTEBOOKS_DIR
    found = sorted(p for p in notebooks_dir.glob("*.ipynb") if _NB_RE.match(p.name))
    only = list(only)
    wanted = [o.strip().zfill(2) for o in only if o.strip()]
    if not wanted:
        if only and only != [""]:  # "--only ' '" or "--only ,": a typo, not "every notebook"
            raise ConfigError(f"--only {','.join(only)!r}: no notebook number given (e.g. --only 01,04)")
        return found
    dup = sorted({w for w in wanted if wanted.count(w) > 1})
    if dup:
        raise ConfigError(f"--only {','.join(only)}: notebook {', '.join(dup)} named twice")
    by_num = {_NB_RE.match(p.name).group(1): p for p in found}
    missing = [w for w in wanted if w not in by_num]
    if missing:
        raise ConfigError(f"no notebook numbered {', '.join(missing)} in {notebooks_dir} "
                          f"(found: {', '.join(sorted(by_num)) or 'none'})")
    return [by_num[w] for w in sorted(wanted)]


def declared_parameters(notebook: Path) -> dict[str, Any]:
    """Names and default values in the notebook's single ``parameters`` cell (:mod:`litseg_nb.front.params`)."""
    # deferred: tests patch litseg_nb.front.params.parameters_cell (read at call time)
    from .params import parameters_cell

    return {name: p.default for name, p in parameters_cell(notebook).items()}


def run_notebooks(
    profile: str,
    only: Sequence[str] = (),
    parameters: dict[str, Any] | None = None,
    seed: int = 0,
    kernel_name: str = "python3",
    log_output: bool = False,
    heartbeat_s: float = HEARTBEAT_S,
    jobs: int | None = None,
) -> list[NotebookRun]:
    """Execute the notebooks for ``profile``; raises :class:`NotebookFailed` on the first failure.

    ``parameters`` are injected into each notebook that declares them; a parameter that no selected
    notebook declares is an error (a typo must not be ignored silently). ``jobs``: how many notebooks
    may run side by side where their needs allow (:mod:`litseg_nb.front.schedule`); None = the
    profile's :data:`DEFAULT_JOBS`; 1 = one after another in this process.
    """
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    jobs = default_jobs(profile) if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"jobs must be a whole number >= 1, got {jobs!r}")
    notebooks = discover_notebooks(only)
    if not notebooks:
        raise ConfigError("no numbered notebooks found")
    extra = dict(parameters or {})
    declared = {nb: declared_parameters(nb) for nb in notebooks}
    unknown = set(extra) - set().union(*map(set, declared.values()))
    if unknown:
        raise ConfigError(f"parameter(s) {', '.join(sorted(unknown))} not declared by any selected notebook")
    # convert each value by the notebook's annotation and build its config, before any kernel starts;
    # a package notebook also gets the resolved config (and the active --set overrides) as a parameter

    checked = {nb: check_parameters(nb, {k: v for k, v in {"profile": profile, "seed": seed, **extra}.items()
                                         if k in declared[nb]}) for nb in notebooks}
    checked = {nb: {**values, **resolved_parameter(nb, values)} for nb, values in checked.items()}

    # an unwritable outputs folder is one line naming it, before any kernel starts
    executed_dir = ensure_writable(outputs_root() / profile / "executed")
    outputs_dir(profile)
    if jobs > 1 and len(notebooks) > 1:
        runs = run_side_by_side(profile, notebooks, checked, executed_dir, jobs, kernel_name=kernel_name,
                                log_output=log_output, heartbeat_s=heartbeat_s)
        print("[litseg_nb] wall time per notebook: " + ", ".join(f"{r.notebook} {r.seconds:.1f}s" for r in runs)
              + f"; {jobs} side by side", flush=True)
        return runs
    rec = record(profile, 1)
    runs: list[NotebookRun] = []
    for nb in notebooks:
        params = checked[nb]
        failed = executed_paths(executed_dir, nb)["failed"]
        print(f"[litseg_nb] {nb.name} (profile={profile}) ...", flush=True)
        t0 = time.perf_counter()
        rec.start(nb, os.environ.get("LITSEG_TORCH_THREADS", "default"))
        try:  # section/cell progress and heartbeats on the console (litseg_nb.front.execution)
            out = execute(nb, executed_dir, params, kernel_name=kernel_name, log_output=log_output,
                          heartbeat_s=heartbeat_s)
        except KeyboardInterrupt:
            rec.end(nb, "interrupted")
            raise Interrupted(nb, failed, time.perf_counter() - t0) from None
        except Exception as exc:  # papermill raises PapermillExecutionError with the cell traceback
            rec.end(nb, "failed")
            print(f"[litseg_nb] FAILED {nb.name} after {time.perf_counter() - t0:.1f}s", flush=True)
            raise NotebookFailed(nb, failed, exc) from exc
        dt = time.perf_counter() - t0
        rec.end(nb, "ok")
        runs.append(NotebookRun(nb.name, out, dt))
        print(f"[litseg_nb] done {nb.name} in {dt:.1f}s", flush=True)
    total = sum(r.seconds for r in runs)
    print("[litseg_nb] wall time per notebook: " + ", ".join(f"{r.notebook} {r.seconds:.1f}s" for r in runs)
          + f"; total {total:.1f}s", flush=True)
    return runs
