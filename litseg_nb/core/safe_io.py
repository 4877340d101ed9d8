"""Writing output files so that a stopped run never leaves a file that looks finished."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..config import ConfigError
from ..errors import UsageError

_counter = itertools.count()


class OutputsNotWritable(ConfigError):
    """An outputs folder cannot be created or written."""


class WouldLoseData(UsageError):
    """A write would replace or remove what the user or the repository already has (:func:`refuse_loss`)."""


def refuse_loss(what: str, dest: str | os.PathLike, lost: Iterable[Any], how: str) -> None:
    """THE rule for a destination that already holds something: a command adds to it and rewrites what it would
    write there again, never replaces or removes anything else without being told. ``lost``: the names of what this
    write would replace or remove; any -> :class:`WouldLoseData`, one line naming ``what`` (the command),
    ``dest``, how many and the first few, then ``how`` to do it deliberately. Call it before writing anything."""
    names = sorted({str(x) for x in lost})
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise WouldLoseData(f"{what}: {dest} holds {len(names)} item(s) this run would replace or remove "
                            f"({shown}); nothing written; {how}")


class BadName(ConfigError):
    """A name that becomes part of a file name (a table, figure or chunk set) is not a plain name."""


#: a plain name: letters, digits and ``_ . + @ -``, starting with a letter or digit (no path separator,
#: so nothing that could leave the folder it is written in)
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+@-]*"


def check_name(name: str, what: str = "name") -> str:
    """``name`` itself when it is a plain name (:data:`NAME_PATTERN`: it becomes a file name, never a path);
    else :class:`BadName` naming ``what`` (e.g. ``"--name"``)."""
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name) or len(name) > 200:
        raise BadName(f"{what} {name!r} is not a plain name: use letters, digits and _ . + @ - only, "
                      f"starting with a letter or digit (no path separator), at most 200 characters")
    return name


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically, on any exception
    (KeyboardInterrupt too) it is removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # keep the suffix: writers such as matplotlib and pandas pick the format from it
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}-{next(_counter)}{path.suffix}")
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"nothing was written to the temporary file for {path}")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", encoding=encoding) as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return path


def write_json_atomic(path: str | os.PathLike, obj: Any, **dumps_kwargs: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, **dumps_kwargs))


def ensure_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` if needed and check a file can be written in it, else raise
    :class:`OutputsNotWritable` (one line, naming the folder)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-", delete=True):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise OutputsNotWritable(
            f"outputs folder {folder} is not writable ({reason}); make it writable or point "
            "LITSEG_OUTPUTS_DIR at a writable folder") from None
    return folder
