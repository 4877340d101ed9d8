"""Every segmentation method behind one contract (:mod:`.registry`) and notebook 04's cached runs."""
from .registry import (METHOD_NAMES, REGISTRY, SEGMENTERS, Method, Models, Segmentation, chunk_units, get_method,
                       segment_units)
from .book_runs import BookRun, RunReport, run_chunker, run_library_presets, run_methods

__all__ = ["BookRun", "METHOD_NAMES", "Method", "Models", "REGISTRY", "RunReport", "SEGMENTERS", "Segmentation",
           "chunk_units", "get_method", "run_chunker", "run_library_presets", "run_methods", "segment_units"]
