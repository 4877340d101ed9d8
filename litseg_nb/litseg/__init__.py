"""LitSeg: narrative-theory-guided segmentation (paper section 3.1, prompts of Appendix E.1)."""
