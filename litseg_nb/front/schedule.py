"""Which notebook needs which, and running independent notebooks side by side (``run --jobs 2``).

Each numbered notebook states the notebooks whose outputs it reads in its metadata,
``{"litseg_nb": {"needs": ["02", "03"]}}`` (shown in its first markdown cell too); a notebook without
that entry needs every notebook before it. :func:`plan` turns the selected notebooks into that graph
(a need outside the selection is taken as done: ``--only 05`` reads an earlier run's 02-04).

With ``jobs`` > 1, :func:`run_side_by_side` starts every notebook whose needs have finished, at most
``jobs`` at a time, lowest number first. Each runs in a child process (``python -m
litseg_nb.front.schedule SPEC``) that executes it exactly as the sequential runner does
(:func:`litseg_nb.front.execution.execute`: same parameters, same executed copy, same kernel); its
section and heartbeat lines are relayed to the console, its progress bars and warnings go to
``logs/NN_name.log`` (and a line every 20 s to the console). In smoke the graph is 01 → {02 → 03, 04};
{05, 06} after 02-04 and 07 after 02-03 (two at a time, so 07 follows 05 beside 06); 08 last.

Torch threads follow the number of notebooks running: unless the caller set ``LITSEG_TORCH_THREADS``,
the runner keeps ``logs/torch_threads`` at cores / notebooks running (1 each on 2 cores while two run,
2 once one runs alone) and hands its path to every child as ``LITSEG_TORCH_THREADS_FILE``; the package's
torch work re-reads it before each batch (:mod:`litseg_nb.llm.threads`). The record keeps each
notebook's budgets in order (``"1→2"``: started beside another, finished alone).

A failed notebook stops the schedule: nothing more starts, the notebooks already running finish
(their work is kept and cached), then :class:`~litseg_nb.front.execution.NotebookFailed` names the
first failure. Ctrl-C forwards the interrupt to every running child (each leaves its
``.FAILED`` copy) and raises :class:`~litseg_nb.front.execution.Interrupted`.

Every run, sequential or not, records each notebook's start, end, torch threads and the notebooks
that ran beside it in ``outputs/<profile>/logs/schedule.json`` (:mod:`litseg_nb.core.run_record`), which
notebook 08 reads to say which ledgers and wall times were taken under contention.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import nbformat

from ..config import ConfigError
from ..core.run_record import Record, number, record
from ..core.safe_io import write_json_atomic, write_text_atomic
from ..errors import LitsegError
from ..llm.threads import THREADS_ENV, THREADS_FILE_ENV
from .execution import Interrupted, NotebookFailed, NotebookRun, execute, executed_paths

#: notebook metadata key: ``nb.metadata["litseg_nb"]["needs"]``
NEEDS_KEY = "needs"
_INTERRUPT_GRACE_S = 60.0


def declared_needs(notebook: Path) -> tuple[str, ...] | None:
    """The notebook numbers ``notebook`` states it reads (metadata ``litseg_nb.needs``), or None."""
    meta = nbformat.read(notebook, as_version=4).metadata.get("litseg_nb", {})
    if NEEDS_KEY not in meta:
        return None
    needs = meta[NEEDS_KEY]
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
    graph: dict[str, tuple[str, ...]] = {}
    for nb, n in zip(notebooks, nums):
        needs = declared_needs(nb)
        earlier = [m for m in nums if m < n]
        graph[n] = tuple(earlier) if needs is None else tuple(m for m in earlier if m in needs)
    return graph


# ------------------------------------------------------------------------------------------ side by side
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


THREADS_FILE = "torch_threads"


def threads_for(n_running: int, cores: int | None = None) -> int:
    """Torch threads for each of ``n_running`` notebooks on ``cores`` cores (this machine's by default)."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, n_running))


class ThreadBudget:
    """``logs/torch_threads``: the torch threads each running notebook may use, rewritten (atomically)
    whenever a notebook starts or ends; None as a whole when the caller fixed ``LITSEG_TORCH_THREADS``
    (their choice stands) -- see :func:`ThreadBudget.for_run`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.value: int | None = None

    @classmethod
    def for_run(cls, rec: Record) -> "ThreadBudget | None":
        return None if os.environ.get(THREADS_ENV) else cls(rec.path.parent / THREADS_FILE)

    def update(self, n_running: int) -> bool:
        """Write the budget for ``n_running`` notebooks; True when it changed."""
        n = threads_for(n_running)
        if n == self.value:
            return False
        write_text_atomic(self.path, f"{n}\n")
        self.value = n
        return True

    def child_env(self) -> dict[str, str]:
        return {THREADS_FILE_ENV: str(self.path), THREADS_ENV: str(self.value)}

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def run_side_by_side(profile: str, notebooks: Sequence[Path], checked: Mapping[Path, dict[str, Any]],
                     executed_dir: Path, jobs: int, *, kernel_name: str, log_output: bool,
                     heartbeat_s: float) -> list[Any]:
    """Execute ``notebooks`` as :func:`plan` allows, ``jobs`` at a time; the runs in finishing order."""
    graph = plan(notebooks)
    by_num = {number(nb): nb for nb in notebooks}
    pending = [number(nb) for nb in notebooks]
    done: set[str] = set()
    running: dict[str, _Child] = {}
    runs: list[NotebookRun] = []
    failures: list[NotebookFailed] = []
    rec = record(profile, jobs)
    budget = ThreadBudget.for_run(rec)
    lock = threading.Lock()
    work = Path(tempfile.mkdtemp(prefix="litseg_sched_"))
    out = sys.stdout
    print(f"[litseg_nb] up to {jobs} notebooks side by side; order: "
          + "; ".join(f"{n} after {','.join(graph[n])}" if graph[n] else f"{n} first" for n in pending), flush=True)
    try:
        while pending or running:
            ready = [n for n in pending if all(d in done for d in graph[n])] if not failures else []
            starting = ready[:max(0, jobs - len(running))]
            # one budget per pass, after the finished ones left and before the next start (a notebook
            # ending and its successor starting in the same pass leave the others' budget unchanged)
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
                env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # section lines reach the console as they happen
                if budget is not None:
                    env.update(budget.child_env())
                threads = str(budget.value) if budget is not None else os.environ.get(THREADS_ENV, "default")
                spec, result = work / f"{n}.spec", work / f"{n}.result.json"
                log = rec.path.parent / f"{nb.stem}.log"
                spec.write_bytes(pickle.dumps({"notebook": nb, "executed_dir": executed_dir, "parameters": checked[nb],
                                               "kernel_name": kernel_name, "log_output": log_output,
                                               "heartbeat_s": heartbeat_s, "result": result, "log": log}))
                proc = subprocess.Popen([sys.executable, "-m", "litseg_nb.front.schedule", str(spec)], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                        start_new_session=True)  # Ctrl-C reaches the children through us only
                relay = threading.Thread(target=_relay, args=(proc.stdout, out, lock), daemon=True)
                relay.start()
                running[n] = _Child(nb, proc, result, log, time.perf_counter(), relay)
                rec.start(nb, threads)
                beside = sorted(m for m in running if m != n)
                with lock:
                    print(f"[litseg_nb] {nb.name} (profile={checked[nb].get('profile')}"
                          + (f", beside {', '.join(beside)}" if beside else "")
                          + f", torch threads {threads}) ...; progress bars: {log}", flush=True)
            if not running:
                break  # a failure left nothing to run, or nothing is ready (cannot happen: the graph is acyclic)
            time.sleep(0.2)
            for n, child in list(running.items()):
                if child.proc.poll() is None:
                    continue
                child.relay.join(timeout=5)
                del running[n]
                dt = time.perf_counter() - child.t0
                res = _read_result(child.result)
                failed = executed_paths(executed_dir, child.notebook)["failed"]
                if child.proc.returncode == 0 and res.get("ok"):
                    rec.end(child.notebook, "ok")
                    done.add(n)
                    runs.append(NotebookRun(child.notebook.name, Path(res["executed"]), dt))
                    with lock:
                        print(f"[litseg_nb] done {child.notebook.name} in {dt:.1f}s", flush=True)
                    continue
                rec.end(child.notebook, "failed")
                cause = _ChildError(res, child.proc.returncode, child.log)
                failures.append(NotebookFailed(child.notebook, failed, cause))
                with lock:
                    print(f"[litseg_nb] FAILED {child.notebook.name} after {dt:.1f}s"
                          + (f"; waiting for {', '.join(sorted(running))} to finish" if running else ""), flush=True)
    except KeyboardInterrupt:
        _interrupt(running)
        first = next(iter(running.values()), None)
        if first is None:
            raise
        for child in running.values():
            rec.end(child.notebook, "interrupted")
        raise Interrupted(first.notebook, executed_paths(executed_dir, first.notebook)["failed"],
                          time.perf_counter() - first.t0) from None
    finally:
        if budget is not None:
            budget.remove()
        for p in work.iterdir():
            p.unlink(missing_ok=True)
        work.rmdir()
    if failures:
        raise failures[0]
    return sorted(runs, key=lambda r: r.notebook)  # notebook order, as one after another


class _ChildError(LitsegError):
    """A notebook's failure as its child process reported it (papermill's cell and error, when known)."""

    def __init__(self, res: Mapping[str, Any], returncode: int | None, log: Path):
        if res.get("ename"):
            self.ename, self.evalue, self.exec_count = res["ename"], res.get("evalue", ""), res.get("exec_count", "?")
            super().__init__(f"{self.ename}: {self.evalue}")
        else:
            super().__init__(res.get("what") or f"the notebook's process exited with {returncode} without a result "
                             f"(see {log})")


def _read_result(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _interrupt(running: Mapping[str, _Child]) -> None:
    """SIGINT to every running child, then wait (a child kills its kernel and marks its copy FAILED)."""
    for child in running.values():
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + _INTERRUPT_GRACE_S
    for child in running.values():
        try:
            child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.proc.kill()


# ------------------------------------------------------------------------------------------ the child
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _LaneStderr:
    """The kernel's stderr in a side-by-side run: all of it to the log; to the console, each finished
    line (warnings, a progress bar's last state) and a progress bar's current state at most every
    ``every_s`` seconds, each as one line naming the notebook (two bars redrawn in place on one console
    line would garble each other)."""

    def __init__(self, log: Any, console: Any, name: str, every_s: float = 20.0) -> None:
        self.log, self.console, self.name, self.every_s = log, console, name, every_s
        self.partial, self.last = "", float("-inf")  # the first redraw shows at once

    def write(self, text: str) -> int:
        self.log.write(text)
        self.log.flush()
        buf = self.partial + text
        *lines, self.partial = buf.split("\n")
        for line in lines:
            line = line.rsplit("\r", 1)[-1].strip()
            if line:
                self._say(line)
        bar = self.partial.rsplit("\r", 1)[-1].strip()
        self.partial = self.partial.rsplit("\r", 1)[-1]
        if bar and time.monotonic() - self.last >= self.every_s:
            self._say(bar)
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
    """Execute one notebook as the spec says; write ``{"ok": ...}`` to the spec's result path."""
    spec = pickle.loads(Path(spec_path).read_bytes())
    result: dict[str, Any]
    with open(spec["log"], "w", encoding="utf-8") as log:
        err = _LaneStderr(log, sys.stdout, spec["notebook"].stem)
        try:
            executed = execute(spec["notebook"], spec["executed_dir"], spec["parameters"],
                               kernel_name=spec["kernel_name"], log_output=spec["log_output"],
                               heartbeat_s=spec["heartbeat_s"], out=sys.stdout, err=err)
            result = {"ok": True, "executed": str(executed)}
        except KeyboardInterrupt:
            result = {"ok": False, "what": "interrupted"}
        except Exception as exc:  # papermill's PapermillExecutionError carries the cell and the error
            result = {"ok": False, "what": f"{type(exc).__name__}: {str(exc).strip()[-2000:]}"}
            for attr in ("ename", "evalue", "exec_count"):
                if hasattr(exc, attr):
                    result[attr] = getattr(exc, attr)
    write_json_atomic(spec["result"], result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
