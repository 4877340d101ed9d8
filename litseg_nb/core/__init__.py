"""Ground: what every other layer stands on (paths, atomic writes, the data schema, chunk alignment, the
content-keyed cache, run artifacts and figures, prompt templates).
"""
