"""The RAG evaluation pipeline of Appendix I.1, run for every chunker with the same fixed stages."""
from __future__ import annotations

import functools
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..chunk_sets import EvaluationError
from ..metrics.retrieval import is_relevant, normalize_for_match, summarize_scopes
from ..core.schema import Chunk
from ..core.prompts import load_prompt, render_prompt
from ..llm.base import SamplingParams, UsageTag
from ..llm.replies import answer_text
from .config import RagConfig
from .index import LibraryIndex, rrf_fuse, weighted_fuse, weighted_rrf_fuse
from .rerank import rerank

def answer_conversation(dataset: str, title: str, question: str, chunks: Sequence[str]) -> list[dict[str, str]]:
    """The paper's prompts (Appendix I.1.2): system = system prompt + " " + the dataset's answer instruction;
    user = the template with one ``Chunk:`` block per retrieved chunk, or without references."""
    key = "literaryqa" if dataset == "literaryqa" else "gutenqa"
    system = load_prompt("rag/system") + " " + load_prompt(f"rag/answer_instruction_{key}")
    if chunks:
        doc = "\nChunk: ".join(c.strip() for c in chunks)
        user = render_prompt("rag/user_with_reference", title=title, query=question, doc=doc)
    else:
        user = render_prompt("rag/user_no_reference", title=title, query=question)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def clean_answer(text: str) -> str:
    """First non-empty paragraph of the reply's answer, stripped (the prompt asks for one sentence);
    reasoning blocks are removed first (:func:`litseg_nb.llm.replies.answer_text`)."""
    return next((p.strip() for p in answer_text(text).strip().split("\n\n") if p.strip()), "")


def generate_answers(backend: Any, items: Sequence[dict[str, Any]], max_new_tokens: int, seed: int = 0,
                     tag: UsageTag = UsageTag("rag-generate", stage="generate")) -> list[str]:
    """``items``: dicts with dataset, title, question, chunks → one cleaned answer each (batched)."""
    convs = [answer_conversation(it["dataset"], it["title"], it["question"], it["chunks"]) for it in items]
    if not convs:
        return []
    gens = backend.chat(convs, SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, seed=seed), tag)
    return [clean_answer(g.text) for g in gens]


TUNED_MODES = ("hybrid-wrrf", "hybrid-linear")


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
        out.extend(EvalQuestion(q.qid, q.dataset or b.dataset, b.book_id, b.title, q.question, tuple(q.answers),
                                q.evidence) for q in qs)
    return out


def _covered_ranges(chunks: Sequence[Chunk]) -> dict[tuple[str, str], tuple[int, int]]:
    rng: dict[tuple[str, str], tuple[int, int]] = {}
    for c in chunks:
        if not c.spans or not c.unit_id:  # imported chunks that could not be aligned to the book
            continue
        lo, hi = min(s[0] for s in c.spans), max(s[1] for s in c.spans)
        old = rng.get((c.book_id, c.unit_id), (lo, hi))
        rng[(c.book_id, c.unit_id)] = (min(old[0], lo), max(old[1], hi))
    return rng


def common_units(chunk_sets: Mapping[str, Sequence[Chunk]]) -> list[tuple[str, str]]:
    """The ``(book_id, unit_id)`` units in which every chunk set has chunks (aligned chunks only), sorted."""
    if not chunk_sets:
        return []
    return sorted(set.intersection(*(set(_covered_ranges(cs)) for cs in chunk_sets.values())))


def questions_in_scope(questions: Sequence[EvalQuestion], chunk_sets: Mapping[str, Sequence[Chunk]],
                       books: Mapping[str, Any], scope: str = "common-units") -> tuple[list[EvalQuestion], dict[str, Any]]:
    """Questions every chunker can be fairly evaluated on, and a report of what was left out."""
    if not chunk_sets:
        raise EvaluationError("no chunk set to evaluate")
    empty = [m for m, cs in chunk_sets.items() if not cs]
    if empty:
        raise EvaluationError(f"chunk set(s) {empty} have no chunks for the evaluated books {sorted(books)}")
    if not questions:
        raise EvaluationError(f"the evaluated books {sorted(books)} have no questions")
    books_everywhere = set.intersection(*({c.book_id for c in cs} for cs in chunk_sets.values()))
    norm_books = {bid: normalize_for_match(books[bid].text) for bid in {q.book_id for q in questions if q.evidence}
                  if bid in books}
    not_in_text = [q for q in questions if q.evidence and q.book_id in norm_books
                   and normalize_for_match(q.evidence) not in norm_books[q.book_id]]
    ok = [q.book_id in books_everywhere for q in questions]
    units: dict[str, Any] = {}  # common-units: the units every set covers, which must hold a question's evidence
    if scope != "all":
        ranges = [_covered_ranges(cs) for cs in chunk_sets.values()]
        common = set.intersection(*(set(r) for r in ranges))
        unit_texts: dict[str, list[str]] = defaultdict(list)
        for key in common:
            lo, hi = ranges[0][key]
            unit_texts[key[0]].append(books[key[0]].text[lo:hi])
        missing_ev = {q.qid for q in not_in_text}
        for i, q in enumerate(questions):
            if q.evidence and q.qid not in missing_ev:
                ok[i] = ok[i] and any(is_relevant(t, q.evidence) for t in unit_texts.get(q.book_id, []))
        units = {"n_common_units": len(common), "common_units": sorted(common)}
    kept, dropped = [q for q, o in zip(questions, ok) if o], [q for q, o in zip(questions, ok) if not o]
    rep = {"scope": scope, "n_questions": len(kept), "n_dropped": len(dropped),
           "n_evidence_not_in_text": len(not_in_text), **units, "dropped_qids": [q.qid for q in dropped]}
    if not kept and scope == "all":
        raise EvaluationError(f"question_scope=all: no chunk set covers every book with questions "
                              f"(books covered by all sets: {sorted(books_everywhere)})")
    if not kept:
        per = {m: len(r) for m, r in zip(chunk_sets, ranges)}
        raise EvaluationError(
            f"question_scope=common-units keeps 0 of {len(questions)} questions: {len(common)} unit(s) are "
            f"covered by every chunk set (units per set: {per}); no question's evidence lies in them. "
            f"Use question_scope='all' or evaluate chunk sets that cover the same units.")
    return kept, rep


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

    def __init__(self, cfg: RagConfig, embedder: Any, backend: Any = None, reranker: Any = None):
        self.cfg = cfg
        self.embedder = embedder
        self.backend = backend
        self.reranker = reranker
        self.latency = LatencyRecorder()
        self.indices: dict[str, LibraryIndex] = {}
        self.hyde_text: dict[str, str] = {}
        self.n_hyde_empty = 0

    def build_indices(self, chunk_sets: Mapping[str, Sequence[Chunk]]) -> None:
        from tqdm.auto import tqdm

        for m, cs in tqdm(chunk_sets.items(), desc="index chunk sets"):
            t0 = time.perf_counter()
            lib = LibraryIndex.build(cs, self.embedder, k1=self.cfg.bm25_k1, b=self.cfg.bm25_b)
            self.latency.add(f"index build ({m})", time.perf_counter() - t0, len(cs))
            self.indices[m] = lib

    def prepare_hyde(self, questions: Sequence[EvalQuestion]) -> list[EvalQuestion]:
        """Hypothetical passages answering the first ``hyde_max_questions`` questions (HyDE, Gao et al. 2023) for
        dense retrieval; an empty generation falls back to the question (counted in ``n_hyde_empty``)."""
        if not self.cfg.hyde or self.backend is None:
            return []
        subset = list(questions[:self.cfg.hyde_max_questions or len(questions)])
        t0 = time.perf_counter()
        convs = [[{"role": "user", "content": render_prompt("rag/hyde", title=q.title, query=q.question)}]
                 for q in subset]
        params = SamplingParams(max_new_tokens=self.cfg.hyde_max_new_tokens, temperature=0.0, seed=self.cfg.seed)
        gens = self.backend.chat(convs, params, UsageTag("rag-hyde", stage="hyde")) if convs else []
        texts = [answer_text(g.text).strip() for g in gens]  # reasoning blocks removed
        self.latency.add("hyde generate", time.perf_counter() - t0, len(subset))
        self.n_hyde_empty += sum(not t for t in texts)
        self.hyde_text.update({q.qid: t or q.question for q, t in zip(subset, texts)})
        return subset

    def _fuse(self, dense, sparse):
        c = self.cfg
        if c.fusion == "rrf":  # else "weighted" (RagConfig checks the value)
            return rrf_fuse([dense, sparse], k=c.rrf_k)
        return weighted_fuse(dense, sparse, c.dense_weight)

    def _tuned_fuse(self, mode: str, dense, sparse, w: float):
        if mode == "hybrid-wrrf":  # else "hybrid-linear" (TUNED_MODES)
            return weighted_rrf_fuse(dense, sparse, w, k=self.cfg.rrf_k)
        return weighted_fuse(dense, sparse, w)

    def first_stage(self, idx: Any, query_emb: Any, query: str, record: bool = True):
        """``(dense, bm25, hybrid)`` rankings of one query over one book's index ``idx``: single retrievers
        ``retrieve_top_k`` deep, the fusion over ``dense_top_k``/``sparse_top_k``; ``record`` adds the seconds
        to :attr:`latency`."""
        c = self.cfg
        depth_d, depth_s = max(c.dense_top_k, c.retrieve_top_k), max(c.sparse_top_k, c.retrieve_top_k)
        t0 = time.perf_counter()
        dense = idx.dense_search(query_emb, depth_d)
        t1 = time.perf_counter()
        sparse = idx.sparse_search(query, depth_s)
        t2 = time.perf_counter()
        hybrid = self._fuse(dense[: c.dense_top_k], sparse[: c.sparse_top_k])
        t3 = time.perf_counter()
        if record:
            self.latency.add("dense search", t1 - t0)
            self.latency.add("sparse search (BM25)", t2 - t1)
            self.latency.add("fusion", t3 - t2)
        return dense, sparse, hybrid

    def retrieve(self, questions: Sequence[EvalQuestion], rerank_qids: set[str] = frozenset(),
                 rerank_methods: set[str] | None = None) -> list[dict[str, Any]]:
        """One row per (method, question, mode): ranked chunk indices (top ``retrieve_top_k``), the first
        relevant rank within them (``rank``) and in the full ranking of the chunk set (``rank_full``)."""
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
        depth_d = max(c.dense_top_k, c.retrieve_top_k)  # HyDE's dense ranking: as deep as first_stage's
        self._lists: dict[tuple[str, str], tuple[list, list, set[int]]] = {}
        for m, lib in tqdm(self.indices.items(), desc="retrieve"):
            for qi, q in enumerate(questions):
                if q.book_id not in lib.books:
                    continue
                idx = lib.book(q.book_id)  # the book-level filter
                n = len(idx)
                dense, sparse, hybrid = self.first_stage(idx, q_emb[qi], q.question)
                ranked = {"dense": dense, "bm25": sparse, "hybrid": hybrid}
                full: dict[str, list] = {}
                rel: set[int] | None = None
                if q.evidence:  # full rankings (every chunk) for full-rank MRR; not timed
                    rel = idx.relevant(q.evidence)
                    d_full, s_full = idx.dense_search(q_emb[qi], n), idx.sparse_search(q.question, n)
                    full = {"dense": d_full, "bm25": s_full,
                            "hybrid": _extend(hybrid, self._fuse(d_full, s_full))}
                    self._lists[(m, q.qid)] = (d_full, s_full, rel)
                if q.qid in h_emb:
                    ranked["dense+hyde"] = idx.dense_search(h_emb[q.qid], depth_d)
                    if q.evidence:
                        full["dense+hyde"] = idx.dense_search(h_emb[q.qid], n)
                if self.reranker is not None and q.qid in rerank_qids and (rerank_methods is None or m in rerank_methods):
                    t0 = time.perf_counter()  # the top rerank_depth of the hybrid rescored, the rest keeps its order
                    ranked["hybrid+rerank"] = rerank(hybrid, idx.texts, self.reranker, q.title, q.question,
                                                     c.rerank_depth)
                    self.latency.add("rerank", time.perf_counter() - t0)
                    if q.evidence:
                        full["hybrid+rerank"] = _extend(ranked["hybrid+rerank"], full["hybrid"])
                for mode, lst in ranked.items():
                    top = [i for i, _ in lst[: c.retrieve_top_k]]
                    rows.append(self._row(q, m, mode, idx, top, rel, full.get(mode)))
        return rows

    def _row(self, q: EvalQuestion, method: str, mode: str, idx: Any, top: Sequence[int], rel: set[int] | None,
             full: Sequence[tuple[int, float]] | None) -> dict[str, Any]:
        rank = rank_full = None
        if rel is not None:
            rank = next((r for r, d in enumerate(top, 1) if d in rel), None)
            rank_full = next((r for r, (d, _) in enumerate(full or (), 1) if d in rel), None)
        return {"dataset": q.dataset, "method": method, "mode": mode, "qid": q.qid, "book_id": q.book_id,
                "rank": rank, "rank_full": rank_full, "answerable": None if rel is None else bool(rel),
                "top": list(top), "top_chunk_ids": [idx.chunk_ids[i] for i in top],
                "evidence": q.evidence, "relevant": sorted(rel) if rel is not None else None}

    def tuned_fusion_rows(self, questions: Sequence[EvalQuestion]) -> list[dict[str, Any]]:
        """Rows of the weighted fusion modes, each fold scored with the weight chosen on the other folds (after
        :meth:`retrieve`); the weights go to :attr:`fusion_weights`."""
        c = self.cfg
        if c.fusion_dev_folds < 2:
            raise ValueError("fusion_dev_folds must be >= 2 (a weight is never chosen on the questions it scores)")
        order = sorted((q for q in questions if q.evidence), key=lambda q: q.qid)
        random.Random(f"{c.seed}-fusion-folds").shuffle(order)
        fold = {q.qid: i % c.fusion_dev_folds for i, q in enumerate(order)}
        rows: list[dict[str, Any]] = []
        self.fusion_weights = getattr(self, "fusion_weights", [])
        for m, lib in self.indices.items():
            keys = [q for q in order if (m, q.qid) in self._lists]
            if len(keys) < c.fusion_dev_folds or len({fold[q.qid] for q in keys}) < c.fusion_dev_folds:
                # too few questions to choose a weight on other questions than the scored ones
                self.fusion_weights.extend({"method": m, "mode": mode, "fold": None, "dense_weight": None,
                                            "dev_questions": 0, "scored_questions": 0,
                                            "skipped": f"{len(keys)} question(s): fewer than the "
                                                       f"{c.fusion_dev_folds} folds"} for mode in TUNED_MODES)
                continue
            for mode in TUNED_MODES:
                @functools.cache
                def rr(qid: str, w: float) -> float:
                    d, s_, rel = self._lists[(m, qid)]
                    fused = self._tuned_fuse(mode, d[: c.dense_top_k], s_[: c.sparse_top_k], w)[: c.retrieve_top_k]
                    r = next((i for i, (doc, _) in enumerate(fused, 1) if doc in rel), None)
                    return 0.0 if r is None else 1.0 / r

                for f in range(c.fusion_dev_folds):  # every fold holds questions (checked above)
                    dev = [q.qid for q in keys if fold[q.qid] != f]
                    test = [q for q in keys if fold[q.qid] == f]
                    scores = {w: sum(rr(k, w) for k in dev) / len(dev) for w in c.fusion_weight_grid}
                    w = max(c.fusion_weight_grid, key=lambda w: (round(scores[w], 12), -abs(w - 0.5), -w))
                    self.fusion_weights.append({"method": m, "mode": mode, "fold": f, "dense_weight": w,
                                                "dev_questions": len(dev), "dev_MRR@k": scores[w],
                                                "scored_questions": len(test)})
                    for q in test:
                        d, s_, rel = self._lists[(m, q.qid)]
                        idx = lib.book(q.book_id)
                        cand = self._tuned_fuse(mode, d[: c.dense_top_k], s_[: c.sparse_top_k], w)
                        top = [i for i, _ in cand[: c.retrieve_top_k]]
                        row = self._row(q, m, mode, idx, top, rel, _extend(cand, self._tuned_fuse(mode, d, s_, w)))
                        row["dense_weight"] = w
                        rows.append(row)
        return rows

    def contexts(self, method: str, book_id: str, top: Sequence[int]) -> list[str]:
        idx = self.indices[method].book(book_id)
        k, cap = self.cfg.context_top_k, self.cfg.max_context_chars_per_chunk
        return [idx.texts[i][:cap] if cap else idx.texts[i] for i in top[:k]]


def _extend(head: Sequence[tuple[int, float]], full: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """The full ranking of a mode: its configured ranking (candidate lists fused, reranked), then every
    other chunk in the order of the same fusion over the complete lists."""
    seen = {d for d, _ in head}
    return list(head) + [x for x in full if x[0] not in seen]


def retrieval_table(rows: Sequence[Mapping[str, Any]], qids: set[str] | None = None, k: int = 20):
    """Per (dataset, method, mode), GutenQA only: ``n_questions``, ``n_no_relevant_chunk``, ``n_answerable``,
    ``MRR@k``, ``MRR_full``, Hit@k, DCG@k, Recall@k over all questions in scope and with suffix ``_answerable``
    (:func:`summarize_scopes`); ``qids`` restricts the questions; ``MRR`` aliases ``MRR@k``."""
    import pandas as pd

    df = pd.DataFrame([r for r in rows if r["answerable"] is not None and (qids is None or r["qid"] in qids)])
    out = []
    if df.empty:
        return pd.DataFrame()

    def _r(v):
        return None if v is None or pd.isna(v) else int(v)

    for (ds, m, mode), g in df.groupby(["dataset", "method", "mode"], sort=False):
        s = summarize_scopes([_r(r) for r in g["rank"]], [bool(a) for a in g["answerable"]],
                             [_r(r) for r in g["rank_full"]], k=k)
        rec = {"dataset": ds, "method": m, "mode": mode, **s, "MRR": s[f"MRR@{k}"]}
        if "dense_weight" in g and g["dense_weight"].notna().any():
            rec["dense_weights"] = ",".join(f"{w:g}" for w in sorted(set(g["dense_weight"].dropna())))
        out.append(rec)
    return pd.DataFrame(out)


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
