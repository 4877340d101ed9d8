"""LitSeg-Lite training: stage 1 LoRA SFT (trl ``SFTTrainer``), stage 2 GRPO/DAPO (trl ``GRPOTrainer``).

The same functions run on CPU (fp32; ``test``/``smoke``) and CUDA (bf16; ``full`` and
``scripts/gpu_lite_check.py``): the precision follows the model's device.

SFT uses trl's conversational *prompt/completion* format, so the loss covers the completion (the
single-pass JSON) only. After SFT the adapter is saved, then merged into the base weights; GRPO
trains a fresh LoRA adapter on top of that SFT-merged model, so its reference policy (adapter
disabled, used for the KL term) is the SFT policy, not the untuned base.

What trl 1.16 offers for DAPO (checked in its source) and what we use:

* ``loss_type="dapo"`` – token-level loss normalised by the active tokens of the global batch: used.
* ``epsilon`` / ``epsilon_high`` – asymmetric ("clip-higher") clipping: used (0.2 / 0.28 in ``full``).
* ``mask_truncated_completions`` – DAPO's overlong filtering: used.
* **Dynamic sampling** (drop prompt groups whose rollouts all get the same reward and re-sample
  until the batch is full) – *not in trl 1.16*. :class:`DynamicSamplingGRPOTrainer` implements the
  filtering half: zero-variance groups are masked out of the loss (and counted); the batch is not
  re-filled, so a step can have fewer effective groups (or none: then it is a no-op step whose
  forward/backward pass is skipped).
"""
from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import LiteConfig
from .data import LiteExample
from ..errors import LitsegError
from .heldout import TRAINED_UNITS_FILE, save_profile_record, trained_units_of, TrainedUnits, model_record
from ..llm.vllm_backend import live_engines, release_engine
from ..llm.base import LLMError
from ..core.cache import hash_file, hash_obj
from ..llm.models import load_model_and_tokenizer
from ..llm.threads import follow_thread_budget
from ..llm import make_backend
from ..redact import redact_obj


# --------------------------------------------------------------------------- helpers
def make_lora_config(cfg: LiteConfig):
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=list(cfg.lora_target_modules), bias="none", task_type="CAUSAL_LM")


def lora_state(model) -> dict[str, Any]:
    """Detached copies of every LoRA parameter (to show that training changed them)."""
    return {n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if "lora_" in n}


def lora_change(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """L2 norm of the change of all LoRA weights, and how many tensors changed.

    Parameter names are compared after dropping the adapter name (``.default``), so states taken
    from differently wrapped copies of the same adapter compare.
    """
    import torch

    def norm(d):
        return {k.replace(".default", ""): v for k, v in d.items()}

    b, a = norm(before), norm(after)
    common = sorted(set(b) & set(a))
    if not common:
        raise ValueError("no common LoRA parameters to compare")
    diff = [torch.linalg.vector_norm(a[k] - b[k]).item() for k in common]
    return {"l2_change": math.sqrt(sum(d * d for d in diff)), "tensors": len(common),
            "tensors_changed": sum(d > 0 for d in diff)}


def _checkpointing_arg(args_cls: Any = None) -> str:
    """``TrainingArguments``' name for gradient checkpointing: ``activation_checkpointing`` in recent
    transformers (the old name warns), ``gradient_checkpointing`` before it (e.g. transformers 5.19,
    the GPU stack's pin: vLLM 0.32 needs < 5.20; found by the CPU rehearsal)."""
    import dataclasses

    if args_cls is None:
        from transformers import TrainingArguments as args_cls

    names = {f.name for f in dataclasses.fields(args_cls)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def _common_kwargs(model, cfg: LiteConfig) -> dict[str, Any]:
    return {**_precision_kwargs(model), _checkpointing_arg(): cfg.gradient_checkpointing,
            "logging_steps": 1, "save_strategy": "no", "report_to": [], "seed": cfg.seed,
            "data_seed": cfg.seed, "dataloader_num_workers": 0, "disable_tqdm": True}


def _precision_kwargs(model) -> dict[str, Any]:
    dev = next(model.parameters()).device
    if dev.type == "cuda":
        import torch

        bf16 = torch.cuda.is_bf16_supported()
        return {"bf16": bf16, "fp16": not bf16, "use_cpu": False}
    return {"bf16": False, "fp16": False, "use_cpu": True}


def _peak_memory_gib(model) -> float | None:
    import torch

    if next(model.parameters()).device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**30
    return None


@dataclass
class TrainResult:
    """What a training stage produced (adapter folder, per-step log, timing)."""

    stage: str
    adapter_dir: Path
    log: list[dict[str, Any]]  # trainer.state.log_history (one dict per logged step)
    seconds: float
    steps: int
    tokens: int  # tokens processed (SFT: prompt+completion per example pass; GRPO: prompt+completion)
    peak_memory_gib: float | None = None
    lora_change: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    steps_table: Any = None  # GRPO: per-step truncated / masked / filtered counts (step_table)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    def log_frame(self):
        import pandas as pd

        rows = [r for r in self.log if "train_runtime" not in r]
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        return {"stage": self.stage, "steps": self.steps, "seconds": round(self.seconds, 1),
                "tokens": self.tokens, "tokens/s": round(self.tokens_per_s, 1),
                "peak GPU memory (GiB)": None if self.peak_memory_gib is None else round(self.peak_memory_gib, 2),
                "LoRA L2 change": round(self.lora_change.get("l2_change", float("nan")), 6),
                **self.extra}


def save_adapter(model, tokenizer, out_dir: Path, cfg: LiteConfig, stage: str, extra: dict | None = None) -> Path:
    """Save the LoRA adapter (+ tokenizer) and a ``lite_config.json`` describing how it was made."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    meta = redact_obj({"stage": stage, "base_model": cfg.llm.model, "lite_config": cfg.to_dict(), **(extra or {})})
    (out_dir / "lite_config.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    return out_dir


def record_trained_units(adapter_dir: Path, examples: Sequence[LiteExample], cfg: LiteConfig) -> None:
    """The units this adapter learned from, in the adapter folder and the profile's record
    (:mod:`litseg_nb.lite.heldout`: the student is never evaluated on them)."""
    trained = trained_units_of(examples)
    trained.save(Path(adapter_dir) / TRAINED_UNITS_FILE)
    save_profile_record(cfg.profile, trained)


# --------------------------------------------------------------------------- stage 1: SFT
def _follow_thread_budget_callback():
    """A trainer callback that follows the runner's torch-thread budget at every step
    (:mod:`litseg_nb.llm.threads`; a notebook beside another trains on fewer threads)."""
    from transformers import TrainerCallback

    class FollowThreadBudget(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            follow_thread_budget()

    return FollowThreadBudget()


def _train_measured(trainer) -> tuple[Any, float, dict[str, float]]:
    """Run ``trainer.train()``; return the trained PEFT model, seconds and the LoRA weight change."""
    before = lora_state(trainer.model)
    trainer.add_callback(_follow_thread_budget_callback())
    follow_thread_budget()
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    return trainer.model, seconds, lora_change(before, lora_state(trainer.model))


def train_sft(model, tokenizer, train: Sequence[LiteExample], cfg: LiteConfig, out_dir: Path,
              work_dir: Path | None = None):
    """LoRA SFT on the single-pass targets. Returns ``(peft_model, TrainResult)``.

    ``model`` is a plain causal LM (it is wrapped with a fresh LoRA adapter from ``cfg``).
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not train:
        raise ValueError("train_sft: no training examples")
    work_dir = Path(work_dir or Path(out_dir).parent / "sft_work")
    args = SFTConfig(
        output_dir=str(work_dir), per_device_train_batch_size=cfg.sft_batch_size,
        gradient_accumulation_steps=cfg.sft_grad_accum, learning_rate=cfg.sft_learning_rate,
        num_train_epochs=cfg.sft_epochs, max_steps=cfg.sft_max_steps,
        lr_scheduler_type=cfg.sft_lr_scheduler, warmup_steps=cfg.sft_warmup_ratio,
        max_length=cfg.max_seq_tokens, completion_only_loss=True, packing=False,
        **_common_kwargs(model, cfg))
    ds = Dataset.from_list([e.sft_record() for e in train])
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer,
                         peft_config=make_lora_config(cfg))
    peft_model, seconds, change = _train_measured(trainer)
    steps = trainer.state.global_step
    per_pass = sum(len(x) for x in trainer.train_dataset["input_ids"])
    n_pass = steps * cfg.sft_batch_size * cfg.sft_grad_accum / max(1, len(ds))
    tokens = int(per_pass * n_pass)
    adapter = save_adapter(peft_model, tokenizer, out_dir, cfg, "sft",
                           {"train_units": [f"{e.book_id}/{e.unit_id}" for e in train]})
    record_trained_units(adapter, train, cfg)
    res = TrainResult("sft", adapter, list(trainer.state.log_history), seconds, steps, tokens,
                      _peak_memory_gib(peft_model), change)
    shutil.rmtree(work_dir, ignore_errors=True)
    return peft_model, res


# --------------------------------------------------------------------------- stage 2: GRPO
class GRPONoSignalError(LitsegError, RuntimeError):
    """A whole GRPO run trained on nothing: every rollout masked or every group filtered
    (``.steps``: the per-step table, :func:`step_table`)."""

    def __init__(self, steps: Any, message: str):
        super().__init__(message)
        self.steps = steps


def rollout_cap(examples: Sequence[LiteExample], count_tokens: Callable[[str], int], cfg: LiteConfig) -> dict[str, Any]:
    """The GRPO rollout cap and where it comes from.

    ``cfg.grpo_max_completion_length > 0``: that value. 0: sized from the teacher's replies (the SFT
    targets) on the training units: the ``grpo_cap_quantile`` of their token lengths (1.0 = the
    longest) times ``1 + grpo_cap_margin``, so a complete reply fits (DAPO masks truncated
    rollouts: a cap below the replies' lengths would leave groups without signal). Either way the cap is
    at most ``cfg.infer_max_new_tokens``, Lite's own inference cap: GRPO does not reward replies longer
    than the trained student is ever allowed to write (``source`` says when that bound applies). Returns
    the cap, the teacher reply lengths (max, p99) and the share of teacher replies longer than the cap.
    """
    import math

    lengths = sorted(count_tokens(e.target) + 1 for e in examples)  # + the end-of-turn token
    if not lengths:
        raise ValueError("rollout_cap: no training examples")
    q = lengths[min(len(lengths) - 1, max(0, math.ceil(cfg.grpo_cap_quantile * len(lengths)) - 1))]
    if cfg.grpo_max_completion_length > 0:
        cap, source = cfg.grpo_max_completion_length, "config (grpo_max_completion_length)"
    else:
        cap = int(math.ceil(q * (1.0 + cfg.grpo_cap_margin)))
        source = (f"teacher replies: {'max' if cfg.grpo_cap_quantile >= 1.0 else f'q{cfg.grpo_cap_quantile:g}'}"
                  f" x {1.0 + cfg.grpo_cap_margin:g}")
    if cap > cfg.infer_max_new_tokens:
        cap, source = cfg.infer_max_new_tokens, f"{source}, bounded by infer_max_new_tokens (Lite's inference cap)"
    over = sum(n > cap for n in lengths)
    p99 = lengths[min(len(lengths) - 1, max(0, math.ceil(0.99 * len(lengths)) - 1))]
    return {"cap": cap, "source": source, "teacher replies": len(lengths), "teacher reply tokens max": lengths[-1],
            "teacher reply tokens p99": p99, "teacher replies over the cap": over,
            "share of teacher replies over the cap": over / len(lengths)}


def _dynamic_sampling_trainer_class():
    from trl import GRPOTrainer

    class DynamicSamplingGRPOTrainer(GRPOTrainer):
        """``GRPOTrainer`` + DAPO's dynamic-sampling *filter*: zero-variance groups leave the loss."""

        def __init__(self, *args, filter_zero_std_groups: bool = True, **kwargs):
            super().__init__(*args, **kwargs)
            self.filter_zero_std_groups = filter_zero_std_groups
            self.groups_seen = 0
            self.groups_filtered = 0
            self.skipped_micro_batches = 0
            self.rollout_log: list[dict[str, Any]] = []  # one row per generation batch (see step_table)

        def _log_rollouts(self, out, keep) -> None:
            ids = out["completion_ids"]
            tok = self.processing_class
            stop = {t for t in (getattr(tok, "eos_token_id", None), getattr(tok, "pad_token_id", None)) if t is not None}
            # as trl decides truncation: the (padded) completion does not end on EOS/padding
            ended = ids.new_tensor([int(row[-1]) in stop for row in ids.tolist()], dtype=bool) if len(ids) else ids.bool()
            g = self.num_generations
            self.rollout_log.append({
                "step": int(self.state.global_step) + 1, "rollouts": int(len(ids)),
                "truncated": int((~ended).sum()),
                "masked (no token trained)": int((out["completion_mask"].sum(dim=1) == 0).sum()),
                "groups": int(len(ids) // g) if g else 0,
                "groups filtered": int((~keep).sum()) if keep is not None else 0,
                "trained tokens": int(out["completion_mask"].sum())})

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            g = self.num_generations
            adv = out["advantages"]
            if not self.filter_zero_std_groups or adv.numel() % g:
                # (a local slice not group-aligned, multi-process: left untouched)
                self._log_rollouts(out, None)
                return out
            keep = (adv.view(-1, g).abs().amax(dim=1) > 1e-8)
            self.groups_seen += keep.numel()
            self.groups_filtered += int((~keep).sum())
            mask = out["completion_mask"] * keep.repeat_interleave(g).unsqueeze(1).to(out["completion_mask"].dtype)
            out["completion_mask"] = mask
            out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["dynamic_sampling/filtered_group_frac"].append(float((~keep).float().mean()))
            self._log_rollouts(out, keep)
            return out

        def _compute_loss(self, model, inputs):
            # a micro-batch whose groups were all filtered carries no signal: skip its forward pass
            # (single process only, so no other rank waits for this one's gradients)
            if (self.filter_zero_std_groups and self.accelerator.num_processes == 1
                    and not bool(inputs["completion_mask"].any())):
                self.skipped_micro_batches += 1
                return sum((p * 0.0).sum() for p in model.parameters() if p.requires_grad)
            return super()._compute_loss(model, inputs)

    return DynamicSamplingGRPOTrainer


def merge_adapter(peft_model):
    """The base model with the adapter's weights merged in (a plain causal LM again)."""
    return peft_model.merge_and_unload()


def grpo_rollout_kwargs(cfg: LiteConfig, cap: int) -> dict[str, Any]:
    """``GRPOConfig`` arguments for the rollouts: trl's colocated vLLM engine (``grpo_use_vllm``,
    ``full``) or transformers' ``generate`` (CPU profiles)."""
    if not cfg.grpo_use_vllm:
        return {"use_vllm": False}

    alive = live_engines()
    if alive:  # trl's engine would be a second one on the GPU
        raise LLMError(f"GRPO with vLLM rollouts: a vLLM engine for {', '.join(alive)} is alive; close its "
                       "backends (litseg_nb.llm.release_backend) before training")
    return {"use_vllm": True, "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": cfg.grpo_vllm_gpu_memory_utilization,
            "vllm_max_model_length": cfg.max_seq_tokens + cap}


#: assumed decode latency per generated token position (one forward over the batch) for an 8B model
#: in bf16 on one 80 GB GPU: transformers' eager ``generate`` vs vLLM (CUDA graphs, paged KV cache).
#: Assumptions for the estimate below, not measurements of this project.
ASSUMED_DECODE_MS = {"hf generate": 30.0, "vLLM (trl colocate)": 8.0}


def rollout_time_estimate(cfg: LiteConfig, cap: int, decode_ms: dict[str, float] | None = None):
    """Rollout time per GRPO step both ways, from token counts: ``prompts_per_step`` groups of
    ``num_generations`` rollouts of up to ``cap`` tokens. transformers' ``generate`` decodes one
    group (micro-batch) at a time: ``prompts_per_step x cap`` decode steps; vLLM batches every
    group's rollouts at once: ``cap`` decode steps (continuous batching). Seconds = decode steps x
    the per-step latency (``decode_ms``, default :data:`ASSUMED_DECODE_MS`), an upper bound since a
    rollout may stop before the cap; prefill and the training pass are not included."""
    import pandas as pd

    ms = dict(decode_ms or ASSUMED_DECODE_MS)
    g, p = cfg.grpo_num_generations, cfg.grpo_prompts_per_step
    rows = []
    for path, lat in ms.items():
        steps = p * cap if path.startswith("hf") else cap
        sec = steps * lat / 1000.0
        rows.append({"rollouts by": path, "rollouts per step": g * p, "max tokens per rollout": cap,
                     "decode steps per GRPO step": steps, "assumed ms per decode step": lat,
                     "est. rollout s per GRPO step (upper bound)": round(sec, 1),
                     f"est. rollout h for {cfg.grpo_max_steps} steps": round(sec * cfg.grpo_max_steps / 3600, 2),
                     "used in this profile": (path.startswith("vLLM") == cfg.grpo_use_vllm)})
    return pd.DataFrame(rows)


def release_rollout_engine(trainer: Any) -> None:
    """Shut trl's colocated rollout engine down (its GPU memory goes back before inference starts)."""
    gen = getattr(trainer, "vllm_generation", None)
    if getattr(gen, "llm", None) is None:
        return

    release_engine(gen, "llm", "trl's GRPO rollouts")


def step_table(rollout_log: Sequence[dict[str, Any]]):
    """Per GRPO step: rollouts, truncated and masked rollouts (counts and shares), groups filtered
    (zero reward variance) and the completion tokens that carried a gradient."""
    import pandas as pd

    cols = ["step", "rollouts", "truncated", "masked (no token trained)", "groups", "groups filtered",
            "trained tokens"]
    if not rollout_log:
        return pd.DataFrame(columns=cols + ["truncated share", "masked share", "filtered group share"])
    df = pd.DataFrame(rollout_log)[cols].groupby("step", as_index=False).sum()
    df["truncated share"] = df["truncated"] / df["rollouts"]
    df["masked share"] = df["masked (no token trained)"] / df["rollouts"]
    df["filtered group share"] = (df["groups filtered"] / df["groups"]).where(df["groups"] > 0)
    return df


def train_grpo(model, tokenizer, prompts: Sequence[LiteExample], cfg: LiteConfig,
               reward_funcs: Sequence[Callable[..., list[float]]], out_dir: Path,
               reward_weights: Sequence[float] | None = None, work_dir: Path | None = None,
               completion_cap: int | None = None):
    """GRPO with the DAPO loss on the Lite prompts. Returns ``(peft_model, TrainResult)``.

    ``model`` is a plain causal LM (normally the SFT-merged model); a fresh LoRA adapter is
    trained on it. ``reward_funcs`` follow trl's reward-function protocol; the dataset passes the
    columns ``n_sentences``, ``passage``, ``system_prompt``, ``book_id`` and ``unit_id``.
    ``completion_cap``: the rollout cap (:func:`rollout_cap`; default ``cfg.grpo_max_completion_length``).
    The per-step truncated / masked / filtered counts are in ``TrainResult.extra["steps"]``
    (:func:`step_table`); a run in which no step trained on any token raises
    :class:`GRPONoSignalError` unless ``cfg.grpo_allow_no_signal``.
    """
    from datasets import Dataset
    from trl import GRPOConfig

    if not prompts:
        raise ValueError("train_grpo: no prompts")
    cap = int(completion_cap or cfg.grpo_max_completion_length)
    if cap <= 0:
        raise ValueError("train_grpo: grpo_max_completion_length=0 means 'sized from the teacher's replies': "
                         "pass completion_cap=rollout_cap(examples, count_tokens, cfg)['cap']")
    weights = list(reward_weights) if reward_weights is not None else None
    if weights is not None and len(weights) != len(reward_funcs):
        raise ValueError(f"{len(reward_funcs)} reward functions but {len(weights)} weights")
    reward_funcs = list(reward_funcs)
    if cfg.grpo_soft_overlong_cache > 0:  # DAPO's soft overlong punishment (Eq. 13), added with weight 1
        from trl.rewards import get_soft_overlong_punishment

        reward_funcs.append(get_soft_overlong_punishment(cap, cfg.grpo_soft_overlong_cache))
        weights = (weights if weights is not None else [1.0] * (len(reward_funcs) - 1)) + [1.0]
    work_dir = Path(work_dir or Path(out_dir).parent / "grpo_work")
    g = cfg.grpo_num_generations
    args = GRPOConfig(**grpo_rollout_kwargs(cfg, cap),
        output_dir=str(work_dir), per_device_train_batch_size=g,
        gradient_accumulation_steps=cfg.grpo_prompts_per_step, num_generations=g,
        max_steps=cfg.grpo_max_steps, learning_rate=cfg.grpo_learning_rate, lr_scheduler_type="constant",
        max_completion_length=cap, temperature=cfg.grpo_temperature,
        beta=cfg.grpo_beta, epsilon=cfg.grpo_epsilon, epsilon_high=cfg.grpo_epsilon_high,
        loss_type=cfg.grpo_loss_type, mask_truncated_completions=cfg.grpo_mask_truncated_completions,
        reward_weights=weights, scale_rewards="group", log_completions=False,
        **_common_kwargs(model, cfg))
    ds = Dataset.from_list([e.grpo_record() for e in prompts])
    cls = _dynamic_sampling_trainer_class()
    trainer = cls(model=model, reward_funcs=list(reward_funcs), args=args, train_dataset=ds,
                  processing_class=tokenizer, peft_config=make_lora_config(cfg),
                  filter_zero_std_groups=cfg.grpo_filter_zero_std_groups)
    try:
        peft_model, seconds, change = _train_measured(trainer)
    except BaseException:
        try:
            release_rollout_engine(trainer)
        finally:
            raise
    steps = step_table(trainer.rollout_log)
    if not cfg.grpo_allow_no_signal and int(steps["trained tokens"].sum()) == 0:
        release_rollout_engine(trainer)
        raise GRPONoSignalError(steps,
            f"GRPO trained on nothing in {trainer.state.global_step} step(s): {int(steps['truncated'].sum())} of "
            f"{int(steps['rollouts'].sum())} rollouts truncated at {cap} tokens (masked: "
            f"{int(steps['masked (no token trained)'].sum())}), {int(steps['groups filtered'].sum())} of "
            f"{int(steps['groups'].sum())} groups filtered (zero reward variance). Raise the rollout cap "
            f"(grpo_max_completion_length, or 0 to size it from the teacher's replies), check the rewards, "
            f"or set grpo_allow_no_signal=True to accept a no-op GRPO stage")
    log = list(trainer.state.log_history)
    tokens = int(sum(r.get("completions/mean_length", 0) for r in log if "loss" in r) * g
                 * cfg.grpo_prompts_per_step)
    prompt_tokens = sum(len(tokenizer(tokenizer.apply_chat_template(e.prompt_messages(), tokenize=False,
                                                                    add_generation_prompt=True),
                                      add_special_tokens=False).input_ids) for e in prompts[:8])
    tokens += int(prompt_tokens / min(8, len(prompts)) * g * cfg.grpo_prompts_per_step * trainer.state.global_step)
    adapter = save_adapter(peft_model, tokenizer, out_dir, cfg, "grpo",
                           {"train_units": [f"{e.book_id}/{e.unit_id}" for e in prompts],
                            "reward_weights": weights})
    record_trained_units(adapter, prompts, cfg)
    release_rollout_engine(trainer)  # after the adapter is saved: a failed release loses no training
    extra = {"groups seen": trainer.groups_seen, "groups filtered (zero reward variance)": trainer.groups_filtered,
             "micro-batches skipped (all filtered)": trainer.skipped_micro_batches, "rollout cap": cap,
             "truncated rollouts": int(steps["truncated"].sum()),
             "masked rollouts": int(steps["masked (no token trained)"].sum()),
             "trained completion tokens": int(steps["trained tokens"].sum())}
    res = TrainResult("grpo", adapter, log, seconds, trainer.state.global_step, tokens,
                      _peak_memory_gib(peft_model), change, extra, steps)
    shutil.rmtree(work_dir, ignore_errors=True)
    return peft_model, res


# --------------------------------------------------------------------------- loading for inference
def adapter_fingerprint(*adapter_dirs: Path) -> str:
    """Hash of the adapters' weight files (names the merged model, so caches never go stale)."""
    files = []
    for d in adapter_dirs:
        for p in sorted(Path(d).glob("adapter_model.*")):
            files.append(hash_file(p))
    if not files:
        raise FileNotFoundError(f"no adapter_model.* in {', '.join(map(str, adapter_dirs))}")
    return hash_obj(files)[:12]


def load_lite_model(base_model: str, adapter_dirs: Sequence[Path], dtype: str = "auto", device: str = "auto"):
    """Base model with the given adapters applied in order and merged. Returns ``(model, tokenizer)``."""
    from peft import PeftModel

    model, tok, _ = load_model_and_tokenizer(base_model, dtype, device)
    for d in adapter_dirs:
        model = PeftModel.from_pretrained(model, str(d)).merge_and_unload()
    model.eval()
    return model, tok


def save_merged_model(base_model: str, adapter_dirs: Sequence[Path], root: Path) -> Path:
    """Merge base + adapters once into ``root/merged-<hash>`` (a plain model folder any backend loads)."""
    target = Path(root) / f"merged-{adapter_fingerprint(*adapter_dirs)}"
    trained = TrainedUnits()
    for d in adapter_dirs:  # the merged model carries every unit its adapters were trained on
        trained = trained.union(model_record(d))
    if (target / "config.json").is_file():
        trained.union(model_record(target)).save(target / TRAINED_UNITS_FILE)
        return target
    model, tok = load_lite_model(base_model, adapter_dirs, dtype="float32", device="cpu")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    trained.save(tmp / TRAINED_UNITS_FILE)
    (tmp / "lite_adapters.json").write_text(json.dumps(
        {"base_model": base_model, "adapters": [str(d) for d in adapter_dirs]}, indent=2), encoding="utf-8")
    tmp.replace(target)
    return target


def save_combined_adapter(base_model: str, adapter_dirs: Sequence[Path], root: Path) -> Path:
    """ONE LoRA adapter equal to applying ``adapter_dirs`` in order, in ``root/lora-<hash>``.

    Adapter i adds ``s_i * B_i @ A_i`` (``s_i = lora_alpha_i / r_i``) to a weight; the sum over i is
    exactly one LoRA of rank ``sum(r_i)`` with ``A = [A_1; A_2; ...]`` (rows) and
    ``B = [s_1 B_1, s_2 B_2, ...]`` (columns), scaling 1 (``lora_alpha = r``). So the SFT adapter
    and the GRPO adapter trained on the SFT-merged model are served as one ``LoRARequest`` on the base
    model's vLLM engine, with no merged copy of the model. The folder carries every unit the
    adapters were trained on (:mod:`litseg_nb.lite.heldout`).
    """
    import torch
    from safetensors.torch import load_file, save_file

    dirs = [Path(d) for d in adapter_dirs]
    if not dirs:
        raise ValueError("save_combined_adapter: no adapters")
    target = Path(root) / f"lora-{adapter_fingerprint(*dirs)}"
    trained = TrainedUnits()
    for d in dirs:
        trained = trained.union(model_record(d))
    if (target / "adapter_model.safetensors").is_file():
        return target
    configs = [json.loads((d / "adapter_config.json").read_text(encoding="utf-8")) for d in dirs]
    weights = [load_file(str(d / "adapter_model.safetensors")) for d in dirs]
    keys = [sorted(k[:-len(".lora_A.weight")] for k in w if k.endswith(".lora_A.weight")) for w in weights]
    if any(k != keys[0] for k in keys[1:]):
        raise ValueError(f"adapters {', '.join(map(str, dirs))} adapt different modules; they cannot be combined")
    for d, c in zip(dirs, configs):
        if c.get("use_rslora") or c.get("use_dora") or c.get("bias", "none") != "none":
            raise ValueError(f"{d}: only plain LoRA adapters (no rsLoRA, DoRA or bias) can be combined")
    combined: dict[str, Any] = {}
    for module in keys[0]:
        a = [w[f"{module}.lora_A.weight"].float() for w in weights]
        b = [w[f"{module}.lora_B.weight"].float() * (c["lora_alpha"] / c["r"]) for w, c in zip(weights, configs)]
        combined[f"{module}.lora_A.weight"] = torch.cat(a, dim=0).contiguous()
        combined[f"{module}.lora_B.weight"] = torch.cat(b, dim=1).contiguous()
    rank = sum(int(c["r"]) for c in configs)
    config = {**configs[0], "r": rank, "lora_alpha": rank, "lora_dropout": 0.0,
              "base_model_name_or_path": base_model, "rank_pattern": {}, "alpha_pattern": {}}
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(combined, str(tmp / "adapter_model.safetensors"))
    (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    trained.save(tmp / TRAINED_UNITS_FILE)
    (tmp / "lite_adapters.json").write_text(json.dumps(
        {"base_model": base_model, "adapters": [str(d) for d in dirs], "rank": rank}, indent=2), encoding="utf-8")
    tmp.replace(target)
    return target


def student_backend(llm_cfg: Any, adapter_dirs: Sequence[Path], root: Path, ledger: Any = None):
    """The backend of base ``llm_cfg.model`` + ``adapter_dirs``, and the folder it serves.

    vLLM: one combined LoRA adapter (:func:`save_combined_adapter`) served on the base model's engine
    (the engine notebook 03's untuned student and notebook 07's base variants already use: one engine
    per model per process). hf/openai: the merged model folder (:func:`save_merged_model`)."""
    if llm_cfg.backend == "vllm":
        path = save_combined_adapter(llm_cfg.model, adapter_dirs, root)
        return make_backend(llm_cfg.replace(lora_adapter=str(path)), ledger), path
    path = save_merged_model(llm_cfg.model, adapter_dirs, root)
    return make_backend(llm_cfg.replace(model=str(path)), ledger), path


def free_memory() -> None:
    """Collect garbage and empty the CUDA cache (call after deleting the training models, before an
    inference engine such as vLLM claims the GPU)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
