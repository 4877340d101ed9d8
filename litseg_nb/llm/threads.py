"""How many CPU threads torch may use, and following that number while a notebook runs.

``$LITSEG_TORCH_THREADS`` (a whole number >= 1) fixes torch's intra-op threads for the process. When
``python -m litseg_nb run`` runs notebooks side by side (:mod:`litseg_nb.front.schedule`) it also sets
``$LITSEG_TORCH_THREADS_FILE``: a file holding the budget of each running notebook (cores / notebooks
running), rewritten atomically whenever a notebook starts or ends. The package's torch work (the ``hf``
backend's batches, the embedder's batches) calls :func:`follow_thread_budget` before each batch, so a
notebook started beside another with 1 thread takes both cores once it runs alone (issue #35: notebook
06 ran 477 s on one thread after 07 ended, 304 s alone with two).

The count can change how a matrix product's sums are split, so logits may differ in the last bits
between 1 and 2 threads; greedy replies change only where two tokens tie that closely. Smoke's tables
from a side-by-side run are compared with a one-after-another run's in the README (issue #35).

Example::

    $ printf 2 > /tmp/budget; LITSEG_TORCH_THREADS_FILE=/tmp/budget python -c \\
        "from litseg_nb.llm.threads import follow_thread_budget as f; import torch; f(); print(torch.get_num_threads())"
    2
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
    """The budget now: the file's number when ``$LITSEG_TORCH_THREADS_FILE`` names one that exists,
    else ``$LITSEG_TORCH_THREADS``, else None (torch's default). A file that was removed (the run that
    wrote it has ended) falls back to the variable; a file or variable that holds anything but a
    whole number >= 1 is a :class:`ConfigError` naming it."""
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
    """Set torch's intra-op threads to :func:`thread_budget` when it differs; returns the budget.

    Call it in the thread that does the work (with OpenMP the setting belongs to the calling thread)."""
    n = thread_budget()
    if n is None:
        return None
    try:
        import torch  # deferred: the core install has no torch; a budget is only followed where torch runs
    except ImportError:  # no torch in this environment: no torch work whose threads could be set
        return n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
