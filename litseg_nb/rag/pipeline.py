"""The RAG evaluation pipeline of Appendix I.1, run for every chunker with the same fixed stages.

Notebook 05 calls, in order:

1. :func:`discover_chunk_sets` – which ``outputs/<profile>/artifacts/chunks/<method>.jsonl`` exist
   (and which expected ones are missing);
2. :func:`evaluation_questions` – GutenQA questions (with ``Chunk Must Contain``) and LiteraryQA
   questions (capped per book) of the loaded books;
3. :func:`questions_in_scope` – with ``question_scope="common-units"`` only questions whose evidence
   lies inside units that *every* evaluated chunker covered (LLM chunkers may cover only a few
   chapters in the small profiles; comparing them on different question sets would be unfair);
4. :class:`RagEvaluator` – builds/saves the per-book indices, retrieves (dense, BM25, hybrid, dense
   with HyDE, hybrid + reranker), records per-stage latency, generates answers.
"""
from __future__ import annotations

import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..metrics.retrieval import first_relevant_rank, is_relevant, normalize_for_match
from ..schema import Chunk, load_chunks
from .config import RagConfig
from .fusion import rrf_fuse, weighted_fuse
from .index import LibraryIndex
from .rerank import rerank

METHOD_ORDER = ("token", "recursive", "semantic", "paragraph", "perplexity", "margin", "lumber", "lumber+merge",
                "perplexity+merge", "margin+merge", "proposition", "litseg", "litseg-lite")
MODES = ("dense", "bm25", "hybrid", "dense+hyde", "hybrid+rerank")


def discover_chunk_sets(profile: str, methods: Sequence[str] = ()) -> tuple[dict[str, Path], list[str]]:
    """``({method: path}, missing)`` for the chunk artifacts of ``profile`` (all known methods if empty)."""
    from ..artifacts import artifact_path

    folder = artifact_path(profile, "chunks", "x").parent
    found = {p.stem: p for p in sorted(folder.glob("*.jsonl"))}
    wanted = list(methods) or list(METHOD_ORDER)
    present = {m: found[m] for m in wanted if m in found}
    if not methods:  # also evaluate unexpected method names that exist
        present.update({m: p for m, p in found.items() if m not in present})
    missing = [m for m in wanted if m not in found]
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    return dict(sorted(present.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))), missing


def load_chunk_sets(paths: Mapping[str, Path], book_ids: Iterable[str]) -> dict[str, list[Chunk]]:
    """Chunks of the given books per method; a method with no chunk for a book is an error."""
    wanted = set(book_ids)
    out = {}
    for m, p in paths.items():
        cs = [c for c in load_chunks(p) if c.book_id in wanted]
        if not cs:
            raise ValueError(f"chunk set {p} has no chunks for the evaluated books {sorted(wanted)}")
        out[m] = cs
    return out


@dataclass
class EvalQuestion:
    qid: str
    dataset: str
    book_id: str
    title: str
    question: str
    answers: tuple[str, ...]
    evidence: str | None


def evaluation_questions(books: Sequence[Any], literaryqa_max_questions: int = 0, seed: int = 0) -> list[EvalQuestion]:
    """GutenQA questions with evidence (all) and LiteraryQA questions (capped per book, seeded sample)."""
    out = []
    for b in books:
        qs = list(b.questions)
        if b.dataset == "literaryqa" and literaryqa_max_questions and len(qs) > literaryqa_max_questions:
            qs = random.Random(f"{seed}-{b.book_id}").sample(qs, literaryqa_max_questions)
        for q in qs:
            out.append(EvalQuestion(q.qid, q.dataset or b.dataset, b.book_id, b.title, q.question,
                                    tuple(q.answers), q.evidence))
    return out


def _covered_ranges(chunks: Sequence[Chunk]) -> dict[tuple[str, str], tuple[int, int]]:
    rng: dict[tuple[str, str], list[int]] = {}
    for c in chunks:
        lo, hi = min(s[0] for s in c.spans), max(s[1] for s in c.spans)
        r = rng.setdefault((c.book_id, c.unit_id), [lo, hi])
        r[0], r[1] = min(r[0], lo), max(r[1], hi)
    return {k: (v[0], v[1]) for k, v in rng.items()}


def questions_in_scope(questions: Sequence[EvalQuestion], chunk_sets: Mapping[str, Sequence[Chunk]],
                       books: Mapping[str, Any], scope: str = "common-units") -> tuple[list[EvalQuestion], dict[str, Any]]:
    """Questions every chunker can be fairly evaluated on, and a report of what was left out.

    ``common-units``: the book-text range of a unit counts when every chunk set has chunks in it; a
    GutenQA question is kept when its evidence occurs in one such unit; a LiteraryQA question (no
    evidence) is kept when every chunk set covers its book. ``all``: every question.
    """
    if scope == "all":
        return list(questions), {"scope": "all", "n_questions": len(questions), "n_dropped": 0}
    if scope != "common-units":
        raise ValueError(f"unknown question_scope {scope!r} (common-units | all)")
    ranges = [_covered_ranges(cs) for cs in chunk_sets.values()]
    common = set.intersection(*(set(r) for r in ranges)) if ranges else set()
    unit_texts: dict[str, list[str]] = defaultdict(list)
    for key in common:
        lo, hi = ranges[0][key]
        unit_texts[key[0]].append(books[key[0]].text[lo:hi])
    books_everywhere = set.intersection(*({c.book_id for c in cs} for cs in chunk_sets.values())) if chunk_sets else set()
    kept, dropped = [], []
    for q in questions:
        if q.evidence:
            ok = any(is_relevant(t, q.evidence) for t in unit_texts.get(q.book_id, []))
        else:
            ok = q.book_id in books_everywhere
        (kept if ok else dropped).append(q)
    return kept, {"scope": scope, "n_questions": len(kept), "n_dropped": len(dropped),
                  "n_common_units": len(common), "common_units": sorted(common),
                  "dropped_qids": [q.qid for q in dropped]}


@dataclass
class LatencyRecorder:
    """Seconds per stage per question (``add(stage, seconds, n)`` spreads a batched call over n)."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, stage: str, seconds: float, n: int = 1) -> None:
        self.seconds[stage] += seconds
        self.counts[stage] += n

    def frame(self):
        import pandas as pd

        rows = [{"stage": s, "total_s": self.seconds[s], "n": self.counts[s],
                 "ms_per_question": 1000 * self.seconds[s] / max(1, self.counts[s])} for s in self.seconds]
        return pd.DataFrame(rows, columns=["stage", "total_s", "n", "ms_per_question"])


def evidence_window(book_text: str, evidence: str, chars: int) -> str | None:
    """``+/- chars`` characters of book text around the evidence (quote/space/case tolerant match)."""
    words = normalize_for_match(evidence).split()
    if not words:
        return None
    quote = "[\"'\u2018\u2019\u201c\u201d]"
    parts = [re.sub(r"[\"']", quote, re.escape(w).replace("\\-", "[-\u2013\u2014]")) for w in words]
    m = re.search(r"\s+".join(parts), book_text, flags=re.I)
    if not m:
        return None
    return book_text[max(0, m.start() - chars):m.end() + chars]


class RagEvaluator:
    """Retrieval for one profile's chunk sets with fixed stages; see the module docstring."""

    def __init__(self, cfg: RagConfig, embedder: Any, backend: Any = None, reranker: Any = None,
                 index_root: Path | None = None):
        self.cfg = cfg
        self.embedder = embedder
        self.backend = backend
        self.reranker = reranker
        self.index_root = index_root
        self.latency = LatencyRecorder()
        self.indices: dict[str, LibraryIndex] = {}
        self.hyde_text: dict[str, str] = {}
        self.n_hyde_empty = 0

    # ------------------------------------------------------------------ indexing
    def build_indices(self, chunk_sets: Mapping[str, Sequence[Chunk]]) -> None:
        from tqdm.auto import tqdm

        for m, cs in tqdm(chunk_sets.items(), desc="index chunk sets"):
            t0 = time.perf_counter()
            lib = LibraryIndex.build(cs, self.embedder, k1=self.cfg.bm25_k1, b=self.cfg.bm25_b)
            self.latency.add(f"index build ({m})", time.perf_counter() - t0, len(cs))
            if self.index_root is not None:
                lib.save(self.index_root / re.sub(r"[^A-Za-z0-9_.-]+", "_", m))
            self.indices[m] = lib

    # ------------------------------------------------------------------ HyDE
    def prepare_hyde(self, questions: Sequence[EvalQuestion]) -> list[EvalQuestion]:
        from .generate import hyde_passages

        if not self.cfg.hyde or self.backend is None:
            return []
        n = self.cfg.hyde_max_questions or len(questions)
        subset = list(questions[:n])
        t0 = time.perf_counter()
        texts = hyde_passages(self.backend, [q.title for q in subset], [q.question for q in subset],
                              self.cfg.hyde_max_new_tokens, self.cfg.seed)
        self.latency.add("hyde generate", time.perf_counter() - t0, len(subset))
        for q, t in zip(subset, texts):
            if not t:
                self.n_hyde_empty += 1
            self.hyde_text[q.qid] = t or q.question
        return subset

    # ------------------------------------------------------------------ retrieval
    def _fuse(self, dense, sparse):
        c = self.cfg
        if c.fusion == "rrf":
            return rrf_fuse([dense, sparse], k=c.rrf_k)
        if c.fusion == "weighted":
            return weighted_fuse(dense, sparse, c.dense_weight)
        raise ValueError(f"unknown fusion {c.fusion!r} (rrf | weighted)")

    def retrieve(self, questions: Sequence[EvalQuestion], rerank_qids: set[str] = frozenset(),
                 rerank_methods: set[str] | None = None) -> list[dict[str, Any]]:
        """One row per (method, question, mode) with the ranked chunk indices and the first relevant rank."""
        from tqdm.auto import tqdm

        c = self.cfg
        if not questions:
            return []
        t0 = time.perf_counter()
        q_emb = self.embedder.encode([q.question for q in questions], kind="query")
        self.latency.add("embed query", time.perf_counter() - t0, len(questions))
        hyde_q = [q for q in questions if q.qid in self.hyde_text]
        h_emb = {}
        if hyde_q:
            t0 = time.perf_counter()
            arr = self.embedder.encode([self.hyde_text[q.qid] for q in hyde_q], kind="query")
            self.latency.add("embed HyDE passage", time.perf_counter() - t0, len(hyde_q))
            h_emb = {q.qid: arr[i] for i, q in enumerate(hyde_q)}
        rows = []
        for m, lib in tqdm(self.indices.items(), desc="retrieve"):
            for qi, q in enumerate(questions):
                if q.book_id not in lib.books:
                    continue
                idx = lib.book(q.book_id)  # the book-level filter
                t0 = time.perf_counter()
                dense = idx.dense_search(q_emb[qi], c.dense_top_k)
                t1 = time.perf_counter()
                sparse = idx.sparse_search(q.question, c.sparse_top_k)
                t2 = time.perf_counter()
                hybrid = self._fuse(dense, sparse)
                t3 = time.perf_counter()
                self.latency.add("dense search", t1 - t0)
                self.latency.add("sparse search (BM25)", t2 - t1)
                self.latency.add("fusion", t3 - t2)
                ranked = {"dense": dense, "bm25": sparse, "hybrid": hybrid}
                if q.qid in h_emb:
                    ranked["dense+hyde"] = idx.dense_search(h_emb[q.qid], c.dense_top_k)
                if self.reranker is not None and q.qid in rerank_qids and (rerank_methods is None or m in rerank_methods):
                    t4 = time.perf_counter()
                    ranked["hybrid+rerank"] = rerank(hybrid, idx.texts, self.reranker, q.title, q.question,
                                                     c.rerank_candidates)
                    self.latency.add("rerank", time.perf_counter() - t4)
                answerable = None
                if q.evidence:
                    answerable = any(is_relevant(t, q.evidence) for t in idx.texts)
                for mode, lst in ranked.items():
                    top = [i for i, _ in lst[: c.retrieve_top_k]]
                    rank = first_relevant_rank([idx.texts[i] for i in top], q.evidence) if q.evidence else None
                    rows.append({"dataset": q.dataset, "method": m, "mode": mode, "qid": q.qid, "book_id": q.book_id,
                                 "rank": rank, "answerable": answerable, "top": top,
                                 "top_chunk_ids": [idx.chunk_ids[i] for i in top]})
        return rows

    def contexts(self, method: str, book_id: str, top: Sequence[int]) -> list[str]:
        idx = self.indices[method].book(book_id)
        k, cap = self.cfg.context_top_k, self.cfg.max_context_chars_per_chunk
        return [idx.texts[i][:cap] if cap else idx.texts[i] for i in top[:k]]


def retrieval_table(rows: Sequence[Mapping[str, Any]]):
    """Per (dataset, method, mode): MRR, Hit@k, DCG@k, Recall@k, counts (GutenQA rows only)."""
    import pandas as pd

    from ..metrics.retrieval import summarize_retrieval

    df = pd.DataFrame([r for r in rows if r["answerable"] is not None])
    out = []
    if df.empty:
        return pd.DataFrame()
    for (ds, m, mode), g in df.groupby(["dataset", "method", "mode"], sort=False):
        s = summarize_retrieval([None if pd.isna(r) else int(r) for r in g["rank"]], list(g["answerable"]))
        out.append({"dataset": ds, "method": m, "mode": mode, **s})
    return pd.DataFrame(out)


def final_ranking(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (method, qid): the reranked ranking where it exists, else the hybrid one."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["method"], r["qid"])
        if r["mode"] == "hybrid+rerank" or (r["mode"] == "hybrid" and key not in best):
            best[key] = r
    return best


def select_subset(questions: Sequence[EvalQuestion], n_per_dataset: int, seed: int = 0) -> list[EvalQuestion]:
    """Up to ``n_per_dataset`` questions per dataset (seeded, order preserved); 0 = all."""
    if not n_per_dataset:
        return list(questions)
    by_ds: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        by_ds[q.dataset].append(q)
    keep = set()
    for ds, qs in by_ds.items():
        pick = random.Random(f"{seed}-{ds}").sample(range(len(qs)), min(n_per_dataset, len(qs)))
        keep.update(qs[i].qid for i in pick)
    return [q for q in questions if q.qid in keep]


def as_float_ranks(values: Iterable[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values])
