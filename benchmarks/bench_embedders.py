"""MiniLM on the CPU: the torch-free ``numpy`` backend against ``sentence-transformers`` (torch).

Encodes Emma (GutenQA) as 200-word chunks, cut at MiniLM's 256 tokens as both backends cut them, with one
backend per process (no cache), and prints chunks per second and, with ``--check``, the largest difference
between the two backends' vectors. Run, one backend at a time so their timings can be compared in turn:

    .venv/bin/python benchmarks/bench_embedders.py numpy
    .venv/bin/python benchmarks/bench_embedders.py sentence-transformers
    .venv/bin/python benchmarks/bench_embedders.py numpy --check
"""
import sys
import time

import numpy as np

from litseg_nb.config import CorpusConfig, EmbeddingConfig
from litseg_nb.corpus import load_corpus
from litseg_nb.llm.embeddings import load_embedder


def chunks(n: int = 256) -> list[str]:
    book = next(b for b in load_corpus(CorpusConfig(datasets=("gutenqa",))) if b.questions)
    words = book.text.split()
    return [" ".join(words[i:i + 200]) for i in range(0, 200 * n, 200)]


def main(backend: str, check: bool) -> None:
    texts = chunks()
    emb = load_embedder(EmbeddingConfig(backend=backend), use_cache=False)
    t0 = time.perf_counter()
    vecs = emb.encode(texts)
    dt = time.perf_counter() - t0
    print(f"{backend}: {len(texts)} chunks in {dt:.1f} s ({len(texts) / dt:.1f} chunks/s)")
    if check:
        other = "sentence-transformers" if backend == "numpy" else "numpy"
        ref = load_embedder(EmbeddingConfig(backend=other), use_cache=False).encode(texts)
        print(f"largest |difference| against {other}: {np.abs(vecs - ref).max():.2e}")


if __name__ == "__main__":
    main(sys.argv[1], "--check" in sys.argv[2:])
