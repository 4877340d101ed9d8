"""LitSeg: narrative-theory-guided segmentation (paper section 3.1, prompts of Appendix E.1).

:mod:`.prompting` builds the stage prompts, :mod:`.validate` checks replies and applies the fallbacks,
:mod:`.pipeline` runs the three stages, :mod:`.segmenter` is the registered method with its length
calibration, :mod:`.rubric_judge` is the Appendix E.3 judge.
"""
