"""Configuration of LitSeg-Lite distillation (notebook 03): data, LoRA, SFT, GRPO, reward, inference.

The paper's training tables (Appendix I.3.2, Tables 16-19) are empty in the text we have, so the
``full`` defaults below are our own choices, picked to be defensible for a Qwen3-8B-class student
on one GPU:

* LoRA r=16, alpha=32, dropout 0.05 on every attention and MLP projection (the common QLoRA/LoRA
  recipe for task adaptation of 7-8B models);
* SFT: lr 1e-4 (cosine, 3 % warm-up), 3 epochs, effective batch 16, sequences up to 16k tokens
  (system prompt ~2.1k tokens + a 6000-word unit + the target);
* GRPO with the DAPO loss: lr 1e-6, 8 rollouts per prompt, clip range [0.2, 0.28] (DAPO's
  "clip-higher"), overlong completions masked (DAPO), temperature 1.0, KL coefficient 0.001 (DAPO
  drops the KL term; we keep a tiny one so that drift from the SFT policy is measured and shown);
* reward = 0.5 x rule-based format reward + 0.5 x narratological (E.3 rubric) reward.

``smoke`` and ``test`` shrink everything to CPU size. Every value can be overridden from the
notebook's parameters (``lite={...}`` style overrides go through :meth:`StageConfig.for_profile`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import PROFILES, LLMConfig, StageConfig, at_least, between, one_of

ABLATION_VARIANTS = ("lite", "wo-grpo", "wo-ft", "wo-theo-s1", "wo-theo-s2", "wo-theo-s3", "wo-theory")
_ATTN_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LiteConfig(StageConfig):
    """LitSeg-Lite: a single-pass student distilled from LitSeg annotations (LoRA SFT, then GRPO)."""

    # ---- training data (from notebook 02's annotations artifact)
    annotations_profile: str = one_of("", "", *PROFILES)  # whose annotations to train on; "" = this profile's
    # Training units = notebook 02's train_annotations.jsonl (LitSegConfig.train_corpus: the LiteraryQA
    # train split in full; another book in test/smoke). Evaluation units = notebook 02's annotations.jsonl
    # (LitSeg's evaluated units, with the teacher's segmentation). The two never share a unit: enforced
    # by litseg_nb.lite.heldout (a trained student refuses its training units), whatever the profile.
    # ``corpus`` is set to LitSeg's evaluation corpus (for labels and the held-out evaluation).
    max_train_units: int = 0  # 0 = all
    max_eval_units: int = 0  # units of the before/after evaluation (0 = all evaluation units)
    max_seq_tokens: int = 16384  # prompt + target; longer examples are dropped and counted
    # "exclude" = the paper (units that needed a LitSeg fallback are not trained on);
    # "include_if_needed" = CPU demos with a tiny teacher: top up to min_train_units with them, labelled
    fallback_units: str = one_of("exclude", "exclude", "include_if_needed")
    min_train_units: int = 0

    # ---- LoRA
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] = _ATTN_MLP

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
    # rollout cap in tokens; 0 = sized from the teacher's replies on the training units
    # (lite.train.rollout_cap: the grpo_cap_quantile of their token lengths, plus grpo_cap_margin), so a
    # complete reply fits and truncated (masked) rollouts are the exception (notebook 03 reports the share)
    grpo_max_completion_length: int = at_least(0, 0)
    grpo_cap_quantile: float = between(1.0, 0.5, 1.0)  # 1.0 = the longest teacher reply
    grpo_cap_margin: float = at_least(0.1, 0.0)  # headroom over that length (a sampled reply may be longer)
    # a GRPO run whose every step trained on nothing (all rollouts masked or all groups filtered) is an
    # error (GRPONoSignalError); True only where that is the expected outcome (CPU demos), and labelled
    grpo_allow_no_signal: bool = False
    grpo_temperature: float = 1.0
    grpo_beta: float = 0.001  # KL coefficient (DAPO uses 0; see module docstring)
    grpo_epsilon: float = 0.2
    grpo_epsilon_high: float = 0.28  # DAPO clip-higher
    grpo_loss_type: str = "dapo"
    grpo_mask_truncated_completions: bool = True  # DAPO overlong filtering
    grpo_filter_zero_std_groups: bool = True  # DAPO dynamic sampling, filter-only (no refill)
    # DAPO's soft overlong punishment (trl.rewards.get_soft_overlong_punishment, weight 1): length penalty
    # over the last N tokens below grpo_max_completion_length; 0 = off (default: the cap is sized to hold a
    # complete reply and truncated rollouts are masked, DAPO's overlong filtering)
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
    # notebook 07: which variants (keys of litseg_nb.ablation.VARIANTS); empty = all seven
    ablation_variants: tuple[str, ...] = one_of((), *ABLATION_VARIANTS)
    examples_to_show: int = 2

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        if profile == "test":
            return {
                # the E.2 prompt alone is ~2.1k tokens: the shared test context of 2048 is too short
                "llm": {"max_model_len": 8192},
                "fallback_units": "include_if_needed", "min_train_units": 2,
                "max_train_units": 4, "max_eval_units": 2, "max_seq_tokens": 4096,
                "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "gradient_checkpointing": False,
                "sft_learning_rate": 5e-3, "sft_max_steps": 2, "sft_grad_accum": 1, "sft_warmup_ratio": 0.0,
                "sft_lr_scheduler": "constant",
                "grpo_learning_rate": 5e-3, "grpo_max_steps": 1, "grpo_num_generations": 2, "grpo_beta": 0.0,
                "grpo_prompts_per_step": 1, "grpo_max_completion_length": 24, "grpo_temperature": 1.0,
                # a random model never stops within the cap: masking truncated rollouts would mask all
                "grpo_mask_truncated_completions": False,
                # ... and its rollouts all get the same reward: every group is filtered (a no-op step)
                "grpo_allow_no_signal": True,
                "judge_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                              "max_model_len": 8192},
                "judge_retries": 1, "infer_max_new_tokens": 16, "infer_retries": 1,
            }
        if profile == "smoke":
            # Sized from measurements on the 2-core CPU: with the verbatim E.2 prompt (~2.1k tokens) a
            # SmolLM2-135M example is ~3.3k tokens; one SFT step on it took ~98 s and generating 96
            # tokens ~31 s. So: 2 SFT steps, 1 GRPO step, 1 held-out unit, short generations.
            return {
                "fallback_units": "include_if_needed", "min_train_units": 2,
                "max_train_units": 2, "max_eval_units": 1, "max_seq_tokens": 6144,
                "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "gradient_checkpointing": False,
                "sft_learning_rate": 2e-4, "sft_max_steps": 2, "sft_grad_accum": 1,
                "sft_warmup_ratio": 0.0, "sft_lr_scheduler": "constant",
                "grpo_learning_rate": 2e-5, "grpo_max_steps": 1, "grpo_num_generations": 2,
                "grpo_prompts_per_step": 1, "grpo_max_completion_length": 64, "grpo_temperature": 1.0,
                # targets are longer than the CPU-sized cap: masking truncated rollouts would mask all
                "grpo_mask_truncated_completions": False,
                # 2 rollouts of a 135M model cut at 64 tokens often score alike: the step may be a no-op
                "grpo_allow_no_signal": True,
                "judge_llm": {"backend": "hf", "model": "smollm2-135m-instruct", "max_new_tokens": 64,
                              "max_model_len": 8192},
                # retries off on the CPU (each costs a ~3k-token prefill); full uses 3 like LitSeg
                "judge_retries": 1, "infer_max_new_tokens": 192, "infer_retries": 0,
                "ablation_max_units": 1,  # 7 variants x ~1 min per unit on the CPU
                # a judge call is a ~5.5k-token prompt (~1 min on the CPU): GRPO keeps the judge, the
                # before/after tables report the format reward only (labelled)
                "eval_with_judge": False,
            }
        if profile == "full":
            return {"llm": {"model": "Qwen/Qwen3-8B"}}
        raise ValueError(f"unknown profile {profile!r}")

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any):
        from ..litseg.config import LitSegConfig

        # Lite is evaluated on LitSeg's units: its corpus is LitSeg's (unless overridden)
        lit = LitSegConfig.for_profile(profile).corpus.to_dict()
        over = overrides.pop("corpus", None) or {}
        corpus = {**lit, **(over.to_dict() if hasattr(over, "to_dict") else dict(over))}
        return super().for_profile(profile, corpus=corpus, **overrides)

    @property
    def reward_weights(self) -> tuple[float, float]:
        return (self.format_reward_weight, self.judge_reward_weight)

    def teacher(self):
        """The LitSeg (teacher) config whose annotations this student learns from."""
        from ..litseg.config import LitSegConfig

        return LitSegConfig.for_profile(self.annotations_profile or self.profile)

    def describe(self) -> str:  # noqa: D401 - names student, teacher, training and evaluation data
        t = self.teacher()
        return (super().describe().replace(" | LLM=", " | student LLM=").replace(" | data=", " | evaluation units=")
                + f" | teacher LLM={t.llm.model} ({t.llm.backend}) | training units=LitSeg annotations of "
                f"{t.train_data()} ({t.profile}) | judge={self.judge_llm.model} ({self.judge_llm.backend})")
