"""Configuration of the LitSeg annotation stage (notebook 02)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import ConfigError, StageConfig, at_least


@dataclass(frozen=True)
class LitSegConfig(StageConfig):
    """LitSeg pipeline settings.

    Constrained decoding is switched with the shared ``llm.structured_output`` (off by default, as
    in the paper); notebook 02 additionally runs the same units with it on when
    ``compare_structured`` is set.
    """

    # retry / fallback (section 3.1.2): invalid outputs are retried up to N times
    max_retries: int = at_least(3, 0)
    retry_temperature: float = 0.7  # retries sample (seed + attempt) so they can differ from a greedy miss
    # per-stage generation caps; 0 = llm.max_new_tokens
    stage1_max_new_tokens: int = 0
    stage2_max_new_tokens: int = 0
    stage3_max_new_tokens: int = 0
    # soft length reference: the paper's prompt says 100; calibration replaces it
    length_reference: int = 100
    calibrate: bool = True
    calibration_quantile: float = 0.9
    calibration_units: int = at_least(4, 1)  # the first K selected units form the calibration subset
    calibration_max_retries: int = -1  # -1 = max_retries
    # which units: corpus.books / corpus.max_units_per_book select first; then these
    units: tuple[str, ...] = ()  # "book_id/unit_id" entries; empty = all selected units
    max_units: int = at_least(0, 0)  # overall cap after selection (0 = none)
    unit_group_size: int = at_least(0, 0)  # units per batched group (stage 1 → 2 → 3 per group); 0 = all at once
    # notebook 02
    compare_structured: bool = True  # also run with constrained decoding on the same units
    compare_units: int = at_least(0, 0)  # units in that comparison (0 = all)
    render_unit: str = ""  # "book_id/unit_id" to render as HTML; "" = the first unit with >1 segment

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        if profile == "test":
            return {
                "corpus": {"datasets": ("gutenqa",), "max_books": 1, "max_units_per_book": 2,
                           "max_unit_words": 300},
                "llm": {"max_new_tokens": 48, "max_model_len": 4096},
                "max_retries": 1,
                "stage1_max_new_tokens": 8,
                "stage2_max_new_tokens": 8,
                "stage3_max_new_tokens": 24,
                "calibration_units": 1,
                "calibration_max_retries": 0,
                "compare_units": 1,
            }
        if profile == "smoke":
            # Sized for ~7 min of notebook 02 on 2 idle cores with SmolLM2-135M: every call is a
            # ~2,650-3,000-token prefill (the system prompt alone is ~1,800 tokens; ~10 s each) and
            # long-context decoding runs at ~4 tok/s, so retries (which double the cost) are off
            # here; they are exercised by the tests and the test profile.
            return {
                # the profile's shared unit size (900 words), units holding GutenQA evidence first,
                # so notebook 05 can score LitSeg's chunks on real questions
                "corpus": {"datasets": ("gutenqa",), "max_books": 1, "max_units_per_book": 3,
                           "unit_selection": "questions"},
                "max_retries": 0,
                "stage1_max_new_tokens": 48,
                "stage2_max_new_tokens": 48,
                "stage3_max_new_tokens": 192,
                "calibration_units": 1,
                "calibration_max_retries": 0,
                "compare_units": 1,
            }
        if profile == "full":
            return {"max_retries": 3, "calibration_units": 50, "compare_units": 50, "unit_group_size": 512}
        raise ConfigError(f"unknown profile {profile!r}")

    def stage_max_new_tokens(self, stage: str) -> int:
        value = {"stage1": self.stage1_max_new_tokens, "stage2": self.stage2_max_new_tokens,
                 "stage3": self.stage3_max_new_tokens}[stage]
        return value or self.llm.max_new_tokens

    def describe(self) -> str:
        base = super().describe()
        so = "on" if self.llm.structured_output else "off"
        return f"{base} | LitSeg retries={self.max_retries} structured={so}"
