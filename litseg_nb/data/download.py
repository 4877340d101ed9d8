"""Getting the evaluation data onto a machine with internet access (opt-in, never at run time)."""
from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Sequence

from ..core.paths import data_root
from . import gutenqa as gq, literaryqa as lq

DOWNLOADABLE = ("gutenqa", "literaryqa")


def download(datasets: Sequence[str], dest: Path, literaryqa_split: str = "validation") -> list[Path]:
    """Fetch ``datasets`` from the hub into ``dest`` (the layout the loaders read); the files written."""
    unknown = sorted(set(datasets) - set(DOWNLOADABLE))
    if unknown:
        raise ValueError(f"cannot download {unknown}; downloadable: {', '.join(DOWNLOADABLE)} "
                         "(raw Gutenberg books come from gutenberg.org)")
    if not datasets:
        raise ValueError(f"no dataset named; downloadable: {', '.join(DOWNLOADABLE)}")
    created = [d for d in (dest, *(dest / ds for ds in datasets)) if not d.exists()]
    caches = [dest / ds / ".cache" for ds in datasets if not (dest / ds / ".cache").exists()]
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return _download(datasets, dest, literaryqa_split)
    except BaseException:  # a failed download leaves the destination as it was (no .cache/huggingface)
        import shutil

        for folder in caches:
            shutil.rmtree(folder, ignore_errors=True)
        for folder in reversed(created):  # only folders this call created, and only if left empty
            with suppress(OSError):
                folder.rmdir()
        raise


def _download(datasets: Sequence[str], dest: Path, literaryqa_split: str) -> list[Path]:
    written: list[Path] = []
    if "gutenqa" in datasets:
        from huggingface_hub import hf_hub_download

        folder = dest / "gutenqa"
        for repo, name in ((gq.PARAGRAPHS_REPO, gq.PARAGRAPHS_FILE), (gq.QUESTIONS_REPO, gq.QUESTIONS_FILE)):
            written.append(Path(hf_hub_download(repo, name, repo_type="dataset", local_dir=folder)))
    if "literaryqa" in datasets:
        from huggingface_hub import snapshot_download

        folder = dest / "literaryqa"
        snapshot_download(lq.HUB_REPO, repo_type="dataset", local_dir=folder,
                          allow_patterns=[f"*{literaryqa_split}*", "*.md"])
        written += sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts)
    return written


def cli(args) -> int:
    """Handler of ``python -m litseg_nb download-data`` (arguments: datasets, dest, literaryqa_split)."""
    import sys

    dest = Path(args.dest).expanduser().resolve() if args.dest else data_root()
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    try:
        files = download(datasets, dest, args.literaryqa_split)
    except ValueError as exc:
        print(f"[litseg_nb] {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # no network, hub refused: one line naming the cause
        print(f"[litseg_nb] download failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
              file=sys.stderr)
        return 1
    for f in files:
        print(f)
    print(f"[litseg_nb] downloaded {', '.join(datasets)} into {dest}; set LITSEG_DATA_DIR={dest} if that "
          "is not the default data folder")
    return 0
