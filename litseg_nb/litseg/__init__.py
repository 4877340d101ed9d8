"""LitSeg: narrative-theory-guided segmentation (paper section 3.1, prompts of Appendix E.1).

:mod:`.prompting` builds the stage prompts, :mod:`.validate` checks replies and applies the fallbacks,
:mod:`.pipeline` runs the three stages, :mod:`.segmenter` is the registered method with its length
calibration, :mod:`.rubric_judge` is the Appendix E.3 judge.
"""
from .config import LitSegConfig
from .validate import (FinalSegmentation, Segment, ValidationResult, finalize_segments, parse_json_reply,
                       repair_coverage, validate_segments, validate_stage1, validate_stage2)

__all__ = ["FinalSegmentation", "LitSegConfig", "Segment", "ValidationResult", "finalize_segments",
           "parse_json_reply", "repair_coverage", "validate_segments", "validate_stage1", "validate_stage2"]
