"""Saving tables, figures and run manifests under ``outputs/<profile>/``, atomically."""
from __future__ import annotations

import contextlib
import json
import platform
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from .cache import hash_file
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


FOOTER_GID = "litseg-label-footer"


def save_figure(fig, name: str, profile: str, label: str) -> dict[str, Path]:
    """Write ``figures/<name>.png`` and ``.pdf`` with the label as a footer under all drawn content (wrapped
    to the figure's width); deterministic metadata."""
    check_name(name, "figure name")
    stem = outputs_dir(profile) / "figures" / name
    for t in list(fig.texts):  # saving twice must not stack footers
        if t.get_gid() == FOOTER_GID:
            t.remove()
    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, everything drawn so far
    width_in, height_in = fig.get_figwidth(), fig.get_figheight()
    content_w = max(bbox.width, 0.5 * width_in)
    fontsize = 7
    # average glyph width of the default sans font is about 0.55 em
    chars = max(40, int(content_w * 72 / (fontsize * 0.55)))
    text = "\n".join(textwrap.wrap(label, width=chars, break_on_hyphens=False)) or label
    pad_in = 0.06
    fig.text(bbox.x0 / width_in, (bbox.y0 - pad_in) / height_in, text, fontsize=fontsize, color="0.35",
             ha="left", va="top", gid=FOOTER_GID)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=150, bbox_inches="tight", pad_inches=0.1, metadata={"Software": None})
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, bbox_inches="tight", pad_inches=0.1,
                    metadata={"Creator": None, "Producer": None, "CreationDate": None})
    return {"png": png, "pdf": pdf}


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


def write_manifest(profile: str, notebook: str, parameters: dict[str, Any],
                   data_files: Iterable[Path] = (), extra: dict[str, Any] | None = None) -> Path:
    """``outputs/<profile>/manifests/<notebook>.json``: commit, parameters, data hashes, versions."""
    packages = {}
    for name in _TRACKED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            packages[name] = metadata.version(name)
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
        "packages": packages,
        **(extra or {}),
    }
    path = outputs_dir(profile) / "manifests" / f"{notebook}.json"
    write_text_atomic(path, json.dumps(redact_obj(manifest), indent=2, default=str))  # no URL secrets
    return path


def stacked_text_figure(blocks, width_in: float = 9.5, pad_in: float = 0.1):
    """A figure of text ``blocks`` ``(text, text_kwargs, gap_after_points)`` stacked top to bottom, each
    under the rendered box of the one before; the figure is as tall as its content."""
    import matplotlib.pyplot as plt  # deferred: matplotlib only where a figure is drawn

    fig = plt.figure(figsize=(width_in, 1.0))
    renderer = fig.canvas.get_renderer()
    placed, top_in = [], pad_in
    for text, kwargs, gap_pt in blocks:
        t = fig.text(pad_in / width_in, 0.5, text, ha="left", va="top", **kwargs)
        placed.append((t, top_in))
        top_in += t.get_window_extent(renderer).height / fig.dpi + gap_pt / 72
    height = top_in + pad_in
    fig.set_figheight(height)
    for t, top in placed:
        t.set_y(1.0 - top / height)
    return fig
