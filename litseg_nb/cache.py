"""Content-addressed cache for heavy steps.

A step's key hashes its name, its config fingerprint, its inputs (strings, file contents or
anything JSON-serialisable), the package version and the *code version* — a hash of the source of
the package (``.py`` files and prompt templates) — so a rerun with the same inputs skips the
finished work and any change to config, data or code recomputes. LLM requests and embeddings have
their own persistent caches, so recomputing a step after a code change repeats no model call::

    cache = StepCache("chunk-token", cfg, inputs={"book": book.text})
    chunks = cache.get_or_compute(lambda: run_token_splitter(...), serialize=..., deserialize=...)

Values are stored as JSON under ``<cache_dir>/steps/<name>/<key>.json``, written atomically.
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .paths import cache_dir


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
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in pkg.rglob("*") if p.suffix in (".py", ".txt") and p.is_file()):
        h.update(str(path.relative_to(pkg)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


class StepCache:
    def __init__(self, name: str, config: Any = None, inputs: Any = None, root: Path | None = None):
        self.name = name
        self.key = hash_obj({"step": name, "config": config, "inputs": inputs, "version": __version__,
                             "code": code_version()})[:24]
        self.dir = (root or cache_dir()) / "steps" / name
        self.path = self.dir / f"{self.key}.json"

    def exists(self) -> bool:
        return self.path.is_file()

    def load(self) -> Any:
        with self.path.open(encoding="utf-8") as fh:
            return json.load(fh)

    def save(self, value: Any) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=False)
        tmp.replace(self.path)

    def get_or_compute(
        self,
        compute: Callable[[], Any],
        serialize: Callable[[Any], Any] = lambda v: v,
        deserialize: Callable[[Any], Any] = lambda v: v,
    ) -> Any:
        if self.exists():
            return deserialize(self.load())
        value = compute()
        self.save(serialize(value))
        return value
