"""The package's error base: every domain error derives from :class:`LitsegError` and keeps a built-in
base (``ValueError``, ``RuntimeError``, ...). The command line prints one as one line and exits with its
:attr:`~LitsegError.exit_code` (2 for a :class:`UsageError`); anything else keeps its traceback.
"""
from __future__ import annotations


class LitsegError(Exception):
    """Base of every error the package raises on purpose; the message is what the user reads."""

    exit_code = 1  # the command line's exit status


class UsageError(LitsegError):
    """Bad input from the user: an option, a configuration value, an input file or data folder."""

    exit_code = 2
