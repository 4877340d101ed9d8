"""Notebook 05's steps after retrieval: answers, lexical metrics, RAGAS, pairwise judge, paper-shaped tables."""
from __future__ import annotations

import random
import re
import textwrap
import time
from typing import Any, Mapping, Sequence

import pandas as pd

from ..llm.base import UsageTag
from ..chunk_sets import EvaluationError
from ..core.schema import Chunk
from ..core.artifacts import stacked_text_figure
from ..litseg.validate import template_echo
from ..core.display import MAX_SERIES, left_out_note, pick_groups
from .pipeline import (EvalQuestion, RagEvaluator, common_units, evaluation_questions, evidence_window,
                       generate_answers, questions_in_scope, retrieval_table, select_subset)
from ..metrics.generation import generation_scores, ragas_scores
from ..metrics.pairwise import (BOOK_POLICIES, book_judge_context, judge_context_budget, judge_pairs,
                                pairwise_win_rate)
from ..metrics.retrieval import (span_relevant, is_relevant, chunk_source_spans, evidence_char_spans,
                                 spans_cover, normalize_for_match)
from ..chunkers.config import BaselinesConfig
from ..chunkers.llm_chunkers import lumber_chunks_batch
from ..llm import make_backend
from . import rerank


def generate_for_subset(ev: RagEvaluator, questions: Sequence[EvalQuestion], rows: Sequence[Mapping[str, Any]],
                        methods: Sequence[str]) -> pd.DataFrame:
    """Answers of every method in ``methods`` for ``questions`` (contexts = final ranking's top chunks)."""
    best: dict[tuple[str, str], Mapping[str, Any]] = {}  # the reranked ranking where it exists, else the hybrid one
    for r in rows:
        if r["mode"] == "hybrid+rerank" or (r["mode"] == "hybrid" and (r["method"], r["qid"]) not in best):
            best[(r["method"], r["qid"])] = r
    items, meta = [], []
    for m in methods:
        for q in questions:
            r = best.get((m, q.qid))
            if r is None:
                continue
            ctx = ev.contexts(m, q.book_id, r["top"])
            items.append({"dataset": q.dataset, "title": q.title, "question": q.question, "chunks": ctx})
            meta.append((m, q, ctx, r["mode"], list(r["top_chunk_ids"][:len(ctx)])))
    t0 = time.perf_counter()
    answers = generate_answers(ev.backend, items, ev.cfg.answer_max_new_tokens, ev.cfg.seed)
    ev.latency.add("generate", time.perf_counter() - t0, len(items))
    return pd.DataFrame([{"dataset": q.dataset, "method": m, "qid": q.qid, "book_id": q.book_id,
                          "question": q.question, "reference": q.answers[0] if q.answers else "", "answer": a,
                          "contexts": ctx, "context_chunk_ids": ids, "ranking": mode, "empty_answer": not a.strip(),
                          **generation_scores(a, list(q.answers) or [""])}
                         for (m, q, ctx, mode, ids), a in zip(meta, answers)])


def add_ragas(backend: Any, gen: pd.DataFrame, n_per_dataset: int, seed: int, max_new_tokens: int,
              retries: int = 5) -> pd.DataFrame:
    """CR and AA columns for up to ``n_per_dataset`` questions per dataset (others NaN, ``ragas_scored`` False)."""
    gen = gen.copy()
    gen["context_relevance"], gen["answer_accuracy"], gen["ragas_scored"] = float("nan"), float("nan"), False
    gen["ragas_unrated_CR"], gen["ragas_unrated_AA"] = False, False
    if gen.empty:
        return gen
    keep = set()
    for ds, g in gen.groupby("dataset"):
        qids = sorted(set(g.qid))
        if n_per_dataset:
            qids = sorted(random.Random(f"{seed}-ragas-{ds}").sample(qids, min(n_per_dataset, len(qids))))
        keep.update((ds, q) for q in qids)
    idx = [i for i, r in gen.iterrows() if (r.dataset, r.qid) in keep]
    samples = [{"question": gen.at[i, "question"], "contexts": gen.at[i, "contexts"], "answer": gen.at[i, "answer"],
                "reference": gen.at[i, "reference"]} for i in idx]
    scores = ragas_scores(backend, samples, max_new_tokens, retries)
    for i, s in zip(idx, scores):
        gen.at[i, "context_relevance"], gen.at[i, "answer_accuracy"] = s["context_relevance"], s["answer_accuracy"]
        gen.at[i, "ragas_scored"] = True
        # no rating after ragas' retries: NaN, left out of the means and counted (n_ragas_unrated_*)
        gen.at[i, "ragas_unrated_CR"] = s["context_relevance"] != s["context_relevance"]
        gen.at[i, "ragas_unrated_AA"] = s["answer_accuracy"] != s["answer_accuracy"]
    return gen


PAIRWISE_CONTEXT_NOTE = ("judge context: GutenQA +/-500 chars around the evidence; LiteraryQA the whole book, "
                         "else the chapters holding either system's chunks (n_context_* in 05_pairwise)")


def pairwise_judge_note(cfg: Any, pair: pd.DataFrame) -> str:
    """The pairwise judge named in a table label: model, backend, context, and how many LiteraryQA pairs
    saw the whole book (GutenQA pairs see +/-``pairwise_context_chars`` around the evidence by design)."""
    j = cfg.judge_llm
    note = f"{j.model} ({j.backend}, context {j.max_model_len:,} tokens)"
    col = f"n_context_{BOOK_POLICIES[0]}"
    if not pair.empty and "dataset" in pair:
        lq = pair[pair["dataset"] == "literaryqa"]
        if len(lq) and col in lq:
            note += f"; LiteraryQA pairs that saw the whole book: {int(lq[col].sum())} of {int(lq['n_pairs'].sum())}"
    return note


def pairwise_vs_target(backend: Any, gen: pd.DataFrame, books: Mapping[str, Any], questions: Sequence[EvalQuestion],
                       target: str, n_per_dataset: int, context_chars: int, max_new_tokens: int, seed: int,
                       chunk_sets: Mapping[str, Sequence[Chunk]] | None = None,
                       max_model_len: int = 0, collect: list | None = None,
                       book_max_tokens: int = 0) -> pd.DataFrame:
    """Win rate of ``target`` against every other method by the B.2 LLM judge, per dataset."""
    unit_of = {(m, c.book_id, c.chunk_id): c.unit_id for m, cs in (chunk_sets or {}).items() for c in cs}
    if gen.empty or target not in set(gen.method):
        return pd.DataFrame()
    qmap = {q.qid: q for q in questions}
    subset = {q.qid for q in select_subset([qmap[x] for x in sorted(set(gen.qid)) if x in qmap], n_per_dataset, seed)}
    ans = {(r.method, r.qid): r for r in gen.itertuples()}
    rows = []
    for other in sorted(set(gen.method) - {target}):
        items = []
        for qid in sorted(subset):
            a, b = ans.get((target, qid)), ans.get((other, qid))
            if a is None or b is None:
                continue
            q = qmap[qid]
            ctx = evidence_window(books[q.book_id].text, q.evidence, context_chars) if q.evidence else None
            policy = f"+/-{context_chars} characters around the evidence"
            rebuild = {}  # what rebuilds a book context for a reader with a shorter context (the B.2 annotators)
            if ctx is None:  # LiteraryQA (no evidence span): the source book, or the stated excerpt
                # capped by a profile's RagConfig.pairwise_book_max_tokens (0 = the judge's context only)
                budget = min(judge_context_budget(backend.count_tokens, max_model_len, max_new_tokens, q.question,
                                                  a.reference, a.answer, b.answer), book_max_tokens or max_model_len)
                units = [[unit_of.get((m, q.book_id, cid)) for cid in getattr(r, "context_chunk_ids", ())]
                         for m, r in ((target, a), (other, b))]
                rebuild = {"book_id": q.book_id, "units_a": [u for u in units[0] if u],
                           "units_b": [u for u in units[1] if u], "chunks_a": list(a.contexts),
                           "chunks_b": list(b.contexts)}
                ctx, policy = book_judge_context(books[q.book_id], rebuild["units_a"], rebuild["units_b"],
                                                 rebuild["chunks_a"], rebuild["chunks_b"], backend.count_tokens, budget)
            items.append({"qid": qid, "context": ctx, "question": q.question, "reference": a.reference,
                          "target_answer": a.answer, "other_answer": b.answer, "policy": policy, "dataset": q.dataset,
                          **rebuild})
        if not items:
            continue
        if collect is not None:
            collect.extend({**it, "target": target, "opponent": other} for it in items)
        res = judge_pairs(backend, items, max_new_tokens=max_new_tokens, seed=seed,
                          tag=UsageTag("rag-pairwise-judge", stage="pairwise-judge"))
        for ds in sorted({it["dataset"] for it in items}):
            vs = [r["verdict"] for r, it in zip(res, items) if it["dataset"] == ds]
            pol = [it["policy"] for it in items if it["dataset"] == ds]
            valid = [[v] for v in vs if v != "invalid"]
            wr = pairwise_win_rate(valid) if valid else {"win_rate": float("nan")}
            counts = ({f"n_context_{p}": pol.count(p) for p in BOOK_POLICIES} if ds == "literaryqa"
                      else {"context": pol[0]})
            counts["n_saw_whole_book"] = pol.count(BOOK_POLICIES[0])
            rows.append({"dataset": ds, "target": target, "opponent": other, "n_pairs": len(vs),
                         "n_invalid": len(vs) - len(valid), **wr, **counts})
    return pd.DataFrame(rows)


T3_COLS = ["n_questions", "n_no_relevant_chunk", "n_answerable", "MRR@20", "MRR_full", "Hit@1", "Hit@5", "Hit@10",
           "MRR@20_answerable", "MRR_full_answerable", "Hit@1_answerable", "Hit@5_answerable", "Hit@10_answerable"]
RERANK_LABEL = "hybrid+rerank (paper configuration, App. I.1)"
PRE_RERANK_LABEL = "hybrid before reranking"


def table3(retrieval: pd.DataFrame, gen: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Paper Table 3 shape for one ranking mode: dataset, method, CR, MRR@20 and full-rank MRR, H@1/5/10,
    both question scopes and their counts."""
    r = retrieval[retrieval["mode"] == mode].copy() if not retrieval.empty else pd.DataFrame(columns=["dataset", "method"])
    r = r[[c for c in ["dataset", "method", *T3_COLS] if c in r.columns]]
    if not gen.empty and "ragas_scored" in gen:
        g = gen[gen.ragas_scored]
        agg = {"CR": ("context_relevance", "mean"), "n_ragas": ("ragas_scored", "sum")}
        if "ragas_unrated_CR" in g:
            agg["n_ragas_unrated_CR"] = ("ragas_unrated_CR", "sum")
        cr = g.groupby(["dataset", "method"]).agg(**agg).reset_index()
        r = cr.merge(r, on=["dataset", "method"], how="outer") if not r.empty else cr
    return r


def table3_reranked(rows: Sequence[Mapping[str, Any]], gen: pd.DataFrame, k: int = 20) -> pd.DataFrame:
    """Table 3 as the paper computes it (App. I.1: the reranked ranking) with the pre-rerank hybrid
    ranking of the *same questions* beside it; column ``ranking`` labels each row."""
    ret = retrieval_table(rows, qids={r["qid"] for r in rows if r["mode"] == "hybrid+rerank"}, k=k)
    if ret.empty:
        return ret
    parts, rer = [], {r["method"] for r in rows if r["mode"] == "hybrid+rerank"}
    for mode, label in (("hybrid+rerank", RERANK_LABEL), ("hybrid", PRE_RERANK_LABEL)):
        t = table3(ret, gen, mode)
        t = t[t["method"].isin(rer)]
        t.insert(2, "ranking", label)
        parts.append(t)
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["dataset", "method", "ranking"], kind="stable", ignore_index=True)


def table3_scope(cfg: Any, books: Sequence[Any], chunk_sets: Mapping[str, Sequence[Chunk]], seed: int = 0
                 ) -> tuple[list[EvalQuestion], dict[str, Any], dict[str, list[Chunk]]]:
    """Table 3's ``(questions, scope report, chunk sets)``, as notebook 05 builds them and 07 reuses them: with
    ``common-units`` every chunk set is restricted to the units all of them cover."""
    book_by_id = {b.book_id: b for b in books}
    questions = evaluation_questions(books, cfg.literaryqa_max_questions, seed)
    questions, scope = questions_in_scope(questions, chunk_sets, book_by_id, cfg.question_scope)
    sets = {m: list(cs) for m, cs in chunk_sets.items()}
    if cfg.question_scope == "common-units":
        sets = restrict_to_units(sets, set(scope["common_units"]))
    return questions, scope, sets


def table3_evaluator(cfg: Any, embedder: Any, backend: Any) -> RagEvaluator:
    """The evaluator of Table 3 (App. I.1): ``cfg``'s fusion and its reranker (``cfg.reranker``)."""
    scorer = rerank.make_reranker(cfg.reranker, backend, cfg.reranker_model, cfg.embedding.device,
                           cfg.max_context_chars_per_chunk, max_length=cfg.reranker_max_length)
    return RagEvaluator(cfg, embedder, backend, scorer)


def table3_final(rows: Sequence[Mapping[str, Any]], gen: pd.DataFrame, k: int = 20) -> pd.DataFrame:
    """Table 3 as reported: the reranked ranking where questions were reranked (App. I.1), else the
    hybrid ranking over every question in scope; column ``ranking`` says which."""
    t = table3_reranked(rows, gen, k=k)
    if not t.empty:
        return t[t["ranking"] == RERANK_LABEL].reset_index(drop=True)
    t = table3(retrieval_table(rows, k=k), gen, "hybrid")
    if not t.empty:
        t.insert(2, "ranking", PRE_RERANK_LABEL + " (no reranker)")
    return t


SPAN_MODES = ("hybrid", "hybrid+rerank")


def _chunks_per_book(chunk_sets: Mapping[str, Sequence[Chunk]]) -> dict[tuple[str, str], list[Chunk]]:
    """``(method, book_id) -> chunks`` in chunk-set order (the index order of :meth:`LibraryIndex.build`)."""
    out: dict[tuple[str, str], list[Chunk]] = {}
    for m, cs in chunk_sets.items():
        for c in cs:
            out.setdefault((m, c.book_id), []).append(c)
    return out


def span_relevance_table(rows: Sequence[Mapping[str, Any]], chunk_sets: Mapping[str, Sequence[Chunk]],
                         books: Mapping[str, Any], k: int = 20, modes: Sequence[str] = SPAN_MODES) -> pd.DataFrame:
    """Containment relevance (LumberChunker's rule, the reference) beside span-based relevance
    (:func:`span_relevant`) on the same rankings, per (dataset, method, mode), with ``n_relevance_differs``;
    ``verbatim`` says whether every chunk of the set is a span of the source."""
    per_book = _chunks_per_book(chunk_sets)
    cache: dict = {}
    rel_span: dict[tuple[str, str], set[int]] = {}
    recs = []
    for r in rows:
        if r["mode"] not in modes or r["answerable"] is None or r["method"] not in chunk_sets:
            continue
        key = (r["method"], r["qid"])
        chunks = per_book[(r["method"], r["book_id"])]
        if key not in rel_span:
            rel_span[key] = span_relevant(chunks, books[r["book_id"]], r["evidence"], cache)
        span = rel_span[key]
        rank_span = next((i for i, d in enumerate(r["top"][:k], 1) if d in span), None)
        recs.append({"dataset": r["dataset"], "method": r["method"], "mode": r["mode"], "qid": r["qid"],
                     "rank": r["rank"], "rank_span": rank_span, "answerable": bool(r["answerable"]),
                     "answerable_span": bool(span), "differs": set(r["relevant"]) != span,
                     "verbatim": all(c.is_source_span for c in chunks)})
    cols = ["dataset", "method", "mode", "verbatim", "n_questions", "n_relevance_differs",
            "n_answerable", "n_answerable_span", f"MRR@{k}", f"MRR@{k}_span",
            *(f"Hit@{h}{sfx}" for h in (1, 5, 10) for sfx in ("", "_span"))]
    if not recs:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(recs)
    out = []
    rr = lambda x: 0.0 if x is None or pd.isna(x) else 1.0 / x  # noqa: E731
    hit = lambda x, h: float(x is not None and not pd.isna(x) and x <= h)  # noqa: E731
    for (ds, m, mode), g in df.groupby(["dataset", "method", "mode"], sort=False):
        rec = {"dataset": ds, "method": m, "mode": mode, "verbatim": bool(g["verbatim"].all()),
               "n_questions": len(g), "n_relevance_differs": int(g["differs"].sum()),
               "n_answerable": int(g["answerable"].sum()), "n_answerable_span": int(g["answerable_span"].sum()),
               f"MRR@{k}": float(g["rank"].map(rr).mean()), f"MRR@{k}_span": float(g["rank_span"].map(rr).mean())}
        for h in (1, 5, 10):
            rec[f"Hit@{h}"] = float(g["rank"].map(lambda x: hit(x, h)).mean())
            rec[f"Hit@{h}_span"] = float(g["rank_span"].map(lambda x: hit(x, h)).mean())
        out.append(rec)
    return pd.DataFrame(out, columns=cols)


def theta_sweep_for_scope(cfg: Any, books: Mapping[str, Any], scope: Mapping[str, Any],
                          chunk_sets: Mapping[str, Sequence[Chunk]], questions: Sequence[EvalQuestion],
                          embedder: Any, backend: Any, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """LumberChunker's θ sweep (its figure: DCG@k per θ ∈ [450, 1000] tokens) under either question scope:
    ``(table, note)``; skipped (empty table, ``note`` says why) when none of the units holds GutenQA evidence."""
    if "common_units" in scope:
        units, where = list(scope["common_units"]), "of the common scope"
    else:
        units, where = common_units(chunk_sets), f"covered by every chunk set (question_scope={scope.get('scope')})"
    keys = theta_sweep_units(books, units, questions, cfg.lumber_theta_max_units)
    head = f"thetas={list(cfg.lumber_thetas)} | "
    if not keys:
        note = (f"{head}skipped: none of the {len(units)} unit(s) {where} holds GutenQA question evidence, "
                f"so no θ can be scored")
        return pd.DataFrame(columns=THETA_SWEEP_COLUMNS), note
    note = f"{head}{cfg.lumber_theta_max_units or 'all'} unit(s) {where} | no reranker (LumberChunker's sweep)"
    bcfg = BaselinesConfig.for_profile(cfg.profile, seed=seed)
    if bcfg.llm.model != cfg.llm.model:
        backend = make_backend(bcfg.llm)
    pairs = [(books[b], books[b].unit(u)) for b, u in keys]
    sets: dict[str, list[Chunk]] = {}
    for theta in cfg.lumber_thetas:
        chunks, _ = lumber_chunks_batch(pairs, backend, int(theta), bcfg.lumber_max_retries,
                                        bcfg.lumber_retry_temperature, bcfg.lumber_max_new_tokens,
                                        bcfg.lumber_reference_mode, stage="05-theta", method="lumber-theta")
        sets[f"lumber@theta={theta}"] = [c for cs in chunks for c in cs]
    qs = [q for q in questions if q.evidence and q.book_id in {b for b, _ in keys}]
    qs, _ = questions_in_scope(qs, sets, books, "common-units")
    ev = RagEvaluator(cfg, embedder, backend, None)
    ev.build_indices(sets)
    ret = retrieval_table(ev.retrieve(qs), k=cfg.retrieve_top_k)
    ret = ret[ret["mode"].isin(["dense", "hybrid"])].copy()
    ret.insert(1, "theta", ret["method"].map(lambda m: int(m.split("=")[1])))
    size = {m: (len(cs), sum(backend.count_tokens(c.text) for c in cs) / max(1, len(cs))) for m, cs in sets.items()}
    ret["n_chunks"] = ret["method"].map(lambda m: size[m][0])
    ret["mean_chunk_tokens"] = ret["method"].map(lambda m: size[m][1])
    ks = (1, 2, 5, 10, 20)
    cols = [*THETA_SWEEP_COLUMNS, *(f"DCG@{k}" for k in ks), *(f"Recall@{k}" for k in ks), f"MRR@{cfg.retrieve_top_k}"]
    return ret[[c for c in cols if c in ret.columns]].sort_values(["mode", "theta"], ignore_index=True), note


THETA_SWEEP_COLUMNS = ("dataset", "theta", "mode", "n_questions", "n_chunks", "mean_chunk_tokens")


def theta_sweep_units(books: Mapping[str, Any], unit_keys: Sequence[tuple[str, str]],
                      questions: Sequence[EvalQuestion], max_units: int = 0) -> list[tuple[str, str]]:
    """The units the θ sweep segments: those of ``unit_keys`` holding GutenQA evidence, the most
    evidence first (ties: the given order), at most ``max_units`` (0 = all)."""
    texts = {(b, u): books[b].unit(u).text(books[b].text) for b, u in unit_keys}
    counts = {(b, u): sum(1 for q in questions if q.evidence and q.book_id == b and is_relevant(t, q.evidence))
              for (b, u), t in texts.items()}  # units without GutenQA evidence cannot score a θ
    return sorted((k for k in unit_keys if counts[k]), key=lambda k: -counts[k])[: max_units or None]


def plot_theta_sweep(sweep: pd.DataFrame, mode: str = "hybrid", ks: Sequence[int] = (1, 2, 5, 10, 20)):
    """LumberChunker's θ figure: DCG@k (%) against θ, one line per k."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    sub = sweep[sweep["mode"] == mode].sort_values("theta")
    for k in ks:
        if f"DCG@{k}" in sub:
            ax.plot(sub["theta"], 100 * sub[f"DCG@{k}"], marker="o", label=f"DCG@{k}")
    ax.set_xlabel("θ (token budget of the window G_i)")
    ax.set_ylabel("DCG@k (%)")
    ax.set_xticks(list(sub["theta"]))
    ax.set_title(f"LumberChunker θ sweep ({mode} retrieval)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


PAPER_CASE_BOOKS = ("Barchester Towers", "The Vampyre", "The House of the Seven Gables")  # App. C, Figures 4-5

def echo_notes(case: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per case-study row whose chunk or answer copies a prompt template's placeholder."""
    out = []
    for c in case:
        where = [w for w in ("chunk", "answer") if c.get(f"{w}_echo")]
        if where:
            phrase = c.get("chunk_echo") or c.get("answer_echo")
            out.append(f"Template echo (small model): {c['method']}'s {' and '.join(where)} "
                       f"cop{'y' if len(where) > 1 else 'ies'} the prompt's placeholder \"{phrase}\", not a text of its own")
    return out


def _evidence_cut(chunks: Sequence[Chunk], book: Any, evidence: str) -> tuple[int, int] | None:
    """The book-text span of the chunk holding ``evidence`` (a chunk that contains it; else, where the
    evidence is split, the chunk holding its first character), or None when it is not in the book."""
    occ = evidence_char_spans(book.text, evidence)
    if not occ:
        return None
    s, e = occ[0]
    best = None
    for c in chunks:
        if not c.spans:
            continue
        src = chunk_source_spans(c, book)
        span = (src[0][0], max(b for _, b in src))  # src is sorted
        if spans_cover(src, s, e, book.text):
            return span
        if best is None and any(a <= s < b for a, b in src):
            best = span
    return best


def choose_case_question(gen: pd.DataFrame, chunk_sets: Mapping[str, Sequence[Chunk]], books: Mapping[str, Any],
                         questions: Sequence[EvalQuestion],
                         prefer_titles: Sequence[str] = PAPER_CASE_BOOKS) -> tuple[str, str]:
    """The case-study question (Figures 4-5) and the rule that chose it: among questions every method
    answered (those of the paper's case-study books if any), the one whose evidence the methods split most
    differently, then the most methods missing it, then question id."""
    methods = sorted(set(gen["method"]))
    by_q = gen.groupby("qid")["method"].nunique()
    cands = [q for q in questions if by_q.get(q.qid, 0) == len(methods)]
    if not cands:
        raise ValueError("no question was answered by every generating method: no case study")
    preferred = [q for q in cands if any(t.lower() in q.title.lower() for t in prefer_titles)]
    pool = preferred or cands
    echoed = set(gen.loc[gen["answer"].map(lambda a: template_echo(a) is not None), "qid"])
    clean = [q for q in pool if q.qid not in echoed]  # no answer that copies a prompt template
    pool = clean or pool
    per_book = _chunks_per_book(chunk_sets)

    def score(q: EvalQuestion) -> tuple[int, int, str]:
        rows = gen[gen["qid"] == q.qid]
        if q.evidence:
            cuts = {_evidence_cut(per_book.get((m, q.book_id), []), books[q.book_id], q.evidence) for m in methods}
            missed = sum(not any(is_relevant(t, q.evidence) for t in r.contexts) for r in rows.itertuples())
            return (-len(cuts), -missed, q.qid)
        return (-len({r.contexts[0] if len(r.contexts) else "" for r in rows.itertuples()}), 0, q.qid)

    best = min(pool, key=score)
    n_cuts = -score(best)[0]
    where = "the paper's case-study books" if preferred else "all answered questions"
    where += ("" if not echoed else "; those with no answer copying a prompt template's placeholder" if clean
              else "; every one has an answer copying a prompt template's placeholder")
    rule = (f"among {len(pool)} question(s) answered by all {len(methods)} methods ({where}): the one whose evidence "
            f"the methods split most differently ({n_cuts} distinct chunk spans holding the evidence), then the most "
            "methods missing it, then question id")
    return best.qid, rule


def case_study(gen: pd.DataFrame, qid: str, questions: Sequence[EvalQuestion]) -> list[dict[str, Any]]:
    """Per method: the top chunk it handed the generator (and how many it handed), whether any handed
    chunk holds the evidence, the evidence's position in the shown chunk, and the method's answer."""
    q = next(x for x in questions if x.qid == qid)
    out = []
    for r in gen[gen["qid"] == qid].sort_values("method").itertuples():
        ctx = list(r.contexts)
        shown = next((t for t in ctx if q.evidence and is_relevant(t, q.evidence)), ctx[0] if ctx else "")
        target = q.evidence or (q.answers[0] if q.answers else "")
        mark = next(iter(evidence_char_spans(shown, target)), None) if normalize_for_match(target) else None
        out.append({"method": r.method, "chunk": shown, "n_handed": len(ctx), "rank_shown": ctx.index(shown) + 1 if ctx else None,
                    "evidence_handed": bool(q.evidence) and any(is_relevant(t, q.evidence) for t in ctx),
                    "mark": mark, "answer": r.answer, "question": q.question, "reference": r.reference,
                    "marked": "evidence" if q.evidence else "reference answer",
                    "chunk_echo": template_echo(shown), "answer_echo": template_echo(r.answer)})
    return out


def _marked(case_row: Mapping[str, Any], left: str, right: str, escape: Any = str) -> str:
    """A case-study row's chunk (each part ``escape``-d) with its evidence mark between ``left`` and ``right``."""
    t, (a, b) = case_row["chunk"], case_row["mark"] or (0, 0)
    return escape(t[:a]) + left + escape(t[a:b]) + right + escape(t[b:]) if case_row["mark"] else escape(t)


def case_study_html(case: Sequence[Mapping[str, Any]], title: str, rule: str) -> str:
    """The case study as HTML (JupyterLab): one row per method, its chunk with the evidence highlighted,
    its answer beside it."""
    import html as _h

    rows = []
    for c in case:
        body = _marked(c, "<mark>", "</mark>", _h.escape).replace("\n", "<br>")
        flag = "evidence handed" if c["evidence_handed"] else "evidence NOT handed"
        rows.append(f"<tr><td style='vertical-align:top'><b>{_h.escape(c['method'])}</b><br><small>{flag}; chunk "
                    f"{c['rank_shown']} of {c['n_handed']} handed</small></td><td style='max-width:48em;"
                    f"vertical-align:top;text-align:left'>{body}</td><td style='vertical-align:top;max-width:18em'>"
                    f"{_h.escape(c['answer'])}</td></tr>")
    q = case[0] if case else {"question": "", "reference": "", "marked": ""}
    return (f"<h4>{_h.escape(title)}</h4><p><b>Question:</b> {_h.escape(q['question'])}<br><b>Reference:</b> "
            f"{_h.escape(q['reference'])}<br><small>highlighted: {_h.escape(q['marked'])}; chosen by: "
            f"{_h.escape(rule)}</small></p>" + "".join(f"<p><b>{_h.escape(n)}</b></p>" for n in echo_notes(case))
            + "<table><tr><th>method</th><th>chunk handed to the generator</th>"
            f"<th>answer</th></tr>" + "".join(rows) + "</table>")


def plot_case_study(case: Sequence[Mapping[str, Any]], title: str, width: int = 90, max_lines: int = 14,
                    answer_width: int = 120, answer_lines: int = 4):
    """Figures 4-5 shape as a figure: per method its handed chunk (evidence between ⟦ ⟧) and its answer,
    stacked so a long passage pushes what follows down instead of printing over it."""
    import textwrap

    blocks: list[tuple[str, dict[str, Any], float]] = [(title, {"fontsize": 9}, 8.0)]
    blocks += [(textwrap.fill(n, 140), {"fontsize": 7.5, "color": "#8b0000"}, 6.0) for n in echo_notes(case)]
    for c in case:
        lines = textwrap.wrap(" ".join(_marked(c, "⟦", "⟧").split()), width) or ["(empty chunk)"]
        if len(lines) > max_lines:  # centre the shown lines on the evidence
            at = next((i for i, ln in enumerate(lines) if "⟦" in ln), 0)
            lo = max(0, min(at - max_lines // 2, len(lines) - max_lines))
            lines = (["…"] if lo else []) + lines[lo:lo + max_lines] + (["…"] if lo + max_lines < len(lines) else [])
        answer = textwrap.wrap("answer: " + " ".join((c["answer"] or "(empty)").split()), answer_width,
                               max_lines=answer_lines, placeholder=" […]")
        blocks += [(f"{c['method']} — {'evidence handed' if c['evidence_handed'] else 'evidence NOT handed'}",
                    {"fontsize": 8, "fontweight": "bold"}, 3.0),
                   ("\n".join(lines), {"fontsize": 6.5, "family": "monospace"}, 3.0),
                   ("\n".join(answer), {"fontsize": 7, "color": "#1f4e79"}, 12.0)]
    return stacked_text_figure(blocks)


def fusion_comparison(retrieval: pd.DataFrame) -> pd.DataFrame:
    """Every fusion mode side by side (dense, BM25, the paper's RRF hybrid, weighted RRF, linear), with
    the cross-fitted dense weights of the tuned modes."""
    modes = ["dense", "bm25", "hybrid", "hybrid-wrrf", "hybrid-linear"]
    if retrieval.empty:
        return pd.DataFrame()
    cols = ["dataset", "method", "mode", "n_questions", "n_no_relevant_chunk", "MRR@20", "MRR_full", "Hit@1",
            "Hit@10", "Recall@20", "DCG@20", "MRR@20_answerable", "MRR_full_answerable", "dense_weights"]
    r = retrieval[retrieval["mode"].isin(modes)]
    r = r[[c for c in cols if c in r.columns]].copy()
    r["mode"] = pd.Categorical(r["mode"], modes, ordered=True)
    return r.sort_values(["dataset", "method", "mode"], ignore_index=True)


def table4(gen: pd.DataFrame, pairwise: pd.DataFrame) -> pd.DataFrame:
    """Paper Table 4 shape: dataset, method, EM, F1, ROUGE-L, METEOR, AA, WR (of the target vs method)."""
    if gen.empty:
        return pd.DataFrame()
    t = gen.groupby(["dataset", "method"]).agg(n_answers=("qid", "count"), EM=("EM", "mean"), F1=("F1", "mean"),
                                                 ROUGE_L=("ROUGE-L", "mean"), METEOR=("METEOR", "mean"),
                                                 AA=("answer_accuracy", "mean"),
                                                 n_empty_answers=("empty_answer", "sum")).reset_index()
    if "ragas_scored" in gen and "ragas_unrated_AA" in gen:  # AA is averaged over rated answers only
        n = gen.groupby(["dataset", "method"]).agg(n_ragas=("ragas_scored", "sum"),
                                                   n_ragas_unrated_AA=("ragas_unrated_AA", "sum")).reset_index()
        t = t.merge(n, on=["dataset", "method"], how="left")
    if not pairwise.empty:
        wr = pairwise.rename(columns={"opponent": "method", "win_rate": "WR_target_vs_method"})
        t = t.merge(wr[["dataset", "method", "WR_target_vs_method", "n_invalid"]], on=["dataset", "method"], how="left")
    return t


def plot_dcg_recall(retrieval: pd.DataFrame, mode: str, ks: Sequence[int] = (1, 2, 5, 10, 20),
                    max_series: int = MAX_SERIES, table: str = "05_retrieval_all_modes"):
    """LumberChunker-style DCG@k and Recall@k curves (GutenQA): at most ``max_series`` lines, the anchor methods
    (:data:`~litseg_nb.core.display.ANCHOR_METHODS`) then the best of the rest by mean DCG@k; chunk sets with the
    same curves share one line; one legend under both panels, the chunk sets left out named under it."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    sub = retrieval[(retrieval["mode"] == mode)] if not retrieval.empty else retrieval
    curves = {str(r["method"]): tuple(round(100 * float(r[f"{m}@{k}"]), 9) for m in ("DCG", "Recall") for k in ks)
              for _, r in sub.iterrows()}
    shown, left_out = pick_groups(curves, {m: sum(c[:len(ks)]) / len(ks) for m, c in curves.items()}, n=max_series)
    for i, group in enumerate(shown):
        c = curves[group[0]]
        for j, ax in enumerate(axes):
            ax.plot(ks, c[j * len(ks):(j + 1) * len(ks)], marker="os^vDP*X"[i % 8], color=f"C{i}",
                    label=textwrap.fill(" = ".join(group), 45, break_on_hyphens=False), alpha=0.85)
    n_q = int(sub["n_questions"].max()) if len(sub) and "n_questions" in sub else None
    for ax, metric in zip(axes, ("DCG", "Recall")):
        ax.set_xscale("log")
        ax.set_xticks(list(ks), [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("k")
        ax.set_ylabel(f"{metric}@k (%)")
        ax.set_title(f"{metric}@k ({mode}{f', {n_q} questions' if n_q else ''})")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        bottom = min(ax.get_tightbbox(renderer).y0 for ax in axes) / fig.bbox.height  # figure fraction
        legend = fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, bottom - 0.02),
                            ncol=min(3, len(handles)), fontsize=7, frameon=False)
        note = left_out_note(left_out, "chunk sets", table)
        if note:  # under the legend, wrapped to the figure's width
            fig.canvas.draw()
            y = legend.get_window_extent(renderer).y0 / fig.bbox.height
            fig.text(0.5, y - 0.01, "\n".join(textwrap.wrap(note, 150, break_on_hyphens=False)), ha="center",
                     va="top", fontsize=7, color="0.25")
    return fig


def choose_generation_methods(methods: Sequence[str], wanted: Sequence[str], max_n: int, target: str) -> list[str]:
    """Methods that get answers/judges: ``wanted`` (or all); capped to the target + the first others."""
    ms = [m for m in methods if not wanted or m in wanted]
    if max_n and len(ms) > max_n:
        first = [target] if target in ms else []
        ms = first + [m for m in ms if m != target][: max_n - len(first)]
    return ms


def restrict_to_units(chunk_sets: Mapping[str, Sequence[Chunk]], keys: set) -> dict[str, list[Chunk]]:
    """Only the chunks of the given ``(book_id, unit_id)`` units (unaligned imported chunks stay); a chunk
    set left empty is an error naming it."""
    out = {m: [c for c in cs if (c.book_id, c.unit_id) in keys or not c.spans] for m, cs in chunk_sets.items()}
    empty = [m for m, cs in out.items() if not cs]
    if empty:
        units = {m: len({(c.book_id, c.unit_id) for c in cs if c.spans}) for m, cs in chunk_sets.items()}
        raise EvaluationError(
            f"question_scope=common-units: restricting to the {len(keys)} unit(s) every chunk set covers leaves no "
            f"chunk in {', '.join(empty)} (units per set: {units}; an imported set or an LLM set may cover other "
            "units than the rest); use question_scope=all (-p question_scope=all) to score every set on all "
            "questions, or evaluate sets that cover the same units (-p chunkers=...)")
    return out
