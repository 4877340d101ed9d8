"""Content-addressed cache for heavy steps.

A step's key hashes its name, its config fingerprint, its inputs (strings, file contents or
anything JSON-serialisable), the package version and the *code version* — a hash of the source of
the package (``.py`` files and prompt templates) — so a rerun with the same inputs skips the
finished work and any change to config, data or code recomputes. LLM requests and embeddings have
their own persistent caches, so recomputing a step after a code change repeats no model call::

    cache = StepCache("chunk-token", cfg, inputs={"book": book.text})
    chunks = cache.get_or_compute(lambda: run_token_splitter(...), serialize=..., deserialize=...)

Values are stored as JSON under ``<cache_dir>/steps/<name>/<key>.json``, written atomically. An
entry that cannot be read (truncated or overwritten JSON, or a dict without the step's ``required``
keys) is a miss: it is removed and recomputed, with a :class:`CacheWarning` naming the file.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from .._version import __version__
from .paths import cache_dir
from ..errors import LitsegError


class CacheWarning(UserWarning):
    """A cache entry or file was unreadable and is being replaced (the run continues)."""


class CorruptCacheEntry(LitsegError, ValueError):
    """A step-cache file that is not valid JSON (truncated, overwritten)."""


def hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hash_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


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
    return hash_bytes(blob.encode("utf-8"))


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
    """One step's cache entry; ``required`` names the keys a stored dict must have (an entry without
    them — written by an older version, edited by hand — is a miss like a corrupt one)."""

    def __init__(self, name: str, config: Any = None, inputs: Any = None, root: Path | None = None,
                 required: tuple[str, ...] = ()):
        self.name = name
        self.required = tuple(required)
        self.key = hash_obj({"step": name, "config": config, "inputs": inputs, "version": __version__,
                             "code": code_version()})[:24]
        self.dir = (root or cache_dir()) / "steps" / name
        self.path = self.dir / f"{self.key}.json"

    def exists(self) -> bool:
        """Whether a *readable* entry is stored (a corrupt one counts as absent, with a warning).

        The value read here is kept for the :meth:`load` that follows, so it is parsed once.
        """
        found, value = self._load_or_none()
        if found:
            self._loaded = (value,)
        return found

    def load(self) -> Any:
        """The stored value; :class:`CorruptCacheEntry` (naming the file) if it cannot be read."""
        kept = self.__dict__.pop("_loaded", None)
        if kept is not None:
            return kept[0]
        try:
            with self.path.open(encoding="utf-8") as fh:
                value = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorruptCacheEntry(f"step cache entry {self.path} is corrupt ({exc})") from exc
        self._check_keys(value)
        return value

    def _check_keys(self, value: Any) -> None:
        if not self.required:
            return
        missing = [k for k in self.required if not isinstance(value, dict) or k not in value]
        if missing:
            raise CorruptCacheEntry(f"step cache entry {self.path} is incomplete (missing key(s) {', '.join(missing)})")

    def save(self, value: Any) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                json.dump(value, fh, ensure_ascii=False)
            tmp.replace(self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _load_or_none(self) -> tuple[bool, Any]:
        """``(True, value)`` for a readable entry; a corrupt one is a miss, with a warning."""
        if not self.path.is_file():
            return False, None
        try:
            with self.path.open(encoding="utf-8") as fh:
                value = json.load(fh)
            self._check_keys(value)
            return True, value
        except (json.JSONDecodeError, UnicodeDecodeError, CorruptCacheEntry) as exc:
            if not isinstance(exc, CorruptCacheEntry):
                exc = CorruptCacheEntry(f"step cache entry {self.path} is corrupt ({exc})")
            try:
                self.path.unlink()
            except OSError:
                pass
            warnings.warn(str(exc) + "; recomputing and replacing it", CacheWarning, stacklevel=3)
            return False, None

    def get_or_compute(
        self,
        compute: Callable[[], Any],
        serialize: Callable[[Any], Any] = lambda v: v,
        deserialize: Callable[[Any], Any] = lambda v: v,
    ) -> Any:
        found, stored = self._load_or_none()
        if found:
            return deserialize(stored)
        value = compute()
        self.save(serialize(value))
        return value
