"""``python -m litseg_nb rehearse``: the ``full`` profile's code paths on a CPU, with tiny models.

(Filled in below.)
"""
from __future__ import annotations

import sys
from typing import Any


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("rehearse", help="run notebooks 01-08 with the full profile's engines and tiny local models "
                                        "on the CPU (the step before renting a GPU)")
    p.set_defaults(handler=main)


def main(args: Any) -> int:  # pragma: no cover - replaced below
    print("[litseg_nb] rehearse: not implemented yet", file=sys.stderr)
    return 2
