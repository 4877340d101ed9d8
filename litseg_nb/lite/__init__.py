"""LitSeg-Lite (paper section 3.2): a single-pass student distilled from LitSeg annotations."""
