"""litseg_nb — reproducing LitSeg (narrative-aware segmentation for literary RAG) and its baselines.

The notebooks in ``notebooks/`` are thin; every piece of logic lives in this package, one module
per concern. See README.md for the profiles (``test``, ``smoke``, ``full``) and the runner.
"""
__version__ = "0.1.0"
