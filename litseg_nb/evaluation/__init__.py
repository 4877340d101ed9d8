"""The benchmarks over chunk sets: gold boundaries, segment quality, human evaluation, ablations, efficiency."""
