"""Headless execution of the numbered notebooks with papermill: parameters checked before any kernel
starts, then one after another in this process, or ``jobs`` at a time in child processes where their
declared needs allow (torch threads = cores / notebooks running). The console shows each section and a
heartbeat; the executed copy is ``NN_name.RUNNING.ipynb``, then ``NN_name.ipynb`` or ``NN_name.FAILED.ipynb``.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO
from unittest import mock

from ..config import PROFILES, ConfigError
from ..core.paths import NOTEBOOKS_DIR, outputs_dir, outputs_root
from ..core.run_record import number, record
from ..core.safe_io import ensure_writable, write_json_atomic, write_text_atomic
from ..errors import LitsegError
from ..llm.threads import THREADS_ENV, THREADS_FILE_ENV
from .params import check_parameters, parameters_cell

__all__ = ["DEFAULT_JOBS", "Interrupted", "NotebookFailed", "NotebookRun", "declared_parameters", "default_jobs",
           "discover_notebooks", "run_notebooks"]

HEARTBEAT_S = 30.0
_IPROGRESS_FILTER = "ignore:IProgress not found"
#: notebooks side by side by default: two in smoke (Python, not arithmetic, bounds one notebook on 2 cores)
DEFAULT_JOBS = {"test": 1, "smoke": 2, "full": 1}
THREADS_FILE = "torch_threads"
_NB_RE = re.compile(r"^(\d{2})_[\w\-]+\.ipynb$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookFailed(LitsegError, RuntimeError):
    """A notebook's cell failed (or its process died): names the cell, the error and the ``.FAILED`` copy."""

    def __init__(self, notebook: Path, executed: Path, what: str):
        self.notebook, self.executed = notebook, executed
        what = " ".join(what.split())  # one console line, however many lines the error had
        super().__init__(f"notebook {notebook.name} failed: {what}; executed copy (with the traceback): {executed}")


def _what(cause: BaseException) -> str:
    """The error of a failed notebook, for :class:`NotebookFailed`."""
    if hasattr(cause, "ename"):  # papermill's PapermillExecutionError: name the cell and error
        return f"{cause.ename}: {cause.evalue} (cell {getattr(cause, 'exec_count', '?')})"
    return f"{type(cause).__name__}: {str(cause).strip()[-2000:]}"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a notebook: the partial executed copy is kept as ``NN_name.FAILED.ipynb``."""

    def __init__(self, notebook: Path, executed: Path, seconds: float):
        super().__init__(f"interrupted {notebook.name} after {seconds:.0f}s; partial executed copy: "
                         f"{executed}; finished steps are cached, rerun to resume")


@dataclass(frozen=True)
class NotebookRun:
    notebook: str
    executed: Path
    seconds: float


def executed_paths(executed_dir: Path, notebook: Path) -> dict[str, Path]:
    return {"running": executed_dir / f"{notebook.stem}.RUNNING.ipynb",
            "done": executed_dir / notebook.name,
            "failed": executed_dir / f"{notebook.stem}.FAILED.ipynb"}


def fmt_seconds(s: float) -> str:
    m, s = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _heading(cell: Any) -> str | None:
    lines = "".join(cell.get("source", "")).splitlines() if cell.get("cell_type") == "markdown" else []
    return next((ln.lstrip("# ").strip()[:70] or None for ln in lines if ln.lstrip().startswith("#")), None)


class Progress:
    """The kernel's stderr, written through to ``err``; receives papermill's cell hooks (the engine hands it the
    cells) and prints section starts and heartbeats on ``out``, on a new line if a progress bar is mid-line."""

    def __init__(self, name: str, err: TextIO, out: TextIO, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.name, self.err, self.out, self.heartbeat_s = name, err, out, heartbeat_s
        self.t0 = self.cell_t0 = self.last_print = time.perf_counter()
        self.cell_index: int | None = None
        self.printed_section: str | None = None
        self.mid_line = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="litseg-heartbeat", daemon=True)

    def set_cells(self, cells: list[Any]) -> None:
        # each cell's section: the latest Markdown heading at or above it
        self.sections = list(itertools.accumulate(map(_heading, cells), lambda current, h: h or current))
        self.code_cells = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"]

    def _where(self, index: int) -> tuple[str | None, str]:
        n = self.code_cells.index(index) + 1 if index in self.code_cells else "?"
        return self.sections[index] if index < len(self.sections) else None, f"cell {n}/{len(self.code_cells)}"

    def write(self, text: str) -> int:
        with self._lock:
            self.err.write(text)
            self.err.flush()
            if text:
                self.mid_line = not text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.err.flush()

    def _say(self, text: str) -> None:
        with self._lock:
            self.out.write(("\n" if self.mid_line else "") + f"[litseg_nb] {self.name}: {text}\n")
            self.out.flush()
            self.mid_line = False
        self.last_print = time.perf_counter()

    def cell_start(self, papermills: Any, cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
        """Papermill's ``cell_start`` hook (``papermills``: its own), prints the section a code cell starts."""
        if cell.get("cell_type") == "code":
            now = time.perf_counter()
            self.cell_index, self.cell_t0 = cell_index, now
            section, where = self._where(cell_index)
            if section != self.printed_section or now - self.last_print >= self.heartbeat_s:
                self.printed_section = section
                self._say(f"{section or 'setup'} ({where}, {fmt_seconds(now - self.t0)} elapsed)")
        return papermills(cell, cell_index, **kw)

    def cell_complete(self, papermills: Any, cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
        if cell_index == self.cell_index:
            self.cell_index = None
        return papermills(cell, cell_index, **kw)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s / 5)):
            now, idx = time.perf_counter(), self.cell_index
            if idx is not None and now - self.last_print >= self.heartbeat_s:
                section, where = self._where(idx)
                self._say(f"still running {where} ({section or 'setup'}): cell "
                          f"{fmt_seconds(now - self.cell_t0)}, notebook {fmt_seconds(now - self.t0)}")

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _engine():
    from papermill.engines import NBClientEngine, papermill_engines

    class LitsegEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            progress: Progress = kwargs.pop("litseg_progress")
            progress.set_cells(nb_man.nb.cells)
            for hook in ("cell_start", "cell_complete"):  # progress sees each cell before papermill's manager
                setattr(nb_man, hook, functools.partial(getattr(progress, hook), getattr(nb_man, hook)))
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register("litseg", LitsegEngine)
    return "litseg"


_LIVE_KERNELS: "weakref.WeakSet[Any]" = weakref.WeakSet()


@functools.cache
def _ipc_kernel_manager():
    """AsyncKernelManager over IPC sockets, remembering its kernels so that Ctrl-C can stop them at once."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self):
            # a private temp folder, not jupyter_client's relative "kernel-ipc"; short: AF_UNIX allows ~107 bytes
            self._ipc_dir = tempfile.mkdtemp(prefix="litseg-kernel-")
            return os.path.join(self._ipc_dir, "k")

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if not restart and getattr(self, "_ipc_dir", None):
                shutil.rmtree(self._ipc_dir, ignore_errors=True)

        cleanup_resources = _async_cleanup_resources

        async def _async_start_kernel(self, **kw):
            _LIVE_KERNELS.add(self)  # before the launch: an interrupt during start-up finds it too
            await super()._async_start_kernel(**kw)

        start_kernel = _async_start_kernel

    return IPCKernelManager


def _kill_live_kernels() -> None:
    """SIGKILL the process group of every kernel still running (after Ctrl-C)."""
    for km in list(_LIVE_KERNELS):
        pid = getattr(getattr(km, "provisioner", None), "pid", None)
        if not pid:
            continue
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # kernels lead their own process group
        if getattr(km, "_ipc_dir", None):
            shutil.rmtree(km._ipc_dir, ignore_errors=True)


def kernel_env_for_run() -> dict[str, str]:
    """What a papermill kernel's environment adds: no progress bars (``TQDM_DISABLE``, tqdm's own switch,
    which the package's bars, transformers' and datasets' follow; a value the caller set stands). The executed
    notebook keeps results and warnings; this console shows each section and a heartbeat instead."""
    return {"PYTHONWARNINGS": kernel_env_for_lab()["PYTHONWARNINGS"],
            "TQDM_DISABLE": os.environ.get("TQDM_DISABLE", "1")}


def kernel_env_for_lab() -> dict[str, str]:
    """This environment plus the filter that keeps tqdm's "IProgress not found" out of kernels."""
    parts = [p for p in os.environ.get("PYTHONWARNINGS", "").split(",") if p]
    if _IPROGRESS_FILTER not in parts:
        parts.append(_IPROGRESS_FILTER)
    return {**os.environ, "PYTHONWARNINGS": ",".join(parts)}


def execute(notebook: Path, executed_dir: Path, parameters: dict[str, Any], *, log_output: bool = False,
            heartbeat_s: float = HEARTBEAT_S, out: TextIO | None = None, err: TextIO | None = None) -> Path:
    """Execute ``notebook`` into ``executed_dir``; returns the finished copy. A failure leaves ``.FAILED``."""
    import nbformat  # nbformat and papermill: the extra `notebooks`, loaded by a run only
    import papermill as pm

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    paths = executed_paths(executed_dir, notebook)
    for stale in paths.values():  # the executed folder shows the latest run of each notebook only
        stale.unlink(missing_ok=True)

    def flt(record: logging.LogRecord) -> bool:
        """Drops papermill's line-based parameter-cell messages about names the runner already checked."""
        msg = record.getMessage()
        if msg.startswith("Passed unknown parameter:"):
            return msg.split(":", 1)[1].strip() not in parameters
        return not msg.startswith("Unable to parse line")

    # filters apply to the logger a record is logged on, not to its parents
    pm_logs = [logging.getLogger(n) for n in ("papermill", "papermill.translators")]
    for lg in pm_logs:
        lg.addFilter(flt)
    try:
        with mock.patch.dict(os.environ, kernel_env_for_run()), \
                Progress(notebook.stem, err, out, heartbeat_s) as progress:
            pm.execute_notebook(
                str(notebook), str(paths["running"]), parameters=parameters, kernel_name="python3",
                engine_name=_engine(), cwd=str(notebook.parent), progress_bar=False,
                # the kernel's stderr (warnings) always, its stdout with --log-output
                log_output=False, stderr_file=progress, stdout_file=out if log_output else None,
                litseg_progress=progress, kernel_manager_class=_ipc_kernel_manager(),
                # a graceful shutdown of a kernel still executing prints a ZMQ traceback
                shutdown_kernel="immediate")
        nbformat.validate(nbformat.read(paths["running"], as_version=4))  # complete, readable
        os.replace(paths["running"], paths["done"])
        return paths["done"]
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            _kill_live_kernels()  # no kernel left behind to print "parent appears to have exited"
        if paths["running"].exists():
            os.replace(paths["running"], paths["failed"])
        raise
    finally:
        for lg in pm_logs:
            lg.removeFilter(flt)


def default_jobs(profile: str) -> int:
    return min(DEFAULT_JOBS.get(profile, 1), os.cpu_count() or 1)


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
    """Names and default values in the notebook's single ``parameters`` cell."""
    return {name: p.default for name, p in parameters_cell(notebook).items()}


def declared_needs(notebook: Path) -> tuple[str, ...] | None:
    """The notebook numbers ``notebook`` states it reads (metadata ``litseg_nb.needs``), or None."""
    import nbformat

    meta = nbformat.read(notebook, as_version=4).metadata.get("litseg_nb", {})
    if "needs" not in meta:
        return None
    needs = meta["needs"]
    if not isinstance(needs, list) or not all(isinstance(n, str) and len(n) == 2 and n.isdigit() for n in needs):
        raise ConfigError(f"{notebook}: metadata litseg_nb.needs must be a list of two-digit notebook numbers, "
                          f"got {needs!r}")
    bad = [n for n in needs if n >= number(notebook)]
    if bad:
        raise ConfigError(f"{notebook}: metadata litseg_nb.needs names {', '.join(bad)}, not an earlier notebook")
    return tuple(needs)


def plan(notebooks: Sequence[Path]) -> dict[str, tuple[str, ...]]:
    """Number -> the selected notebooks it waits for (undeclared: every earlier selected one)."""
    nums = [number(nb) for nb in notebooks]
    needs = [declared_needs(nb) for nb in notebooks]
    return {n: tuple(m for m in nums if m < n and (need is None or m in need)) for n, need in zip(nums, needs)}


def run_notebooks(profile: str, only: Sequence[str] = (), parameters: dict[str, Any] | None = None, seed: int = 0,
                  log_output: bool = False, heartbeat_s: float = HEARTBEAT_S,
                  jobs: int | None = None) -> list[NotebookRun]:
    """Execute the notebooks for ``profile``, ``jobs`` side by side; raises :class:`NotebookFailed` on the first
    failure. ``parameters`` go to each notebook that declares them."""
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
    # converted and checked before any kernel starts; a package notebook also gets its resolved config
    checked = {nb: check_parameters(nb, {k: v for k, v in {"profile": profile, "seed": seed, **extra}.items()
                                         if k in declared[nb]}) for nb in notebooks}
    # an unwritable outputs folder is one line naming it, before any kernel starts
    executed_dir = ensure_writable(outputs_root() / profile / "executed")
    outputs_dir(profile)
    if jobs > 1 and len(notebooks) > 1:
        runs = run_side_by_side(profile, notebooks, checked, executed_dir, jobs, log_output, heartbeat_s)
        print("[litseg_nb] wall time per notebook: " + ", ".join(f"{r.notebook} {r.seconds:.1f}s" for r in runs)
              + f"; {jobs} side by side", flush=True)
        return runs
    rec = record(profile, 1)
    runs: list[NotebookRun] = []
    for nb in notebooks:
        failed = executed_paths(executed_dir, nb)["failed"]
        print(f"[litseg_nb] {nb.name} (profile={profile}) ...", flush=True)
        t0 = time.perf_counter()
        rec.start(nb, os.environ.get(THREADS_ENV, "default"))
        try:
            out = execute(nb, executed_dir, checked[nb], log_output=log_output, heartbeat_s=heartbeat_s)
        except KeyboardInterrupt:
            rec.end(nb, "interrupted")
            raise Interrupted(nb, failed, time.perf_counter() - t0) from None
        except Exception as exc:  # papermill raises PapermillExecutionError with the cell traceback
            rec.end(nb, "failed")
            print(f"[litseg_nb] FAILED {nb.name} after {time.perf_counter() - t0:.1f}s", flush=True)
            raise NotebookFailed(nb, failed, _what(exc)) from exc
        dt = time.perf_counter() - t0
        rec.end(nb, "ok")
        runs.append(NotebookRun(nb.name, out, dt))
        print(f"[litseg_nb] done {nb.name} in {dt:.1f}s", flush=True)
    print("[litseg_nb] wall time per notebook: " + ", ".join(f"{r.notebook} {r.seconds:.1f}s" for r in runs)
          + f"; total {sum(r.seconds for r in runs):.1f}s", flush=True)
    return runs


def threads_for(n_running: int, cores: int | None = None) -> int:
    return max(1, (cores or os.cpu_count() or 1) // max(1, n_running))


class ThreadBudget:
    """``logs/torch_threads``: each running notebook's torch threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.value: int | None = None

    def update(self, n_running: int) -> bool:
        n = threads_for(n_running)
        if n == self.value:
            return False
        write_text_atomic(self.path, f"{n}\n")
        self.value = n
        return True

    def child_env(self) -> dict[str, str]:
        return {THREADS_FILE_ENV: str(self.path), THREADS_ENV: str(self.value)}


@dataclass
class _Child:
    notebook: Path
    proc: subprocess.Popen
    result: Path
    log: Path
    t0: float
    relay: threading.Thread


def _relay(stream: Any, out: Any, lock: threading.Lock) -> None:
    for line in iter(stream.readline, ""):
        with lock:
            out.write(line)
            out.flush()
    stream.close()


def run_side_by_side(profile: str, notebooks: Sequence[Path], checked: Mapping[Path, dict[str, Any]],
                     executed_dir: Path, jobs: int, log_output: bool, heartbeat_s: float) -> list[Any]:
    """Execute ``notebooks`` as :func:`plan` allows, ``jobs`` at a time in child processes; a failure starts
    nothing more and is raised once the running ones finish."""
    graph = plan(notebooks)
    by_num = {number(nb): nb for nb in notebooks}
    pending = [number(nb) for nb in notebooks]
    done: set[str] = set()
    running: dict[str, _Child] = {}
    runs: list[NotebookRun] = []
    failures: list[NotebookFailed] = []
    rec = record(profile, jobs)
    # the caller's fixed LITSEG_TORCH_THREADS stands; else the budget follows the notebooks running
    budget = None if os.environ.get(THREADS_ENV) else ThreadBudget(rec.path.parent / THREADS_FILE)
    lock = threading.Lock()
    work = Path(tempfile.mkdtemp(prefix="litseg_sched_"))
    print(f"[litseg_nb] up to {jobs} notebooks side by side; order: "
          + "; ".join(f"{n} after {','.join(graph[n])}" if graph[n] else f"{n} first" for n in pending), flush=True)
    try:
        while pending or running:
            ready = [n for n in pending if all(d in done for d in graph[n])] if not failures else []
            starting = ready[:max(0, jobs - len(running))]
            # one budget per pass, after the finished ones left and before the next start
            if budget is not None and (running or starting) and budget.update(len(running) + len(starting)):
                for m in running:  # the ones already running follow the new budget from their next batch
                    rec.threads_changed(by_num[m], str(budget.value))
                if running:
                    with lock:
                        print(f"[litseg_nb] {', '.join(sorted(running))} now on {budget.value} torch thread(s)",
                              flush=True)
            for n in starting:
                pending.remove(n)
                nb = by_num[n]
                # PYTHONUNBUFFERED: section lines reach the console as they happen
                env = {**os.environ, "PYTHONUNBUFFERED": "1", **(budget.child_env() if budget is not None else {})}
                threads = str(budget.value) if budget is not None else os.environ.get(THREADS_ENV, "default")
                spec, result = work / f"{n}.spec", work / f"{n}.result.json"
                log = rec.path.parent / f"{nb.stem}.log"
                spec.write_bytes(pickle.dumps((nb, executed_dir, checked[nb], log_output, heartbeat_s, result, log)))
                proc = subprocess.Popen([sys.executable, "-m", "litseg_nb.front.runner", str(spec)], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                        start_new_session=True)  # Ctrl-C reaches the children through us only
                relay = threading.Thread(target=_relay, args=(proc.stdout, sys.stdout, lock), daemon=True)
                relay.start()
                running[n] = _Child(nb, proc, result, log, time.perf_counter(), relay)
                rec.start(nb, threads)
                beside = sorted(m for m in running if m != n)
                with lock:
                    print(f"[litseg_nb] {nb.name} (profile={checked[nb].get('profile')}"
                          + (f", beside {', '.join(beside)}" if beside else "")
                          + f", torch threads {threads}) ...; its stderr: {log}", flush=True)
            if not running:
                break  # a failure left nothing to run
            time.sleep(0.2)
            for n, child in list(running.items()):
                if child.proc.poll() is None:
                    continue
                child.relay.join(timeout=5)
                del running[n]
                dt = time.perf_counter() - child.t0
                try:
                    res = json.loads(child.result.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    res = {}
                if child.proc.returncode == 0 and res.get("ok"):
                    rec.end(child.notebook, "ok")
                    done.add(n)
                    runs.append(NotebookRun(child.notebook.name, Path(res["executed"]), dt))
                    with lock:
                        print(f"[litseg_nb] done {child.notebook.name} in {dt:.1f}s", flush=True)
                    continue
                rec.end(child.notebook, "failed")
                what = res.get("what") or (f"the notebook's process exited with {child.proc.returncode} without "
                                           f"a result (see {child.log})")
                failures.append(NotebookFailed(child.notebook, executed_paths(executed_dir, child.notebook)["failed"],
                                               what))
                with lock:
                    print(f"[litseg_nb] FAILED {child.notebook.name} after {dt:.1f}s"
                          + (f"; waiting for {', '.join(sorted(running))} to finish" if running else ""), flush=True)
    except KeyboardInterrupt:
        for child in running.values():
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60.0  # the children's grace to stop their kernels
        for child in running.values():
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
        first = next(iter(running.values()), None)
        if first is None:
            raise
        for child in running.values():
            rec.end(child.notebook, "interrupted")
        raise Interrupted(first.notebook, executed_paths(executed_dir, first.notebook)["failed"],
                          time.perf_counter() - first.t0) from None
    finally:
        if budget is not None:
            budget.path.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise failures[0]
    return sorted(runs, key=lambda r: r.notebook)  # notebook order, as one after another


class _LaneStderr:
    """A child's kernel stderr: all to the log; to the console each line and a progress bar's state at most
    every ``every_s`` seconds, prefixed with the notebook (bars redrawn in place would garble each other)."""

    def __init__(self, log: Any, console: Any, name: str, every_s: float = 20.0) -> None:
        self.log, self.console, self.name, self.every_s = log, console, name, every_s
        self.partial, self.last = "", float("-inf")  # the first redraw shows at once

    def write(self, text: str) -> int:
        self.log.write(text)
        self.log.flush()
        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            self._say(line.rsplit("\r", 1)[-1])
        self.partial = self.partial.rsplit("\r", 1)[-1]
        if time.monotonic() - self.last >= self.every_s:
            self._say(self.partial)
        return len(text)

    def _say(self, line: str) -> None:
        line = _ANSI.sub("", line).strip()  # tqdm's cursor moves for nested bars
        if not line:
            return
        self.last = time.monotonic()
        self.console.write(f"  {self.name}: {line}\n")
        self.console.flush()

    def flush(self) -> None:
        self.log.flush()


def _child_main(spec_path: str) -> int:
    notebook, executed_dir, parameters, log_output, heartbeat_s, result_path, log_path = pickle.loads(
        Path(spec_path).read_bytes())
    with open(log_path, "w", encoding="utf-8") as log:
        err = _LaneStderr(log, sys.stdout, notebook.stem)
        try:
            executed = execute(notebook, executed_dir, parameters, log_output=log_output, heartbeat_s=heartbeat_s,
                               out=sys.stdout, err=err)
            result = {"ok": True, "executed": str(executed)}
        except KeyboardInterrupt:
            result = {"ok": False, "what": "interrupted"}
        except Exception as exc:  # papermill's PapermillExecutionError carries the cell and the error
            result = {"ok": False, "what": _what(exc)}
    write_json_atomic(result_path, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
