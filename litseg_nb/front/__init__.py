"""Front: what users and the notebooks call, on top of the library.

:mod:`.batch_segment` (``python -m litseg_nb segment``), :mod:`.runner` and :mod:`.execution` (running
the notebooks with papermill), :mod:`.params` (notebook parameters to stage configs), :mod:`.run_context`
(a notebook's run: label, tables, figures, manifest), :mod:`.takeaways`, :mod:`.walkthrough` (the worked
examples of notebooks 01, 02 and 05), :mod:`.gallery` and :mod:`.rehearse`.
"""
