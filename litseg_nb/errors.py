"""The package's error base: the command line prints a :class:`LitsegError` as one line, exit ``exit_code``."""
from __future__ import annotations


class LitsegError(Exception):
    """Base of every error the package raises on purpose; the message is what the user reads."""

    exit_code = 1  # the command line's exit status


class UsageError(LitsegError):
    """Bad input from the user: an option, a configuration value, an input file or data folder."""

    exit_code = 2
