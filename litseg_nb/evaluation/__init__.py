"""The benchmarks over chunk sets (above the chunkers, the segmenters and the corpus):
:mod:`~litseg_nb.evaluation.boundaries` (gold-boundary P/R/F1, Pk, WindowDiff) and
:mod:`~litseg_nb.evaluation.segment_quality` (notebook 06: boundary similarity, the E.3 rubric judge).
The measures they use sit below, in :mod:`litseg_nb.metrics`."""
