"""litseg_nb — reproducing LitSeg (narrative-aware segmentation for literary RAG) and its baselines.

Any segmenter on your own book: ``litseg_nb.segment("my_book.txt", method="litseg", profile="smoke")``.
"""
import warnings as _warnings

from .api import load_text, segment
from ._version import __version__

# third-party noise (trl and peft read a deprecated transformers attribute every step), by its exact message
_warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
__all__ = ["load_text", "segment", "__version__"]
