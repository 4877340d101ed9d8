"""litseg_nb — reproducing LitSeg (narrative-aware segmentation for literary RAG) and its baselines.

The notebooks in ``notebooks/`` are thin; every piece of logic lives in this package, one module
per concern. See README.md for the profiles (``test``, ``smoke``, ``full``) and the runner.

Use any segmenter on your own book::

    import litseg_nb
    chunks = litseg_nb.segment("my_book.txt", method="litseg", profile="smoke")

(:func:`litseg_nb.api.segment`; ``python -m litseg_nb segment my_book.txt`` on the command line).
"""
from .core import schema  # noqa: F401  (Chunk, Book: the types segment returns)
from .api import load_text, segment

from ._version import __version__

import warnings as _warnings  # noqa: E402

# transformers 5.x deprecates reading `model.is_gradient_checkpointing`; trl and peft still read it
# internally on every training and generation step (our code does not). Third-party noise, hidden
# by its exact message only.
_warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
__all__ = ["load_text", "segment", "__version__"]
