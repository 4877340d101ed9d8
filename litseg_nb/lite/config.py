"""Configuration of LitSeg-Lite distillation (notebook 03): data, LoRA, SFT, GRPO, reward, inference.

The paper's training tables (Appendix I.3.2, Tables 16-19) are empty in our text, so the ``full`` values are
usual LoRA/DAPO values for a 7-8B student (a tiny KL 0.001 shows drift from the SFT policy)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import PROFILES, LLMConfig, StageConfig, at_least, between, one_of
from ..litseg.config import LitSegConfig

ABLATION_VARIANTS = ("lite", "wo-grpo", "wo-ft", "wo-theo-s1", "wo-theo-s2", "wo-theo-s3", "wo-theory")


@dataclass(frozen=True)
class LiteConfig(StageConfig):
    """LitSeg-Lite: a single-pass student distilled from LitSeg annotations (LoRA SFT, then GRPO)."""

    # ---- training data (from notebook 02's annotations artifact)
    annotations_profile: str = one_of("", "", *PROFILES)  # whose annotations to train on; "" = this profile's
    max_train_units: int = 0  # 0 = all
    max_eval_units: int = 0  # units of the before/after evaluation (0 = all evaluation units)
    max_seq_tokens: int = 16384  # prompt + target; longer examples are dropped and counted
    # "exclude" = the paper; "include_if_needed" (CPU demos): top up to min_train_units with fallback units
    fallback_units: str = one_of("exclude", "exclude", "include_if_needed")
    min_train_units: int = 0

    # ---- LoRA
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

    gradient_checkpointing: bool = True  # saves GPU memory on long sequences; off for tiny CPU runs

    # ---- stage 1: SFT (trl SFTTrainer, prompt/completion, loss on the completion only)
    sft_learning_rate: float = 1e-4
    sft_epochs: float = 3.0
    sft_max_steps: int = -1  # > 0 overrides epochs
    sft_batch_size: int = 1
    sft_grad_accum: int = 16
    sft_warmup_ratio: float = 0.03
    sft_lr_scheduler: str = "cosine"

    # ---- stage 2: GRPO with the DAPO loss (trl GRPOTrainer)
    grpo_learning_rate: float = 1e-6
    grpo_max_steps: int = 200
    grpo_num_generations: int = 8
    grpo_prompts_per_step: int = 2  # prompts per optimizer step (each with num_generations rollouts)
    # rollout cap in tokens; 0 = sized from the teacher's replies (train.rollout_cap), so a complete reply fits
    grpo_max_completion_length: int = at_least(0, 0)
    grpo_cap_quantile: float = between(1.0, 0.5, 1.0)  # 1.0 = the longest teacher reply
    grpo_cap_margin: float = at_least(0.1, 0.0)  # headroom over that length (a sampled reply may be longer)
    # a GRPO run that trained on nothing is an error (GRPONoSignalError); True only for CPU demos, labelled
    grpo_allow_no_signal: bool = False
    # rollouts by trl's colocated vLLM engine instead of generate; off in every profile (weight sync unverified)
    grpo_use_vllm: bool = False
    grpo_vllm_gpu_memory_utilization: float = between(0.3, 0.05, 0.95)
    grpo_temperature: float = 1.0
    grpo_beta: float = 0.001  # KL coefficient (DAPO uses 0; see module docstring)
    grpo_epsilon: float = 0.2
    grpo_epsilon_high: float = 0.28  # DAPO clip-higher
    grpo_loss_type: str = "dapo"
    grpo_mask_truncated_completions: bool = True  # DAPO overlong filtering
    grpo_filter_zero_std_groups: bool = True  # DAPO dynamic sampling, filter-only (no refill)
    # DAPO's soft overlong punishment over the last N tokens below the cap (weight 1); 0 = off
    grpo_soft_overlong_cache: int = 0

    # ---- reward
    format_reward_weight: float = 0.5
    judge_reward_weight: float = 0.5
    judge_llm: LLMConfig = field(default_factory=lambda: LLMConfig(
        backend="openai", model="Qwen/Qwen3-32B", max_new_tokens=1024, temperature=0.0))
    judge_retries: int = 2  # bounded retries of a malformed judge reply, then the neutral score

    # ---- inference (the Lite segmenter)
    infer_max_new_tokens: int = 4096
    infer_retries: int = 3  # same N as LitSeg (max_retries=3): invalid output is retried, then the paper's fallback
    eval_with_judge: bool = True  # score before/after/teacher replies with the judge too
    ablation_max_units: int = at_least(0, 0)  # notebook 07: LitSeg-annotated units per variant (0 = all)
    # notebook 07: which variants; empty = all seven
    ablation_variants: tuple[str, ...] = one_of((), *ABLATION_VARIANTS)
    examples_to_show: int = 2

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any):
        # Lite is evaluated on LitSeg's units: its corpus is LitSeg's (unless overridden)
        lit = LitSegConfig.for_profile(profile).corpus.to_dict()
        over = overrides.pop("corpus", None) or {}
        corpus = {**lit, **(over.to_dict() if hasattr(over, "to_dict") else dict(over))}
        return super().for_profile(profile, corpus=corpus, **overrides)

    @property
    def reward_weights(self) -> tuple[float, float]:
        return (self.format_reward_weight, self.judge_reward_weight)

    def teacher(self):
        return LitSegConfig.for_profile(self.annotations_profile or self.profile)

    def describe(self) -> str:
        t = self.teacher()
        return (super().describe().replace(" | LLM=", " | student LLM=").replace(" | data=", " | evaluation units=")
                + f" | teacher LLM={t.llm.model} ({t.llm.backend}) | training units=LitSeg annotations of "
                f"{t.train_data()} ({t.profile}) | judge={self.judge_llm.model} ({self.judge_llm.backend})"
                f" | Lite structured={'on' if self.llm.structured_output else 'off'}"
                f" (E.2 schema; the E.4 ablation variants unconstrained)")
