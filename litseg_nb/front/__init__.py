"""Front: batch segmenting, the notebook runner, the notebooks' parameters and run context, takeaways, the walkthrough, the gallery and the rehearsal."""
