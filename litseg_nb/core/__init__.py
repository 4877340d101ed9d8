"""Ground: what every other layer stands on.

:mod:`.paths` (folders resolved from the package, never the cwd), :mod:`.safe_io` (atomic writes),
:mod:`.schema` (books, units, sentences and chunks with exact spans), :mod:`.chunk_align` (character
offsets, aligning chunk text to its source), :mod:`.cache` (content-keyed step cache), :mod:`.artifacts`
(tables, figures and artifacts of a run), :mod:`.prompts` (the prompt templates).
"""
