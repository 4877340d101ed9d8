"""LitSeg-Lite (paper section 3.2): a single-pass student distilled from LitSeg annotations.

:mod:`.config` holds its settings, :mod:`.data` the training examples and the held-out record,
:mod:`.train` LoRA SFT, GRPO/DAPO and the rewards, :mod:`.segmenter` the one-call chunker and its evaluation.
"""
