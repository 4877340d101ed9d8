"""``outputs/<profile>/logs/schedule.json``: when each notebook of a ``run`` started and ended, on how many
torch threads, and which ran beside it (notebook 08 says which wall times were taken under contention).
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import ConfigError
from .paths import outputs_root
from .safe_io import ensure_writable, write_json_atomic

SCHEDULE_FILE = "schedule.json"


def number(notebook: Path) -> str:
    return notebook.name[:2]


@dataclass
class Interval:
    notebook: str  # file name
    started: float  # time.time()
    ended: float | None = None
    torch_threads: str = "default"
    status: str = "running"


@dataclass
class Record:
    path: Path
    jobs: int
    intervals: dict[str, Interval] = field(default_factory=dict)
    run_started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def start(self, notebook: Path, torch_threads: str) -> None:
        self.intervals[number(notebook)] = Interval(notebook.name, time.time(), torch_threads=torch_threads)
        self._write()

    def end(self, notebook: Path, status: str) -> None:
        iv = self.intervals[number(notebook)]
        iv.ended, iv.status = time.time(), status
        self._write()

    def threads_changed(self, notebook: Path, torch_threads: str) -> None:
        """Record a running notebook's new torch threads after the earlier ones (``"1→2"``)."""
        iv = self.intervals[number(notebook)]
        if iv.torch_threads.rsplit("→", 1)[-1] != torch_threads:
            iv.torch_threads += f"→{torch_threads}"
            self._write()

    def _write(self) -> None:
        try:
            old = _read(self.path)
        except ConfigError as exc:
            warnings.warn(f"{exc}; writing it anew", stacklevel=2)
            old = {}
        now = time.time()
        for num, iv in self.intervals.items():
            beside = sorted(m for m, other in self.intervals.items() if m != num
                            and other.started < (iv.ended or now) and (other.ended or now) > iv.started)
            old[num] = {"notebook": iv.notebook, "status": iv.status, "run_started": self.run_started,
                        "jobs": self.jobs, "torch_threads": iv.torch_threads,
                        "started": datetime.fromtimestamp(iv.started, timezone.utc).isoformat(timespec="seconds"),
                        "seconds": None if iv.ended is None else round(iv.ended - iv.started, 1),
                        "ran_beside": beside}
        write_json_atomic(self.path, dict(sorted(old.items())), indent=1)


def logs_dir(profile: str) -> Path:
    return outputs_root() / profile / "logs"


def read_schedule(profile: str) -> dict[str, dict[str, Any]]:
    """Notebook number -> its latest run's record ({} if none)."""
    return _read(logs_dir(profile) / SCHEDULE_FILE)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable run schedule ({exc}); delete it, the next run writes it anew") from exc
    return data if isinstance(data, dict) else {}


def record(profile: str, jobs: int) -> Record:
    return Record(ensure_writable(logs_dir(profile)) / SCHEDULE_FILE, jobs)
