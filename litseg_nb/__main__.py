"""``python -m litseg_nb run --profile smoke`` — see :mod:`litseg_nb.cli`."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
