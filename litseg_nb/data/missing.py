"""The one message for a dataset that is not on disk: which files were expected and how to get them.

Below both the loaders (:mod:`litseg_nb.data.gutenqa`, :mod:`litseg_nb.corpus`) and the downloader
(:mod:`litseg_nb.data.download`, ``python -m litseg_nb download-data``), which all name it.
"""
from __future__ import annotations

from pathlib import Path

from ..core.paths import DataNotFoundError

_COMMAND = "python -m litseg_nb download-data"


def missing_dataset_message(dataset: str, folder: Path) -> str:
    """Why ``dataset`` cannot be loaded from ``folder`` and how to get it (one paragraph)."""
    root = folder.parent
    if dataset == "gutenqa":
        what = (f"expected {folder / 'GutenQA_paragraphs.parquet'} (hub dataset "
                f"LumberChunker/GutenQA_Paragraphs) and {folder / 'questions.parquet'} (hub dataset "
                "LumberChunker/GutenQA)")
        how = f"on a machine with internet run `{_COMMAND} --datasets gutenqa --dest {root}`"
    elif dataset == "literaryqa":
        what = (f"expected {folder / 'annotations'}/<split>.jsonl (hub dataset sapienzanlp/LiteraryQA) "
                f"and the books' Project Gutenberg texts in {folder / 'texts'}/<split>/<gutenberg_id>.txt")
        how = f"on a machine with internet run `{_COMMAND} --datasets literaryqa --dest {root}`"
    else:
        what = f"expected the dataset folder {folder}"
        how = "see the README's data section"
    return (f"{dataset} data not found: {what}. Nothing is downloaded at run time: {how}, or set "
            f"LITSEG_DATA_DIR to the folder that holds {dataset}/ (see the README, 'Data').")


def require_dataset_folder(dataset: str, folder: Path) -> Path:
    if not folder.is_dir():
        raise DataNotFoundError(missing_dataset_message(dataset, folder))
    return folder
