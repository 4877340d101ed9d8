"""Every command's ``--help`` reads as terminal text: the docstrings it shows carry no reST markup."""
from __future__ import annotations

import re

import pytest

from litseg_nb.cli import build_parser

REST = re.compile(r"``|:(?:func|class|mod|meth|data|attr):`|\*\*|::$", re.M)


def commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(sub.choices)


@pytest.mark.parametrize("command", commands())
def test_help_shows_no_rest_markup(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    out = capsys.readouterr().out
    assert not REST.findall(out), (command, REST.findall(out)[:5])
