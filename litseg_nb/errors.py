"""The package's error base: every domain error derives from :class:`LitsegError`.

This module imports nothing from the package, so any module can import it. Each domain error keeps
its second, built-in base (``ValueError``, ``RuntimeError``, ``FileNotFoundError`` ...), so an
``except ValueError`` written against it still works; ``except LitsegError`` catches them all.

The command line (:func:`litseg_nb.cli.main`) turns a :class:`LitsegError` that reaches it into one
line on stderr (``[litseg_nb] <command>: <message>``, no traceback) and exits with the error's
:attr:`~LitsegError.exit_code`: 2 for a :class:`UsageError` (an option, a configuration, an input
file or data folder the user gives), 1 for any other domain error (a model server, a failed
notebook, a check the run did not pass). Anything else (a bug) keeps its traceback.

Code decides on an error by its class or attributes, never by its message's text.
"""
from __future__ import annotations


class LitsegError(Exception):
    """Base of every error the package raises on purpose; the message is what the user reads."""

    #: the command line's exit status for this error
    exit_code = 1


class UsageError(LitsegError):
    """Bad input from the user: an option, a configuration value, an input file or data folder."""

    exit_code = 2
