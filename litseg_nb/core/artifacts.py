"""Saving tables, figures and run manifests under ``outputs/<profile>/``.

Every table and figure carries a *label* naming the profile, models and data that produced it
(``StageConfig.describe()``): a table gets it as the caption line of its Markdown file and in a
``<name>.label.txt`` sidecar next to the CSV; a figure gets it as a footer line.
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from .cache import hash_file
from .figures import save_figure_files
from .paths import REPO_ROOT, outputs_dir
from ..redact import redact_obj
from .safe_io import atomic_path, check_name, write_text_atomic
from .._version import __version__

_TRACKED_PACKAGES = (
    "torch", "transformers", "peft", "trl", "vllm", "ragas", "FlagEmbedding", "faiss-cpu",
    "faiss-gpu", "papermill", "nupunkt", "bm25s", "langchain-text-splitters",
    "langchain-experimental", "sentence-transformers", "numpy", "pandas", "matplotlib", "seaborn",
)


def save_table(df, name: str, profile: str, label: str, index: bool = False) -> dict[str, Path]:
    """Write ``df`` as ``tables/<name>.csv`` and ``tables/<name>.md`` (with the label as caption).
    ``name`` is a plain name (:func:`~litseg_nb.core.safe_io.check_name`), never a path."""
    check_name(name, "table name")
    root = outputs_dir(profile) / "tables"
    csv_path, md_path = root / f"{name}.csv", root / f"{name}.md"
    with atomic_path(csv_path) as tmp:  # temp file + rename: a stopped run leaves no partial table
        df.to_csv(tmp, index=index)
    try:
        body = df.to_markdown(index=index, floatfmt=".4g")
    except ImportError:  # tabulate missing
        body = df.to_string(index=index)
    write_text_atomic(md_path, f"**{name}** — {label}\n\n{body}\n")
    write_text_atomic(root / f"{name}.label.txt", label + "\n")
    return {"csv": csv_path, "md": md_path}


def save_figure(fig, name: str, profile: str, label: str) -> dict[str, Path]:
    """Write ``figures/<name>.png`` and ``.pdf`` with the label as a footer; deterministic metadata."""
    # footer laid out below all drawn text, atomic writes (see litseg_nb.core.figures)
    check_name(name, "figure name")
    return save_figure_files(fig, outputs_dir(profile) / "figures" / name, label)


def artifact_path(profile: str, *parts: str) -> Path:
    """``outputs/<profile>/artifacts/<parts...>`` (a file; its folder is created)."""
    p = outputs_dir(profile) / "artifacts" / Path(*parts)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def artifact_dir(profile: str, *parts: str) -> Path:
    """``outputs/<profile>/artifacts/<parts...>`` (a folder, created)."""
    p = outputs_dir(profile) / "artifacts" / Path(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {}
    for name in _TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def write_manifest(profile: str, notebook: str, parameters: dict[str, Any],
                   data_files: Iterable[Path] = (), extra: dict[str, Any] | None = None) -> Path:
    """``outputs/<profile>/manifests/<notebook>.json``: commit, parameters, data hashes, versions."""
    root = outputs_dir(profile) / "manifests"
    root.mkdir(parents=True, exist_ok=True)

    manifest = {
        "notebook": notebook,
        "profile": profile,
        "parameters": parameters,
        "git_commit": git_commit(),
        "litseg_nb_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "data_files": {str(p): hash_file(Path(p)) for p in sorted(set(map(str, data_files)))},
        "packages": package_versions(),
        **(extra or {}),
    }
    path = root / f"{notebook}.json"
    write_text_atomic(path, json.dumps(redact_obj(manifest), indent=2, default=str))  # no URL secrets
    return path
