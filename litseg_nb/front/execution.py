"""Executing one notebook with papermill: progress on the console, quiet kernels, honest files.

:func:`execute` runs one (already parameter-checked) notebook and

* **talks to the user**: one console line when a new section (markdown heading) starts, with the
  cell number and the elapsed time, and a heartbeat line at least every ``heartbeat_s`` seconds
  while a long cell runs; the kernel's stderr (``tqdm`` progress bars of the package's loops, with
  counts and ETA; warnings) is relayed to the console as it arrives;
* **keeps the files honest**: papermill writes the executed copy as ``NN_name.RUNNING.ipynb``;
  it becomes ``NN_name.ipynb`` only after the last cell finished and the file reads back as a valid
  notebook, or ``NN_name.FAILED.ipynb`` when a cell failed or the run was interrupted. A killed run
  leaves the ``.RUNNING`` copy (stale copies are removed when the notebook runs again), never a
  file that looks finished;
* **is quiet**: the kernel talks over IPC (no "running over TCP without encryption" warning), the
  kernel does not print tqdm's "IProgress not found" (the package's progress bars print as text),
  and papermill's parameter-cell inspection messages are dropped only where the runner's own parser
  has already read and checked the parameters (see :class:`_VerifiedParameterFilter`).
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TextIO

import nbformat

from ..errors import LitsegError

HEARTBEAT_S = 30.0
_IPROGRESS_FILTER = "ignore:IProgress not found"


# --------------------------------------------------------------------------- a run's outcome
class NotebookFailed(LitsegError, RuntimeError):
    """A notebook's cell failed (or its process died): names the notebook, the cell and error, and the
    ``.FAILED`` executed copy holding the traceback."""

    def __init__(self, notebook: Path, executed: Path, cause: BaseException):
        self.notebook, self.executed, self.cause = notebook, executed, cause
        if hasattr(cause, "ename"):  # papermill's PapermillExecutionError: name the cell and error
            what = f"{cause.ename}: {cause.evalue} (cell {getattr(cause, 'exec_count', '?')})"
        else:
            what = f"{type(cause).__name__}: {str(cause).strip()[-2000:]}"
        what = " ".join(what.split())  # one console line, however many lines the error had
        super().__init__(f"notebook {notebook.name} failed: {what}; executed copy (with the traceback): {executed}")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a notebook: the partial executed copy is kept as ``NN_name.FAILED.ipynb``."""

    def __init__(self, notebook: Path, executed: Path, seconds: float):
        self.notebook, self.executed, self.seconds = notebook, executed, seconds
        super().__init__(f"interrupted {notebook.name} after {seconds:.0f}s; partial executed copy: "
                         f"{executed}; finished steps are cached, rerun to resume")


@dataclass(frozen=True)
class NotebookRun:
    """One finished notebook: its file name, executed copy and wall seconds."""

    notebook: str
    executed: Path
    seconds: float


def executed_paths(executed_dir: Path, notebook: Path) -> dict[str, Path]:
    """Where the executed copy of ``notebook`` lives while running, after success, after failure."""
    stem = notebook.stem
    return {"running": executed_dir / f"{stem}.RUNNING.ipynb",
            "done": executed_dir / notebook.name,
            "failed": executed_dir / f"{stem}.FAILED.ipynb"}


def fmt_seconds(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s"


# --------------------------------------------------------------------------- console relay
class ConsoleRelay:
    """File-like target for the kernel's stderr: writes through to the console stream."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.mid_line = False
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.stream.write(text)
            self.stream.flush()
            if text:
                self.mid_line = not text.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def line(self, text: str, out: TextIO) -> None:
        """Print one status line on ``out``, starting a new line if a progress bar is mid-line."""
        with self._lock:
            prefix = "\n" if self.mid_line else ""
            self.mid_line = False
            out.write(prefix + text + "\n")
            out.flush()


# --------------------------------------------------------------------------- progress
def _heading(cell: Any) -> str | None:
    if cell.get("cell_type") != "markdown":
        return None
    for line in "".join(cell.get("source", "")).splitlines():
        if line.lstrip().startswith("#"):
            return line.lstrip("# ").strip()[:70] or None
    return None


class Progress:
    """Receives papermill's cell hooks; prints section starts and heartbeats."""

    def __init__(self, name: str, cells: list[Any], relay: ConsoleRelay, out: TextIO,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.name, self.relay, self.out = name, relay, out
        self.heartbeat_s = heartbeat_s
        self.set_cells(cells)
        self.t0 = time.perf_counter()
        self.cell_index: int | None = None
        self.cell_t0 = self.t0
        self.last_print = self.t0
        self.printed_section: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set_cells(self, cells: list[Any]) -> None:
        """The cells as executed (with papermill's injected-parameters cell)."""
        self.sections: list[str | None] = []
        current = None
        for cell in cells:
            current = _heading(cell) or current
            self.sections.append(current)
        self.code_cells = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"]

    def _where(self, index: int) -> str:
        n = self.code_cells.index(index) + 1 if index in self.code_cells else "?"
        return f"cell {n}/{len(self.code_cells)}"

    def _say(self, text: str) -> None:
        self.relay.line(f"[litseg_nb] {self.name}: {text}", self.out)
        self.last_print = time.perf_counter()

    def cell_start(self, cell: Any, index: int) -> None:
        if cell.get("cell_type") != "code":
            return
        now = time.perf_counter()
        self.cell_index, self.cell_t0 = index, now
        section = self.sections[index] if index < len(self.sections) else None
        if section != self.printed_section or now - self.last_print >= self.heartbeat_s:
            self.printed_section = section
            self._say(f"{section or 'setup'} ({self._where(index)}, {fmt_seconds(now - self.t0)} elapsed)")

    def cell_complete(self, cell: Any, index: int) -> None:
        if index == self.cell_index:
            self.cell_index = None

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s / 5)):
            now = time.perf_counter()
            idx = self.cell_index
            if idx is None or now - self.last_print < self.heartbeat_s:
                continue
            section = self.sections[idx] if idx < len(self.sections) else None
            self._say(f"still running {self._where(idx)} ({section or 'setup'}): cell "
                      f"{fmt_seconds(now - self.cell_t0)}, notebook {fmt_seconds(now - self.t0)}")

    def __enter__(self) -> "Progress":
        self._thread = threading.Thread(target=self._beat, name="litseg-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


# --------------------------------------------------------------------------- papermill engine
def _engine():
    from papermill.engines import NBClientEngine, papermill_engines

    class LitsegEngine(NBClientEngine):
        """nbclient engine that reports cell starts/completions to a :class:`Progress`."""

        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            progress: Progress | None = kwargs.pop("litseg_progress", None)
            if progress is not None:
                progress.set_cells(nb_man.nb.cells)
                start, complete = nb_man.cell_start, nb_man.cell_complete

                def cell_start(cell, cell_index=None, **kw):
                    progress.cell_start(cell, cell_index)
                    return start(cell, cell_index, **kw)

                def cell_complete(cell, cell_index=None, **kw):
                    progress.cell_complete(cell, cell_index)
                    return complete(cell, cell_index, **kw)

                nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register("litseg", LitsegEngine)
    return "litseg"


_LIVE_KERNELS: "weakref.WeakSet[Any]" = weakref.WeakSet()
_KM_CLASS: list[type] = []


def _ipc_kernel_manager():
    """AsyncKernelManager whose kernels talk over IPC sockets (local only; no TCP warning).

    Started kernels are remembered so that an interrupted run can stop them at once
    (:func:`_kill_live_kernels`).
    """
    if _KM_CLASS:
        return _KM_CLASS[0]
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self):
            # the sockets live in a private temp folder (jupyter_client's default is the relative
            # "kernel-ipc", i.e. files in the notebooks folder); short path: AF_UNIX allows ~107 bytes
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

    _KM_CLASS.append(IPCKernelManager)
    return IPCKernelManager


def _kill_live_kernels() -> None:
    """SIGKILL the process group of every kernel still running (after Ctrl-C)."""
    for km in list(_LIVE_KERNELS):
        pid = getattr(getattr(km, "provisioner", None), "pid", None)
        if not pid:
            continue
        with contextlib.suppress(OSError):
            if hasattr(os, "killpg"):
                os.killpg(pid, signal.SIGKILL)  # kernels lead their own process group
            else:  # pragma: no cover
                os.kill(pid, signal.SIGKILL)
        if getattr(km, "_ipc_dir", None):
            shutil.rmtree(km._ipc_dir, ignore_errors=True)


class _VerifiedParameterFilter(logging.Filter):
    """Drops papermill's parameter-cell inspection noise for parameters the runner verified.

    papermill re-parses the ``parameters`` cell with a line-based parser that cannot read comments
    containing ``=`` ("Unable to parse line ...") and then reports such declared parameters as
    unknown. The runner reads the cell with Python's own parser and rejects undeclared parameters
    before any kernel starts, so only messages about names in ``verified`` are dropped.
    """

    def __init__(self, verified: set[str]) -> None:
        super().__init__()
        self.verified = verified

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg.startswith("Unable to parse line"):
            return False
        if msg.startswith("Passed unknown parameter:"):
            return msg.split(":", 1)[1].strip() not in self.verified
        return True


@contextlib.contextmanager
def _kernel_environment() -> Iterator[None]:
    """Environment inherited by the kernel: no tqdm IProgress warning (text progress bars)."""
    old = os.environ.get("PYTHONWARNINGS")
    parts = [p for p in (old or "").split(",") if p]
    if _IPROGRESS_FILTER not in parts:
        parts.append(_IPROGRESS_FILTER)
    os.environ["PYTHONWARNINGS"] = ",".join(parts)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = old


def kernel_env_for_lab() -> dict[str, str]:
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONWARNINGS", "").split(",") if p]
    if _IPROGRESS_FILTER not in parts:
        parts.append(_IPROGRESS_FILTER)
    env["PYTHONWARNINGS"] = ",".join(parts)
    return env


def _finish_failed(paths: dict[str, Path]) -> Path:
    """Rename the partial executed copy to ``.FAILED``; the path naming it."""
    if paths["running"].exists():
        os.replace(paths["running"], paths["failed"])
    return paths["failed"]


def execute(notebook: Path, executed_dir: Path, parameters: dict[str, Any], *, kernel_name: str = "python3",
            log_output: bool = False, heartbeat_s: float = HEARTBEAT_S, out: TextIO | None = None,
            err: TextIO | None = None) -> Path:
    """Execute ``notebook`` into ``executed_dir``; returns the finished copy's path.

    Raises whatever papermill raises (the executed copy is then ``NN_name.FAILED.ipynb``, see
    :func:`executed_paths`); KeyboardInterrupt leaves the same ``.FAILED`` copy and propagates.
    """
    import papermill as pm

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    paths = executed_paths(executed_dir, notebook)
    for stale in paths.values():  # the executed folder shows the latest run of each notebook only
        stale.unlink(missing_ok=True)
    cells = nbformat.read(notebook, as_version=4).cells
    relay = ConsoleRelay(err)
    # filters apply to the logger a record is logged on, not to its parents
    pm_logs = [logging.getLogger(n) for n in ("papermill", "papermill.translators")]
    flt = _VerifiedParameterFilter(set(parameters))
    for lg in pm_logs:
        lg.addFilter(flt)
    try:
        with _kernel_environment(), Progress(notebook.stem, cells, relay, out, heartbeat_s) as progress:
            pm.execute_notebook(
                str(notebook), str(paths["running"]), parameters=parameters, kernel_name=kernel_name,
                engine_name=_engine(), cwd=str(notebook.parent), progress_bar=False,
                # the kernel's stderr (progress bars, warnings) always, its stdout with --log-output
                log_output=False, stderr_file=relay, stdout_file=ConsoleRelay(out) if log_output else None,
                litseg_progress=progress,
                kernel_manager_class=_ipc_kernel_manager(),
                # stop the kernel process at once when done or interrupted: a graceful shutdown of a
                # kernel that is still executing prints a ZMQ traceback on the console
                shutdown_kernel="immediate")
        nbformat.validate(nbformat.read(paths["running"], as_version=4))  # complete, readable
        os.replace(paths["running"], paths["done"])
        return paths["done"]
    except KeyboardInterrupt:
        _kill_live_kernels()  # no kernel left behind to print "parent appears to have exited"
        _finish_failed(paths)
        raise
    except BaseException:
        _finish_failed(paths)
        raise
    finally:
        for lg in pm_logs:
            lg.removeFilter(flt)
