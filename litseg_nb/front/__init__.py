"""Front: what users and the notebooks call, on top of the library: batch segmenting (``segment``), the
notebook runner and its parameters, a notebook's run context, the walk-throughs, the gallery, the rehearsal.
"""
