"""LitSeg-Lite training (paper section 3.2): LoRA SFT (trl ``SFTTrainer``), then GRPO with the DAPO loss.

GRPO trains a fresh adapter on the SFT-merged model; :class:`DynamicSamplingGRPOTrainer` adds DAPO's
dynamic-sampling filter, which trl lacks. Reward: ``w_format * format + w_judge * (E.3 mean - 1) / 4``."""
from __future__ import annotations

import functools
import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import LiteConfig
from .data import (TRAINED_UNITS_FILE, LiteExample, TrainedUnits, model_record, save_profile_record,
                   trained_units_of)
from ..errors import LitsegError
from ..litseg.rubric_judge import (DIMENSIONS, score_chunks_with_rubric, segment_pipeline_json,
                                   segment_texts_from_passage)
from ..litseg.validate import (coverage_mask, nested_ranges, parse_json_reply, segmentation_object,
                               validate_segments)
from ..llm.vllm_backend import live_engines, release_engine
from ..llm.base import LLMBackend, LLMError, UsageTag
from ..llm.replies import read_reply
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
    """L2 norm of the change of all LoRA weights and how many tensors changed (adapter names dropped)."""
    import torch

    b, a = ({k.replace(".default", ""): v for k, v in d.items()} for d in (before, after))
    common = sorted(set(b) & set(a))
    diff = [torch.linalg.vector_norm(a[k] - b[k]).item() for k in common]
    return {"l2_change": math.sqrt(sum(d * d for d in diff)), "tensors": len(common),
            "tensors_changed": sum(d > 0 for d in diff)}


def _checkpointing_arg(args_cls: Any = None) -> str:
    """``TrainingArguments``' name for gradient checkpointing (renamed in recent transformers)."""
    import dataclasses

    if args_cls is None:
        from transformers import TrainingArguments as args_cls

    names = {f.name for f in dataclasses.fields(args_cls)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def _common_kwargs(model, cfg: LiteConfig) -> dict[str, Any]:
    precision = {"bf16": False, "fp16": False, "use_cpu": True}
    if next(model.parameters()).device.type == "cuda":
        import torch

        bf16 = torch.cuda.is_bf16_supported()
        precision = {"bf16": bf16, "fp16": not bf16, "use_cpu": False}
    return {**precision, _checkpointing_arg(): cfg.gradient_checkpointing,
            "logging_steps": 1, "save_strategy": "no", "report_to": [], "seed": cfg.seed,
            "data_seed": cfg.seed, "dataloader_num_workers": 0, "disable_tqdm": True}


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

        return pd.DataFrame([r for r in self.log if "train_runtime" not in r])

    def summary(self) -> dict[str, Any]:
        return {"stage": self.stage, "steps": self.steps, "seconds": round(self.seconds, 1),
                "tokens": self.tokens, "tokens/s": round(self.tokens_per_s, 1),
                "peak GPU memory (GiB)": None if self.peak_memory_gib is None else round(self.peak_memory_gib, 2),
                "LoRA L2 change": round(self.lora_change.get("l2_change", float("nan")), 6),
                **self.extra}


def save_adapter(model, tokenizer, out_dir: Path, cfg: LiteConfig, stage: str, examples: Sequence[LiteExample],
                 **extra: Any) -> Path:
    """Save the LoRA adapter (+ tokenizer), a ``lite_config.json`` describing how it was made, and the trained
    units (in the folder and in the profile's record)."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    meta = redact_obj({"stage": stage, "base_model": cfg.llm.model, "lite_config": cfg.to_dict(),
                       "train_units": [f"{e.book_id}/{e.unit_id}" for e in examples], **extra})
    (out_dir / "lite_config.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    trained = trained_units_of(examples)
    trained.save(out_dir / TRAINED_UNITS_FILE)
    save_profile_record(cfg.profile, trained)
    return out_dir


# --------------------------------------------------------------------------- stage 1: SFT
def _train_measured(trainer) -> tuple[Any, float, dict[str, float]]:
    from transformers import PrinterCallback, TrainerCallback

    class FollowThreadBudget(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            follow_thread_budget()

    before = lora_state(trainer.model)
    trainer.add_callback(FollowThreadBudget())
    # with disable_tqdm the trainer prints every log dict; they stay in trainer.state.log_history (log_frame)
    trainer.remove_callback(PrinterCallback)
    follow_thread_budget()
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    return trainer.model, seconds, lora_change(before, lora_state(trainer.model))


def train_sft(model, tokenizer, train: Sequence[LiteExample], cfg: LiteConfig, out_dir: Path,
              work_dir: Path | None = None):
    """LoRA SFT of a plain causal LM on the single-pass targets. Returns ``(peft_model, TrainResult)``."""
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
    adapter = save_adapter(peft_model, tokenizer, out_dir, cfg, "sft", train)
    res = TrainResult("sft", adapter, list(trainer.state.log_history), seconds, steps, tokens,
                      _peak_memory_gib(peft_model), change)
    shutil.rmtree(work_dir, ignore_errors=True)
    return peft_model, res


# --------------------------------------------------------------------------- stage 2: GRPO
class GRPONoSignalError(LitsegError, RuntimeError):
    """A whole GRPO run trained on nothing (``.steps``: the per-step table, :func:`step_table`)."""

    def __init__(self, steps: Any, message: str):
        super().__init__(message)
        self.steps = steps


def rollout_cap(examples: Sequence[LiteExample], count_tokens: Callable[[str], int], cfg: LiteConfig) -> dict[str, Any]:
    """The GRPO rollout cap (``grpo_max_completion_length``, or a quantile of the teacher replies' lengths plus a
    margin, never above ``infer_max_new_tokens``), its source, and how many teacher replies exceed it."""
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


def grpo_rollout_kwargs(cfg: LiteConfig, cap: int) -> dict[str, Any]:
    """``GRPOConfig`` arguments for the rollouts: trl's colocated vLLM engine or transformers' ``generate``."""
    if not cfg.grpo_use_vllm:
        return {"use_vllm": False}

    alive = live_engines()
    if alive:  # trl's engine would be a second one on the GPU
        raise LLMError(f"GRPO with vLLM rollouts: a vLLM engine for {', '.join(alive)} is alive; close its "
                       "backends (litseg_nb.llm.release_backend) before training")
    return {"use_vllm": True, "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": cfg.grpo_vllm_gpu_memory_utilization,
            "vllm_max_model_length": cfg.max_seq_tokens + cap}


#: assumed decode latency per token position for an 8B bf16 model on one 80 GB GPU (not measurements)
ASSUMED_DECODE_MS = {"hf generate": 30.0, "vLLM (trl colocate)": 8.0}


def rollout_time_estimate(cfg: LiteConfig, cap: int):
    """Upper-bound rollout time per GRPO step with ``generate`` (one group at a time) and with vLLM."""
    import pandas as pd

    g, p = cfg.grpo_num_generations, cfg.grpo_prompts_per_step
    rows = []
    for path, lat in ASSUMED_DECODE_MS.items():
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
    if getattr(gen, "llm", None) is not None:
        release_engine(gen, "llm", "trl's GRPO rollouts")


def step_table(rollout_log: Sequence[dict[str, Any]]):
    """Per GRPO step: rollouts, truncated and masked ones, groups filtered, tokens that carried a gradient."""
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
    """GRPO with the DAPO loss: a fresh LoRA adapter on the SFT-merged model; ``(peft_model, TrainResult)``.
    :class:`GRPONoSignalError` when no step trained on any token (unless ``cfg.grpo_allow_no_signal``)."""
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
    trainer = _dynamic_sampling_trainer_class()(
        model=model, reward_funcs=reward_funcs, args=args, train_dataset=ds, processing_class=tokenizer,
        peft_config=make_lora_config(cfg), filter_zero_std_groups=cfg.grpo_filter_zero_std_groups)
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
    adapter = save_adapter(peft_model, tokenizer, out_dir, cfg, "grpo", prompts, reward_weights=weights)
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
    files = [hash_file(p) for d in adapter_dirs for p in sorted(Path(d).glob("adapter_model.*"))]
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


def save_merged_model(base_model: str, adapter_dirs: Sequence[Path], root: Path, dtype: str = "float32") -> Path:
    """Merge base + adapters once into ``root/merged-<hash>`` (a plain model folder any backend loads), merged
    and saved in ``dtype`` (another than float32: in the folder's name)."""
    target = Path(root) / f"merged-{adapter_fingerprint(*adapter_dirs)}{'' if dtype == 'float32' else '-' + dtype}"
    trained = functools.reduce(TrainedUnits.union, map(model_record, adapter_dirs), TrainedUnits())
    if (target / "config.json").is_file():
        trained.union(model_record(target)).save(target / TRAINED_UNITS_FILE)
        return target
    model, tok = load_lite_model(base_model, adapter_dirs, dtype=dtype, device="cpu")
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
    """ONE LoRA adapter in ``root/lora-<hash>`` equal to ``adapter_dirs`` applied in order: ``A = [A_1; A_2; ...]``,
    ``B = [s_1 B_1, s_2 B_2, ...]``, rank ``sum(r_i)``, scaling 1."""
    import torch
    from safetensors.torch import load_file, save_file

    dirs = [Path(d) for d in adapter_dirs]
    target = Path(root) / f"lora-{adapter_fingerprint(*dirs)}"
    trained = functools.reduce(TrainedUnits.union, map(model_record, dirs), TrainedUnits())
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
    """The backend of ``llm_cfg.model`` + ``adapter_dirs`` (vLLM: one combined adapter; else a merged model)."""
    if llm_cfg.backend == "vllm":
        path = save_combined_adapter(llm_cfg.model, adapter_dirs, root)
        return make_backend(llm_cfg.replace(lora_adapter=str(path)), ledger), path
    path = save_merged_model(llm_cfg.model, adapter_dirs, root)
    return make_backend(llm_cfg.replace(model=str(path)), ledger), path


def free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- GRPO rewards
def completion_text(completion: Any) -> str:
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        completion = completion[-1]  # a conversational completion: its last message
    return str(completion.get("content", "")) if isinstance(completion, dict) else str(completion)


@dataclass(frozen=True)
class FormatRule:
    name: str
    weight: float
    credit: str  # how partial credit is given


FORMAT_RULES: tuple[FormatRule, ...] = (
    FormatRule("parses", 0.15, "1 if the reply contains a JSON object with a top-level step1/step2/"
               "step3/segments key, else 0 (and 0 for every rule; a truncated reply whose only "
               "complete object is a nested one does not count)"),
    FormatRule("schema", 0.15, "share of the 5 required fields present with the right type: "
               "step1.step_1_events (str), step2.step_2_threads (str), step3.chapter_title (str), "
               "step3.step_3_turning_points (list), step3.segments (non-empty list of objects)"),
    FormatRule("indices_valid", 0.20, "share of segment entries valid by the shared validator's "
               "per-segment checks: an object with a string subtitle, JSON integers "
               "1 <= from_idx <= to_idx <= n, context_idx absent/null or JSON integers in 1..n, "
               "main range not inside another entry's (no duplicates)"),
    FormatRule("full_coverage", 0.30, "share of the unit's n sentences inside some valid main range "
               "(overlaps allowed, context-only sentences do not count)"),
    FormatRule("first_last", 0.20, "0.5 if the first readable segment starts at 1, plus 0.5 if the "
               "last one ends at n"),
)
assert abs(sum(r.weight for r in FORMAT_RULES) - 1.0) < 1e-9
TOP_KEYS = {"step1", "step2", "step3", "segments"}


def format_rules_table():
    import pandas as pd

    return pd.DataFrame([{"rule": r.name, "weight": r.weight, "partial credit": r.credit}
                         for r in FORMAT_RULES])


def format_reward_breakdown(text: str, n_sentences: int, max_new_tokens: int | None = None) -> dict[str, float]:
    """Per-rule credit in [0, 1] of one reply, ``total`` and ``valid`` (the shared validator's verdict)."""
    zero = {r.name: 0.0 for r in FORMAT_RULES}
    obj = parse_json_reply(text, max_new_tokens=max_new_tokens) if isinstance(text, str) and text else None
    if not isinstance(obj, dict) or not TOP_KEYS & set(obj):
        return {**zero, "total": 0.0, "valid": 0.0}
    credit = dict(zero, parses=1.0)
    s1, s2, s3 = obj.get("step1"), obj.get("step2"), obj.get("step3")
    s3 = s3 if isinstance(s3, dict) else {}
    holder = segmentation_object(obj)
    segs = holder.get("segments") if isinstance(holder, dict) else None
    segs_ok = isinstance(segs, list) and bool(segs) and all(isinstance(s, dict) for s in segs)
    checks = [
        isinstance(s1, dict) and isinstance(s1.get("step_1_events"), str),
        isinstance(s2, dict) and isinstance(s2.get("step_2_threads"), str),
        isinstance(s3.get("chapter_title"), str),
        isinstance(s3.get("step_3_turning_points"), list),
        segs_ok,
    ]
    credit["schema"] = sum(checks) / len(checks)
    n = int(n_sentences)
    res = validate_segments(holder, n) if n >= 1 else None
    if res is not None and isinstance(segs, list) and segs:
        credit["indices_valid"] = sum(res.item_ok) / len(segs)
        covered = coverage_mask([s for s in res.segments if 1 <= s.from_idx <= s.to_idx <= n], n)
        credit["full_coverage"] = sum(covered[1:n + 1]) / n
        if res.segments:
            credit["first_last"] = 0.5 * (res.segments[0].from_idx == 1) + 0.5 * (res.segments[-1].to_idx == n)
    credit["total"] = sum(r.weight * credit[r.name] for r in FORMAT_RULES)
    credit["valid"] = float(res is not None and res.ok)
    return credit


def format_reward(completions: Sequence[Any], n_sentences: Sequence[int], **_: Any) -> list[float]:
    """trl reward function: the rule-based format reward of every completion."""
    return [format_reward_breakdown(completion_text(c), int(n))["total"]
            for c, n in zip(completions, n_sentences)]


# --------------------------------------------------------------------------- narratological reward
def judgeable_segments(text: str, n_sentences: int, max_new_tokens: int | None = None) -> list[dict[str, Any]]:
    """The reply's segments the judge scores: valid, non-nested main ranges, context outside ``1..n`` dropped."""
    obj = parse_json_reply(text, max_new_tokens=max_new_tokens) if isinstance(text, str) and text else None
    if not isinstance(obj, dict) or n_sentences < 1:
        return []
    res = validate_segments(segmentation_object(obj), n_sentences)
    n = n_sentences
    keep = [i for i, s in enumerate(res.segments) if 1 <= s.from_idx <= s.to_idx <= n]
    nested = {i for i, _ in nested_ranges(res.segments, keep)}
    return [{"subtitle": s.subtitle, "from_idx": s.from_idx, "to_idx": s.to_idx,
             "context_idx": [c for c in s.context_idx if 1 <= c <= n]}
            for s in (res.segments[i] for i in keep if i not in nested)]


@dataclass
class JudgeStats:
    completions: int = 0
    unscorable: int = 0  # no usable segment: reward 0, judge not called
    truncated_in_reasoning: int = 0  # of the unscorable: cut off inside a <think> block (no answer)
    judged: int = 0
    neutral: int = 0  # judge failed after bounded retries: neutral score used
    judge_calls: int = 0
    dimension_sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DIMENSIONS, 0.0))

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "dimension_sums"}
        for k, v in self.dimension_sums.items():
            d[f"mean_{k}"] = v / self.judged if self.judged else float("nan")
        d["neutral_rate"] = self.neutral / self.judged if self.judged else float("nan")
        return d


class NarratologicalReward:
    """trl reward function backed by the E.3 rubric judge (columns ``passage``, ``system_prompt``, ``n_sentences``)."""

    __name__ = "narratological_reward"

    def __init__(self, judge: LLMBackend, retries: int = 2, max_new_tokens: int | None = None,
                 seed: int = 0):
        self.judge, self.retries, self.max_new_tokens, self.seed = judge, retries, max_new_tokens, seed
        self.stats = JudgeStats()
        self.log: list[dict[str, Any]] = []  # one row per completion

    def score_one(self, text: str, passage: str, system_prompt: str, n_sentences: int) -> float:
        self.stats.completions += 1
        segs = judgeable_segments(text, n_sentences)
        if not segs:
            self.stats.unscorable += 1
            self.stats.truncated_in_reasoning += int(read_reply(text).truncated_in_reasoning)
            self.log.append({"judged": False, "neutral": False, "reward": 0.0, "n_chunks": 0})
            return 0.0
        # E.3's Segment Pipeline: the student's output (its analysis and segments, each with its text)
        pipeline = segment_pipeline_json(segs, texts=segment_texts_from_passage(passage, segs),
                                         analysis=parse_json_reply(text))
        res = score_chunks_with_rubric(
            self.judge, passage, system_prompt, pipeline,
            n_chunks=len(segs), retries=self.retries, max_new_tokens=self.max_new_tokens,
            tag=UsageTag(method="litseg-lite", stage="grpo-judge"), seed=self.seed)
        self.stats.judged += 1
        self.stats.judge_calls += res.attempts
        self.stats.neutral += int(res.neutral)
        for k, v in res.dimension_means().items():
            self.stats.dimension_sums[k] += v
        reward = (res.mean - 1.0) / 4.0  # the rubric's 1-5 scale to 0-1
        self.log.append({"judged": True, "neutral": res.neutral, "reward": reward,
                         "n_chunks": len(segs), "attempts": res.attempts, **res.dimension_means()})
        return reward

    def __call__(self, completions: Sequence[Any], passage: Sequence[str], system_prompt: Sequence[str],
                 n_sentences: Sequence[int], **_: Any) -> list[float]:
        return [self.score_one(completion_text(c), p, sp, int(n))
                for c, p, sp, n in zip(completions, passage, system_prompt, n_sentences)]


def build_reward_funcs(judge: LLMBackend, retries: int = 2, max_new_tokens: int | None = None,
                       seed: int = 0) -> tuple[list[Callable[..., list[float]]], NarratologicalReward]:
    """``[format_reward, narratological_reward]`` in the order of ``LiteConfig.reward_weights``."""
    narr = NarratologicalReward(judge, retries=retries, max_new_tokens=max_new_tokens, seed=seed)
    return [format_reward, narr], narr
