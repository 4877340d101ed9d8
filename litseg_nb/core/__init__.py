"""Ground: paths, safe writes, the records (books, units, chunks with exact spans), span alignment, content caches, artifacts, figures, prompt templates."""
