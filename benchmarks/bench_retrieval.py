"""Hybrid retrieval latency (dense + BM25 + RRF, no reranker) per question on a book-sized index.

Indexes Emma (GutenQA) as ~250-word chunks with the smoke embedding model, then times each of the
30 questions one by one: query embedding, FAISS search, BM25 search, fusion. Target: retrieval
(dense + sparse + fusion) < 50 ms per question. Run: ``.venv/bin/python benchmarks/bench_retrieval.py``.
"""
import statistics
import time

from litseg_nb.config import CorpusConfig, EmbeddingConfig
from litseg_nb.corpus import load_corpus
from litseg_nb.llm.embeddings import load_embedder
from litseg_nb.rag.index import rrf_fuse
from litseg_nb.rag.index import BookIndex


def main() -> None:
    book = next(b for b in load_corpus(CorpusConfig(datasets=("gutenqa",))) if b.questions)
    words = book.text.split()
    texts = [" ".join(words[i:i + 250]) for i in range(0, len(words), 250)]
    emb = load_embedder(EmbeddingConfig())
    t0 = time.perf_counter()
    idx = BookIndex.build(book.book_id, [str(i) for i in range(len(texts))], texts, emb.encode(texts, kind="passage"))
    print(f"{len(texts)} chunks indexed in {time.perf_counter() - t0:.1f} s (embeddings cached after the first run)")
    stages = {"embed query": [], "dense": [], "bm25": [], "fusion": []}
    for q in book.questions:
        t0 = time.perf_counter(); qe = emb.encode([q.question], kind="query")[0]
        t1 = time.perf_counter(); d = idx.dense_search(qe, 50)
        t2 = time.perf_counter(); s = idx.sparse_search(q.question, 50)
        t3 = time.perf_counter(); rrf_fuse([d, s], 60)
        t4 = time.perf_counter()
        for k, v in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            stages[k].append(1000 * v)
    for k, v in stages.items():
        print(f"{k:12s} median {statistics.median(v):7.2f} ms  max {max(v):7.2f} ms")
    total = [a + b + c for a, b, c in zip(stages["dense"], stages["bm25"], stages["fusion"])]
    print(f"hybrid retrieval (dense+bm25+fusion, no reranker): median {statistics.median(total):.2f} ms/question; "
          f"with query embedding: {statistics.median([t + e for t, e in zip(total, stages['embed query'])]):.2f} ms")


if __name__ == "__main__":  # spawned worker processes re-import this file
    main()
