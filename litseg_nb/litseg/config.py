"""Configuration of the LitSeg annotation stage (notebook 02)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import ConfigError, CorpusConfig, StageConfig, at_least

# The teacher (LitSeg, this config's ``llm``) and the student (LitSeg-Lite, ``LiteConfig.llm``) are
# separate settings. The paper distils a large teacher into a compact student and names neither in
# the text we have (its Tables 14-15 are empty); in ``full`` we use Qwen3-32B as the teacher (the
# largest dense Qwen3; fits one 80 GB GPU in bf16) and Qwen3-8B as the student, which is also the
# model of the LLM baselines (§4.4: "LitSeg-Lite and LumberChunker using the same inference
# configuration"). The CPU profiles use one small model for both (labelled: teacher = student).
FULL_TEACHER_MODEL = "Qwen/Qwen3-32B"


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
    calibration_units: int = at_least(4, 1)  # K selected units, stratified by dataset and seeded (calibrate.calibration_subset)
    calibration_max_retries: int = -1  # -1 = max_retries
    # which units: the shared ``selection`` (litseg_nb.selection.select_units), as every LLM method
    unit_group_size: int = at_least(0, 0)  # units per batched group (stage 1 → 2 → 3 per group); 0 = all at once
    # notebook 02
    compare_structured: bool = True  # also run with constrained decoding on the same units
    compare_units: int = at_least(0, 0)  # units in that comparison (0 = all)
    render_unit: str = ""  # "book_id/unit_id" to render as HTML; "" = the first unit with >1 segment
    # LitSeg-Lite's training units, annotated by this (teacher) stage into
    # artifacts/litseg/train_annotations.jsonl. The paper trains on "LitSeg annotations of the
    # LiteraryQA training set" (full: literaryqa_split="train"); only validation texts exist locally,
    # so test/smoke train on another BOOK (Gutenberg 46), a book-level split from the evaluated units.
    train_corpus: CorpusConfig = field(default_factory=lambda: CorpusConfig(
        datasets=("literaryqa",), literaryqa_split="train", max_unit_words=6000))
    max_train_units: int = at_least(0, 0)  # cap on annotated training units (0 = all of train_corpus)

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
                "train_corpus": {"datasets": ("gutenberg",), "books": ("46",), "max_books": 1,
                                 "max_units_per_book": 2, "max_unit_words": 300},
            }
        if profile == "smoke":
            # Every call is a ~2,650-3,000-token prefill with SmolLM2-135M on 2 CPU cores (the system
            # prompt alone is ~1,800 tokens; ~10 s each) and long-context decoding runs at ~4 tok/s,
            # so retries (which double the cost) are off here; they are exercised by the tests and
            # the test profile. The units are the shared selection (8 Emma units, 147 sentences).
            return {
                "corpus": {"datasets": ("gutenqa",), "max_books": 1},
                "max_retries": 0,
                "stage1_max_new_tokens": 48,
                "stage2_max_new_tokens": 48,
                "stage3_max_new_tokens": 192,
                "calibration_units": 1,
                "calibration_max_retries": 0,
                "compare_units": 1,
                # Lite's training data: 2 units of another book (~3 min of annotation on the CPU)
                "train_corpus": {"datasets": ("gutenberg",), "books": ("46",), "max_books": 1,
                                 "max_units_per_book": 2, "max_unit_words": 600},
            }
        if profile == "full":
            return {"llm": {"model": FULL_TEACHER_MODEL},
                    "max_retries": 3, "calibration_units": 50, "compare_units": 50, "unit_group_size": 512,
                    "train_corpus": {"datasets": ("literaryqa",), "literaryqa_split": "train",
                                     "max_unit_words": 6000}}
        raise ConfigError(f"unknown profile {profile!r}")

    def stage_max_new_tokens(self, stage: str) -> int:
        value = {"stage1": self.stage1_max_new_tokens, "stage2": self.stage2_max_new_tokens,
                 "stage3": self.stage3_max_new_tokens}[stage]
        return value or self.llm.max_new_tokens

    def student_model(self) -> str:
        """The LitSeg-Lite student of this profile (notebook 03's ``LiteConfig.llm.model``), for labels."""
        from ..lite.config import LiteConfig

        return LiteConfig.for_profile(self.profile).llm.model

    def train_data(self) -> str:
        """One line naming Lite's training units (dataset, split, books)."""
        out = self.train_corpus.summary(training=True)
        if self.max_train_units:
            out += f" max_units={self.max_train_units}"
        return out

    def describe(self) -> str:
        base = super().describe().replace(" | LLM=", " | teacher LLM=")
        so = "on" if self.llm.structured_output else "off"
        return (f"{base} | student (Lite)={self.student_model()} | Lite training units={self.train_data()}"
                f" | LitSeg retries={self.max_retries} structured={so}")
