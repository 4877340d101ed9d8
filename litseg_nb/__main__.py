"""``python -m litseg_nb run --profile smoke`` — see :mod:`litseg_nb.runner`."""
import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
