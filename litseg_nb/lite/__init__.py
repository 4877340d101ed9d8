"""LitSeg-Lite (paper section 3.2): a single-pass student distilled from LitSeg annotations.

* :mod:`.config` – :class:`~.config.LiteConfig` (data, LoRA, SFT, GRPO/DAPO, reward, inference).
* :mod:`.data` – annotations → single-pass (Appendix E.2) targets, fallback exclusion, split by book.
* :mod:`.rewards` – rule-based format reward (table of rules) and the E.3 narratological reward.
* :mod:`.train` – LoRA SFT (trl ``SFTTrainer``) and GRPO with the DAPO loss (trl ``GRPOTrainer``),
  adapters saved with their config, merging for inference.
* :mod:`.segmenter` – the one-call Lite chunker with LitSeg's validation, fallback, reconstruction.
* :mod:`.evaluate` – notebook 03's before/after tables, teacher rows and curves.
"""
