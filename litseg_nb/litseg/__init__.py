"""LitSeg: narrative-theory-guided segmentation (paper section 3.1, prompts of Appendix E.1).

* :mod:`.validate` – THE shared validator (JSON extraction, stage schemas, semantic checks,
  left-adjacent coverage repair, the full fallback chain); LitSeg-Lite uses it too.
* :mod:`.prompting` – conversations from the verbatim templates; soft length reference.
* :mod:`.pipeline` – batched three-stage annotation with retries, fallbacks and resumable
  annotations (``annotate_units``, ``records_to_chunks``, ``read_annotations``).
* :mod:`.reconstruct` – segments → :class:`~litseg_nb.core.schema.Chunk` (subtitle, context, spans).
* :mod:`.calibrate` – dataset-calibrated length reference.
* :mod:`.segmenter` – LitSeg as a registered method: :class:`~.segmenter.LitSegOptions`, the one length
  calibration of a segmentation (``prepare``), typed per-unit results.
* :mod:`.report` – notebook 02's tables, figure and HTML rendering.
* :mod:`.rubric_judge` – the Appendix E.3 rubric judge (notebook 06's judge, LitSeg-Lite's reward).
* :mod:`.config` – :class:`LitSegConfig`.
"""
from .config import LitSegConfig
from .validate import (FinalSegmentation, Segment, ValidationResult, finalize_segments, parse_json_reply,
                       repair_coverage, validate_segments, validate_stage1, validate_stage2)

__all__ = ["FinalSegmentation", "LitSegConfig", "Segment", "ValidationResult", "finalize_segments",
           "parse_json_reply", "repair_coverage", "validate_segments", "validate_stage1", "validate_stage2"]
