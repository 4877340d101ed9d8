"""``python -m litseg_nb run --profile smoke`` — see :mod:`litseg_nb.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
