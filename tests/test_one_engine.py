"""One vLLM engine per model per process: notebooks 02, 03 and 07's engine code
paths with the `full` configuration, on a stand-in ``vllm`` whose engine refuses to be created while
another is alive (vLLM claims gpu_memory_utilization of the GPU per engine: a second start fails)."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from litseg_nb.llm import SamplingParams, UsageLedger, make_backend
from litseg_nb.llm import vllm_backend
from litseg_nb.llm.models import load_model_and_tokenizer, load_tokenizer

_N = iter(range(10**6))


def conv():
    """A new conversation each call (the request cache would answer a repeated one)."""
    return [[{"role": "user", "content": f"Segment text {next(_N)}."}]]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


class StandInLLM:
    """``vllm.LLM`` stand-in: raises when created while another is alive; records every request."""

    alive: list["StandInLLM"] = []
    created = 0

    def __init__(self, **settings):
        if StandInLLM.alive:
            raise RuntimeError(f"second vLLM engine ({settings['model']}) while {StandInLLM.alive[0].model} "
                               "is alive: out of GPU memory")
        StandInLLM.alive.append(self)
        StandInLLM.created += 1
        self.model, self.settings, self.calls = settings["model"], settings, []

    def get_tokenizer(self):
        return load_tokenizer("tiny-random")

    def generate(self, prompts, sampling, use_tqdm=False, lora_request=None):
        self.calls.append((sampling, lora_request))
        return [types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"], num_cached_tokens=0, outputs=[
            types.SimpleNamespace(text='{"a": "b"}', token_ids=[1, 2], finish_reason="stop")]) for p in prompts]

    def shutdown(self):
        StandInLLM.alive.remove(self)


@pytest.fixture
def standin_vllm(monkeypatch, fresh_dirs):
    for name in ("LITSEG_JUDGE_URLS", "LITSEG_LLM_URLS", "LITSEG_TEACHER_URLS", "LITSEG_RATER_URLS",
                 "LITSEG_RATER2_URLS"):
        monkeypatch.delenv(name, raising=False)
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = StandInLLM, (lambda **kw: kw)
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = lambda **kw: ("structured", kw)
    lora = types.ModuleType("vllm.lora")
    req = types.ModuleType("vllm.lora.request")
    req.LoRARequest = lambda name, i, path: ("lora", i, path)
    for name, mod in {"vllm": fake, "vllm.sampling_params": sp, "vllm.lora": lora, "vllm.lora.request": req}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    StandInLLM.alive, StandInLLM.created = [], 0
    yield StandInLLM
    vllm_backend.shutdown_engines()


def tiny_adapter(path, seed):
    """A LoRA adapter of the tiny random Llama with non-zero weights (r=2)."""
    from peft import LoraConfig, get_peft_model

    model, tok, _ = load_model_and_tokenizer("tiny-random", "float32", "cpu")
    peft = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
                                            lora_dropout=0.0, task_type="CAUSAL_LM"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    peft.save_pretrained(str(path))
    return path


def test_02_03_07_use_one_engine_per_model(standin_vllm, tmp_path):
    from litseg_nb.evaluation import ablation
    from litseg_nb.core.artifacts import artifact_dir
    from litseg_nb.lite import train as lite_train
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.litseg.config import LitSegConfig
    from litseg_nb.rag.config import RagConfig

    ledger = UsageLedger()
    # notebook 02: the teacher, then the constrained-decoding comparison (cells 6 and 12)
    cfg02 = LitSegConfig.for_profile("full")
    backend = make_backend(cfg02.llm, ledger)
    backend_so = make_backend(cfg02.llm.replace(structured_output=True), ledger)
    backend.chat(conv(), SamplingParams(max_new_tokens=4, json_schema=SCHEMA))
    backend_so.chat(conv(), SamplingParams(max_new_tokens=4, json_schema=SCHEMA))
    (engine,) = standin_vllm.alive
    assert [("structured_outputs" in s) for s, _ in engine.calls] == [False, True]  # per request
    assert engine.settings["enable_lora"] and engine.settings["tensor_parallel_size"] == 1
    del engine  # release checks that nothing holds the engine any more
    for b in (backend, backend_so):
        from litseg_nb.llm import release_backend

        release_backend(b)
    assert standin_vllm.alive == [] and vllm_backend.live_engines() == {}  # shut down and released

    # notebook 03: the untuned student, then the trained one (cells 16 and 18) on the same engine
    cfg03 = LiteConfig.for_profile("full", judge_llm={"base_urls": ("http://judge:8000/v1",)})
    adapters = artifact_dir("full", "lite", "adapters")
    sft, grpo = tiny_adapter(adapters / "sft", 1), tiny_adapter(adapters / "grpo", 2)
    base03 = make_backend(cfg03.llm, ledger)
    student, served = lite_train.student_backend(cfg03.llm, [sft, grpo], tmp_path / "merged", ledger)
    base03.chat(conv(), SamplingParams(max_new_tokens=4))
    student.chat(conv(), SamplingParams(max_new_tokens=4))
    (engine,) = standin_vllm.alive
    assert [lr for _, lr in engine.calls] == [None, ("lora", 1, str(served.resolve()))]
    assert student.model_id == str(served) and student.inner.revision != base03.inner.revision  # cache keys
    assert not (served / "config.json").exists()  # no merged copy of the model
    del engine
    vllm_backend.shutdown_engines()

    # notebook 07: every variant (base ones and LoRA ones), then the generator (cells 4 and 8)
    cfg07 = LiteConfig.for_profile("full")
    for v in ablation.select_variants(()):
        b = ablation.variant_backend(cfg07, v, "full", ledger)
        b.chat(conv(), SamplingParams(max_new_tokens=4))
    generator = make_backend(RagConfig.for_profile("full").llm)
    generator.chat(conv(), SamplingParams(max_new_tokens=4))
    (engine,) = standin_vllm.alive
    loras = [lr[1] if lr else None for _, lr in engine.calls]
    assert loras == [1, 2, None, None, None, None, None, None]  # lite, w/o GRPO, then the base model
    assert standin_vllm.created == 3  # one engine per notebook (kernel), never two at once
    # another model while one is alive: a clear error, not an out-of-memory crash
    del engine
    with pytest.raises(Exception, match="alive in this process"):
        make_backend(cfg02.llm)


def test_combined_adapter_equals_the_merged_model(tmp_path):
    from peft import PeftModel

    from litseg_nb.lite import train as lite_train

    sft, grpo = tiny_adapter(tmp_path / "sft", 1), tiny_adapter(tmp_path / "grpo", 2)
    ids = torch.tensor([[1, 5, 9, 13, 200, 7]])
    merged, _ = lite_train.load_lite_model("tiny-random", [sft, grpo], "float32", "cpu")
    combined = lite_train.save_combined_adapter("tiny-random", [sft, grpo], tmp_path / "out")
    base, _, _ = load_model_and_tokenizer("tiny-random", "float32", "cpu")
    with torch.no_grad():
        plain = base(ids).logits
        one = PeftModel.from_pretrained(base, str(combined)).eval()(ids).logits
        want = merged(ids).logits
    assert (want - plain).abs().max() > 1e-2  # the adapters change the model
    assert torch.allclose(one, want, atol=1e-4)


def test_full_grpo_config_asks_trl_for_colocated_vllm_rollouts(tmp_path):
    from trl import GRPOConfig

    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.lite.train import grpo_rollout_kwargs

    full = LiteConfig.for_profile("full", grpo_use_vllm=True)  # off by default: trl 1.16 vs vLLM 0.32
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **grpo_rollout_kwargs(full, 1000))
    assert (args.use_vllm, args.vllm_mode, args.vllm_gpu_memory_utilization) == (True, "colocate", 0.3)
    assert args.vllm_max_model_length == full.max_seq_tokens + 1000


def test_grpo_rollouts_use_trls_vllm_in_full_and_its_engine_is_released(standin_vllm):
    """`full`'s GRPO rollouts come from trl's colocated vLLM engine (CPU profiles keep
    transformers' generate); it is refused while another engine is alive and shut down afterwards."""
    from litseg_nb.llm.base import LLMError
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.lite.train import grpo_rollout_kwargs, release_rollout_engine

    full = LiteConfig.for_profile("full", grpo_use_vllm=True)
    assert LiteConfig.for_profile("full").grpo_use_vllm is False  # see LiteConfig.grpo_use_vllm
    assert grpo_rollout_kwargs(LiteConfig.for_profile("test"), 24) == {"use_vllm": False}
    assert grpo_rollout_kwargs(LiteConfig.for_profile("smoke"), 64) == {"use_vllm": False}
    b = make_backend(full.llm)
    with pytest.raises(LLMError, match="alive"):
        grpo_rollout_kwargs(full, 1000)
    from litseg_nb.llm import release_backend

    release_backend(b)
    trainer = types.SimpleNamespace(vllm_generation=types.SimpleNamespace(llm=StandInLLM(model="trl")))
    assert len(standin_vllm.alive) == 1
    release_rollout_engine(trainer)
    assert standin_vllm.alive == [] and trainer.vllm_generation.llm is None


def test_prompt_log_probs_on_an_engine_with_lora_go_one_request_at_a_time(standin_vllm):
    """vLLM maps one LoRA row per request when it computes prompt log-probs, so a batch of several fails in an
    engine with enable_lora (EngineDeadError): the backend sends them one at a time there, batched elsewhere."""
    from litseg_nb.config import LLMConfig

    class Scoring(StandInLLM):
        def generate(self, prompts, sampling, use_tqdm=False, lora_request=None):
            if self.settings.get("enable_lora") and len(prompts) > 1:
                raise RuntimeError("einsum(): subscript b has size 3 ... does not broadcast")
            self.calls.append((len(prompts), lora_request))
            return [types.SimpleNamespace(prompt_token_ids=p["prompt_token_ids"], num_cached_tokens=0, outputs=[],
                                          prompt_logprobs=[None] + [{t: types.SimpleNamespace(logprob=-1.0)}
                                                                    for t in p["prompt_token_ids"][1:]])
                    for p in prompts]

    sys.modules["vllm"].LLM = Scoring
    seqs = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    for lora, calls in (({"enable_lora": True, "max_lora_rank": 16}, [1, 1, 1]), ({}, [3])):
        b = make_backend(LLMConfig(backend="vllm", model="tiny-random", use_cache=False, engine=lora))
        assert [v for v, _ in b.token_logprobs_ex(seqs)] == [[-1.0] * 2, [-1.0], [-1.0] * 3]
        assert [n for n, _ in Scoring.alive[0].calls] == calls
        b.close()
