"""Filesystem locations: the data root (``LITSEG_DATA_DIR``), outputs (``LITSEG_OUTPUTS_DIR``) and cache
(``LITSEG_CACHE_DIR``) folders. In a checkout (the notebooks' home) they are resolved from the package, never
from the working directory; an installed package (no checkout around it) never writes inside itself: its
outputs go to the working directory and its cache to the user's cache folder. The ``segment`` command writes
to the working directory either way (:func:`cli_outputs_root`)."""
from __future__ import annotations

import os
from pathlib import Path
from ..errors import UsageError
from .safe_io import OutputsNotWritable

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_DIR.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
TEMPLATES_DIR = PACKAGE_DIR / "templates"


def in_checkout(root: Path | None = None) -> bool:
    """Whether the package runs from a source checkout (its notebooks beside it), not from an installation."""
    root = REPO_ROOT if root is None else root
    return (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir()


class DataNotFoundError(UsageError, FileNotFoundError):
    """Raised when the evaluation data root or a file inside it is missing."""


def data_root() -> Path:
    """Where the evaluation data is (or is to be downloaded): ``LITSEG_DATA_DIR``, else ``<repo>/../shared/data``."""
    env = os.environ.get("LITSEG_DATA_DIR")
    return Path(env).expanduser().resolve() if env else (REPO_ROOT.parent / "shared" / "data").resolve()


def data_dir() -> Path:
    """Root of the evaluation data (GutenQA, Gutenberg, LiteraryQA copies)."""
    root = data_root()
    if not root.is_dir():
        raise DataNotFoundError(
            f"data root {root} does not exist; set LITSEG_DATA_DIR to the folder holding "
            "gutenqa/, gutenberg/ and literaryqa/"
        )
    return root


def missing_dataset_message(dataset: str, folder: Path) -> str:
    """Why ``dataset`` cannot be loaded from ``folder`` and how to get it (one paragraph)."""
    how = ("on a machine with internet run "
           f"`python -m litseg_nb download-data --datasets {dataset} --dest {folder.parent}`")
    if dataset == "gutenqa":
        what = (f"expected {folder / 'GutenQA_paragraphs.parquet'} (hub dataset "
                f"LumberChunker/GutenQA_Paragraphs) and {folder / 'questions.parquet'} (hub dataset "
                "LumberChunker/GutenQA)")
    elif dataset == "literaryqa":
        what = (f"expected {folder / 'annotations'}/<split>.jsonl (hub dataset sapienzanlp/LiteraryQA) "
                f"and the books' Project Gutenberg texts in {folder / 'texts'}/<split>/<gutenberg_id>.txt")
    else:
        what, how = f"expected the dataset folder {folder}", "see docs/guide/data.md"
    return (f"{dataset} data not found: {what}. Nothing is downloaded at run time: {how}, or set "
            f"LITSEG_DATA_DIR to the folder that holds {dataset}/ (see docs/guide/data.md).")


def require_dataset_folder(dataset: str, folder: Path) -> Path:
    if not folder.is_dir():
        raise DataNotFoundError(missing_dataset_message(dataset, folder))
    return folder


def outputs_root() -> Path:
    """``LITSEG_OUTPUTS_DIR``, else ``<checkout>/outputs``, else (an installed package) ``./outputs``."""
    env = os.environ.get("LITSEG_OUTPUTS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return REPO_ROOT / "outputs" if in_checkout() else Path.cwd().resolve() / "outputs"


def cli_outputs_root() -> Path:
    """Where a command run on the user's own files writes by default: ``LITSEG_OUTPUTS_DIR``, else
    ``./outputs`` in the working directory (checkout or not)."""
    env = os.environ.get("LITSEG_OUTPUTS_DIR")
    return Path(env).expanduser().resolve() if env else Path.cwd().resolve() / "outputs"


def default_cache_root() -> Path:
    """``<checkout>/.cache``, else (an installed package) the user's cache folder (``$XDG_CACHE_HOME`` or
    ``~/.cache``) ``/litseg_nb``."""
    if in_checkout():
        return REPO_ROOT / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser().resolve() / "litseg_nb"


def outputs_dir(profile: str) -> Path:
    """``outputs/<profile>`` with its standard sub-folders created."""
    root = outputs_root() / profile
    try:
        for sub in ("tables", "figures", "executed", "artifacts"):
            (root / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputsNotWritable(
            f"outputs folder {root} is not writable ({exc.strerror or type(exc).__name__}); make it "
            "writable or point LITSEG_OUTPUTS_DIR at a writable folder") from None
    return root


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a table or label shows it: ``<outputs>/<rest>`` for a path inside :func:`outputs_root`
    (so two runs' tables compare equal whichever checkout or ``LITSEG_OUTPUTS_DIR`` wrote them), else as given."""
    text = str(path)
    p = Path(text).expanduser()
    if not p.is_absolute():  # a model name or hub id ("Qwen/Qwen3-8B"), never resolved against the cwd
        return text
    try:
        rest = p.resolve().relative_to(outputs_root())
    except (ValueError, OSError):
        return text
    return "<outputs>/" + rest.as_posix()


def cache_dir() -> Path:
    env = os.environ.get("LITSEG_CACHE_DIR")
    root = Path(env).expanduser().resolve() if env else default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root
