"""Content-addressed caches: :class:`StepCache` (one JSON file per heavy step, keyed by name, config,
input contents and the package's source) and :class:`SQLiteStore` (the table under the LLM request and
embedding caches). An unreadable entry or file is a miss, replaced with a :class:`CacheWarning`."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .._version import __version__
from .paths import cache_dir
from .safe_io import atomic_path


class CacheWarning(UserWarning):
    """A cache entry or file was unreadable and is being replaced (the run continues)."""


def hash_file(path: Path) -> str:
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hash_obj(obj: Any) -> str:
    """Stable hash of a JSON-serialisable object (Paths hash their file content)."""

    def default(o: Any) -> Any:
        if isinstance(o, Path):
            return {"__file__": hash_file(o)} if o.is_file() else {"__path__": str(o)}
        if hasattr(o, "fingerprint"):
            return {"__config__": o.fingerprint()}
        if hasattr(o, "__dict__"):
            return o.__dict__
        return str(o)

    blob = json.dumps(obj, sort_keys=True, default=default, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the package's source files and templates (computed once per process)."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(p for p in pkg.rglob("*") if p.suffix in (".py", ".txt") and p.is_file()):
        h.update(str(path.relative_to(pkg)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


class StepCache:
    """One step's cache entry, ``<cache_dir>/steps/<name>/<key>.json``; a dict without ``required`` keys misses."""

    def __init__(self, name: str, config: Any = None, inputs: Any = None, root: Path | None = None,
                 required: tuple[str, ...] = ()):
        self.name = name
        self.required = tuple(required)
        self.key = hash_obj({"step": name, "config": config, "inputs": inputs, "version": __version__,
                             "code": code_version()})[:24]
        self.dir = (root or cache_dir()) / "steps" / name
        self.path = self.dir / f"{self.key}.json"
        self._found, self._value = False, None

    def exists(self) -> bool:
        """Whether a readable entry is stored (a corrupt one is removed, with a warning)."""
        self._found, self._value = self._read()
        return self._found

    def load(self) -> Any:
        if not self._found and not self.exists():
            raise FileNotFoundError(f"step cache entry {self.path} is missing or unreadable")
        return self._value

    def save(self, value: Any) -> None:
        with atomic_path(self.path) as tmp, tmp.open("w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=False)

    def _read(self) -> tuple[bool, Any]:
        if not self.path.is_file():
            return False, None
        try:
            with self.path.open(encoding="utf-8") as fh:
                value = json.load(fh)
            missing = [k for k in self.required if not isinstance(value, dict) or k not in value]
            if not missing:
                return True, value
            why = f"is incomplete (missing key(s) {', '.join(missing)})"
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            why = f"is corrupt ({exc})"
        with contextlib.suppress(OSError):
            self.path.unlink()
        warnings.warn(f"step cache entry {self.path} {why}; recomputing and replacing it", CacheWarning,
                      stacklevel=3)
        return False, None


class SQLiteStore:
    """A ``key``-indexed table in one SQLite file (WAL, thread-safe, shared by processes). A file that is not
    a readable database is moved aside (``<name>.corrupt-<time>-<pid>``) with one warning naming both paths."""

    def __init__(self, path: str | Path, what: str, table: str, columns: str) -> None:
        self.path, self.what, self.table, self.columns = Path(path), what, table, columns
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.moved_aside: Path | None = None
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as exc:  # "file is not a database", "disk image is malformed"
            self._replace(exc)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({self.columns})")
            conn.execute(f"SELECT * FROM {self.table} LIMIT 1").fetchall()
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _replace(self, exc: Exception) -> None:
        """Move the unreadable file aside, warn, and open an empty store (caller holds the lock)."""
        if getattr(self, "_conn", None) is not None:  # the file became unreadable under a running process
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, aside.with_name(aside.name + suffix))
        warnings.warn(f"{self.what} {self.path} is not a readable SQLite database ({exc}); moved it to {aside} "
                      "and started an empty cache (cached entries will be recomputed)", CacheWarning, stacklevel=4)
        self.moved_aside = aside
        self._conn = self._open()

    def _by_keys(self, verb: str, keys: Sequence[str]):
        """Cursors of ``<verb> FROM <table> WHERE key IN (...)`` over ``keys``, 500 at a time (lock held)."""
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            part = uniq[i:i + 500]
            yield self._conn.execute(f"{verb} FROM {self.table} WHERE key IN ({','.join('?' * len(part))})", part)

    def select(self, keys: Sequence[str], columns: str) -> list[tuple]:
        with self._lock:
            return [row for cur in self._by_keys(f"SELECT {columns}", keys) for row in cur.fetchall()]

    def delete(self, keys: Sequence[str]) -> int:
        """Remove the rows of ``keys`` (one transaction); the number removed."""
        with self._lock, self._conn:
            return sum(cur.rowcount for cur in self._by_keys("DELETE", keys))

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
