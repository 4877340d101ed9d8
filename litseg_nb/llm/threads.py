"""How many CPU threads torch may use: ``$LITSEG_TORCH_THREADS``, or side by side the budget file the runner
keeps in ``$LITSEG_TORCH_THREADS_FILE`` (cores / notebooks running), followed before each batch.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..config import ConfigError

THREADS_ENV = "LITSEG_TORCH_THREADS"
THREADS_FILE_ENV = "LITSEG_TORCH_THREADS_FILE"


def _parse(value: str, where: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{where}: torch threads must be a whole number >= 1, got {value.strip()!r}")
    return n


def thread_budget() -> int | None:
    """The budget file's number while it exists, else ``$LITSEG_TORCH_THREADS``, else None."""
    path = os.environ.get(THREADS_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as exc:  # a folder, unreadable, not text: say which file
            raise ConfigError(f"{path} (${THREADS_FILE_ENV}): unreadable torch-thread budget ({exc})") from None
        if text is not None:
            return _parse(text, path)
    value = os.environ.get(THREADS_ENV)
    return _parse(value, f"${THREADS_ENV}") if value else None


def follow_thread_budget() -> int | None:
    """Set torch's intra-op threads to :func:`thread_budget`; returns it. Call it in the thread doing the work."""
    n = thread_budget()
    if n is None:
        return None
    try:
        import torch  # deferred: the core install has no torch
    except ImportError:
        return n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
