"""The whole-book retrieval benchmark: can the chunkers be told apart?

Tier A: every method that runs without an LLM segments whole books; every question of those books is scored.
Tier B: the LLM methods on the units every chunk set covers, beside the tier-A methods restricted to them. The tiers
never share a ranking.
Budget-matched hit at B: walk down a ranking taking whole chunks while their token total stays <= B; a hit when a
taken chunk is relevant, i.e. when the tokens up to and including the first relevant chunk are <= B.
LiteraryQA relevance: a passage is relevant when it contains a kept answer (normalised, whole words); an answer is
kept when it is short and occurs at least once and only a few times in its book.
Paired comparison: per question d = score(method) - score(reference); mean d with a 95 % percentile bootstrap
interval (books resampled, then questions within each drawn book) and a two-sided sign-flip permutation p-value.
Dense vectors of tier A: sentence windows embedded once per book, pooled per chunk (:func:`pooled_vectors`).
"""
from __future__ import annotations

import functools
import re
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .. import chunk_sets as chunk_set_files
from ..chunkers.base import MemoTokenizer, load_tokenizer
from ..chunkers.config import BaselinesConfig
from ..chunkers.library import PREFIX, PRESETS, LibraryConfig, is_library_method, needs_of
from ..chunkers.splitters import combined_sentences
from ..core.artifacts import save_table
from ..core.paths import outputs_dir
from ..core.safe_io import ensure_writable
from ..corpus import load_corpus
from ..errors import LitsegError
from ..llm.embeddings import limit_report, load_embedder
from ..metrics.retrieval import evidence_form, normalize_for_match
from ..segmenters.registry import METHOD_NAMES, chunk_units, get_method
from .config import RagConfig
from .index import BookIndex, rrf_fuse
from .pipeline import _extend, common_units
from .report import restrict_to_units

BUDGETS = (256, 512, 1024, 2048)
TIERS = ("A", "B")
# Short answers (DPR-style has-answer); a longer answer is usually a paraphrase that the book never states verbatim.
MAX_ANSWER_WORDS = 5
# A string found more than three times (a main character's name) says little about whether a passage answers.
MAX_ANSWER_OCCURRENCES = 3
_EDGE_PUNCT = " .,;:!?\"'()[]-"
RULE_NOTE = (f"LiteraryQA relevance: the passage holds a kept answer (normalised, whole words); an answer is kept when "
             f"it has <= {MAX_ANSWER_WORDS} words and occurs 1-{MAX_ANSWER_OCCURRENCES} times in its book")


def tokens_to_first_relevant(ranked_token_counts: Sequence[int], ranked_relevant: Sequence[bool]) -> float:
    """Tokens of the ranking up to and including its first relevant chunk (inf when no chunk is relevant)."""
    counts = np.asarray(ranked_token_counts, dtype=float)
    relevant = np.asarray(ranked_relevant, dtype=bool)
    if counts.shape != relevant.shape:
        raise ValueError(f"{len(counts)} token counts but {len(relevant)} relevance flags")
    if (counts < 0).any():
        raise ValueError("a token count is negative")
    hits = np.flatnonzero(relevant)
    return float(counts[: hits[0] + 1].sum()) if hits.size else float("inf")


def budget_hits(ranked_token_counts: Sequence[int], ranked_relevant: Sequence[bool],
                budgets: Sequence[int] = BUDGETS) -> dict[int, bool]:
    """Per budget B: whether whole chunks taken from the top while the token total stays <= B include a relevant one.
    A first chunk longer than B takes nothing, so it cannot be a hit (a reader with a B-token context cannot use it)."""
    needed = tokens_to_first_relevant(ranked_token_counts, ranked_relevant)
    return {int(b): bool(needed <= b) for b in budgets}


def budget_hit_matrix(tokens_needed: Sequence[float], budgets: Sequence[int] = BUDGETS) -> np.ndarray:
    """Many questions: ``tokens_needed[i]`` (:func:`tokens_to_first_relevant`) -> bool array (question, budget)."""
    return np.asarray(tokens_needed, dtype=float)[:, None] <= np.asarray(budgets, dtype=float)[None, :]


@functools.lru_cache(maxsize=8)
def _normalised_book(book_text: str) -> str:
    return normalize_for_match(book_text)


@functools.lru_cache(maxsize=4096)
def _answer_pattern(normalised_answer: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(normalised_answer) + r"(?!\w)")


def answer_form(answer: str) -> str:
    """The normalised answer (:func:`normalize_for_match`) without surrounding punctuation and a leading article."""
    a = normalize_for_match(answer).strip(_EDGE_PUNCT)
    return re.sub(r"^(the|an|a) ", "", a).strip(_EDGE_PUNCT)


def answer_relevance_rule(book_text: str, answer: str, max_words: int = MAX_ANSWER_WORDS,
                          max_occurrences: int = MAX_ANSWER_OCCURRENCES) -> tuple[bool, str]:
    """``(keep, reason)``: keep an answer of at most ``max_words`` words found 1 to ``max_occurrences`` times in the
    book (whole words of its :func:`answer_form`, as :meth:`BenchQuestion.relevant` matches)."""
    a = answer_form(answer)
    if not a:
        return False, "empty answer"
    n_words = len(a.split())
    if n_words > max_words:
        return False, f"too long ({n_words} words > {max_words})"
    n = len(_answer_pattern(a).findall(_normalised_book(book_text)))
    if n == 0:
        return False, "absent from the book"
    if n > max_occurrences:
        return False, f"too frequent ({n} occurrences > {max_occurrences})"
    return True, f"kept ({n_words} words, {n} occurrence(s))"


def _bootstrap_interval(d: np.ndarray, groups: list[np.ndarray], n_boot: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    means = np.empty(n_boot)
    for i in range(n_boot):
        drawn = rng.integers(0, len(groups), len(groups))
        idx = np.concatenate([groups[g][rng.integers(0, len(groups[g]), len(groups[g]))] for g in drawn])
        means[i] = d[idx].mean()
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def _sign_flip_p(d: np.ndarray, n_perm: int, rng: np.random.Generator) -> float:
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, d.size))
    flipped = np.abs(signs @ d) / d.size
    return float((1 + np.sum(flipped >= abs(d.mean()) - 1e-12)) / (n_perm + 1))


def paired_difference(scores_by_method: Mapping[str, Sequence[float]], books: Sequence[Any],
                      reference: str = "recursive", n_boot: int = 2000, n_perm: int = 10000, seed: int = 0):
    """One row per method other than ``reference``: mean of its per-question score minus the reference's, 95 %
    bootstrap interval (books, then questions), sign-flip p-value, ``n_questions`` and ``n_books``."""
    if reference not in scores_by_method:
        raise ValueError(f"reference method {reference!r} has no scores (methods: {sorted(scores_by_method)})")
    ref = np.asarray(scores_by_method[reference], dtype=float)
    books = np.asarray(books)
    if books.shape != ref.shape or ref.size == 0:
        raise ValueError(f"{books.size} book ids for {ref.size} questions of {reference!r} (need one per question)")
    groups = [np.flatnonzero(books == b) for b in dict.fromkeys(books.tolist())]
    rows = []
    for method, scores in scores_by_method.items():
        s = np.asarray(scores, dtype=float)
        if s.shape != ref.shape:
            raise ValueError(f"method {method!r} has {s.size} scores, reference {reference!r} has {ref.size}: "
                             "every method must be scored on the same questions")
        if not np.isfinite(s).all():
            raise ValueError(f"method {method!r} has a non-finite score")
        if method == reference:
            continue
        d = s - ref
        rng = np.random.default_rng(seed)  # the same draws for every method
        lo, hi = _bootstrap_interval(d, groups, n_boot, rng)
        rows.append({"method": method, "reference": reference, "mean_difference": float(d.mean()),
                     "ci_low": lo, "ci_high": hi, "p_value": _sign_flip_p(d, n_perm, rng),
                     "n_questions": int(d.size), "n_books": len(groups)})
    return pd.DataFrame(rows, columns=["method", "reference", "mean_difference", "ci_low", "ci_high", "p_value",
                                       "n_questions", "n_books"])


def ranking_table(rows: Sequence[Mapping[str, Any]], tier: str, by: str):
    """Rows of one tier (each with ``tier``, ``method`` and ``by``) sorted by ``by``, best first, with a ``rank``;
    rows of another tier raise: the tiers never share a ranking."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r} (tiers: {TIERS})")
    other = sorted({str(r.get("tier")) for r in rows} - {tier})
    if other:
        raise ValueError(f"a tier-{tier} ranking got rows of tier {', '.join(other)}: "
                         f"tiers {tier} and {', '.join(other)} never share a ranking")
    df = pd.DataFrame(list(rows))
    if df.empty:
        raise ValueError(f"no rows to rank in tier {tier}")
    df = df.sort_values([by, "method"], ascending=[False, True], kind="stable").reset_index(drop=True)
    df.insert(0, "rank", df[by].rank(method="min", ascending=False).astype(int))
    return df


# --- running the benchmark: questions, chunk vectors, rankings, tables -------------------------------------------

@dataclass(frozen=True)
class BenchQuestion:
    """A question with the strings that make a passage relevant: GutenQA's "Chunk Must Contain" evidence
    (normalised containment), or LiteraryQA's kept answers (:func:`answer_form`, whole words)."""

    qid: str
    dataset: str
    book_id: str
    question: str
    targets: tuple[str, ...]

    def relevant(self, normalised_text: str) -> bool:
        """Whether a passage, given in :func:`normalize_for_match` form, is relevant."""
        if self.dataset == "gutenqa":
            return any(evidence_form(t) in normalised_text for t in self.targets)
        return any(_answer_pattern(answer_form(t)).search(normalised_text) is not None for t in self.targets)


def benchmark_questions(books: Sequence[Any], **rule: Any):
    """``(questions, rule_report)``: every GutenQA question with evidence, and the LiteraryQA questions with an
    answer :func:`answer_relevance_rule` keeps; the report has one row per LiteraryQA question: its answers and, in
    the same order, the rule's verdict on each (``why``)."""
    out, report = [], []
    for b in books:
        for q in b.questions:
            ds = q.dataset or b.dataset
            if ds == "gutenqa":
                if q.evidence:
                    out.append(BenchQuestion(q.qid, ds, b.book_id, q.question, (q.evidence,)))
                continue
            verdicts = [(a, *answer_relevance_rule(b.text, a, **rule)) for a in q.answers]
            kept = tuple(a for a, ok, _ in verdicts if ok)
            if kept:
                out.append(BenchQuestion(q.qid, ds, b.book_id, q.question, kept))
            report.append({"book_id": b.book_id, "question": q.question, "answers": " | ".join(q.answers),
                           "kept": bool(kept), "why": " | ".join(r for *_, r in verdicts)})
    return out, pd.DataFrame(report, columns=["book_id", "question", "answers", "kept", "why"])


def tier_a_methods(embedding_presets: bool = True) -> list[str]:
    """Every method that runs without an LLM: the registered baselines and the ``lib:`` presets (those that embed
    only with ``embedding_presets``)."""
    ours = [m for m in METHOD_NAMES if get_method(m).needs != "llm"]
    libs = [PREFIX + n for n, p in PRESETS.items() if p.needs == "text" or (embedding_presets and p.needs == "embedder")]
    return ours + libs


def segment_whole_books(books: Sequence[Any], methods: Sequence[str], cfg: Any, embedder: Any) -> dict[str, list[Any]]:
    """Each method's chunks of every unit of every book (``cfg``: notebook 04's BaselinesConfig)."""

    lib_cfg = LibraryConfig.like(cfg)
    out: dict[str, list[Any]] = {}
    for m in tqdm(list(methods), desc="tier A: segment"):
        items = [(b, u) for b in books for u in b.units if u.n_sentences]
        out[m] = chunk_units(m, items, lib_cfg if is_library_method(m) else cfg, embedder=embedder)[0]
    return out


def sentence_windows(book: Any, buffer_size: int = 1) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(starts, ends, texts)`` per sentence of the book, in text order: the sentence with ``buffer_size`` neighbours
    on each side within its unit (the windows the ``semantic`` chunker embeds, so one pass serves both)."""
    starts, ends, texts = [], [], []
    for u in book.units:
        texts += combined_sentences([u.sentence_text(book.text, s.index) for s in u.sentences], buffer_size)
        starts += [s.start for s in u.sentences]
        ends += [s.end for s in u.sentences]
    order = np.argsort(starts, kind="stable")
    return np.asarray(starts)[order], np.asarray(ends)[order], [texts[i] for i in order]


def window_vectors(book: Any, embedder: Any, buffer_size: int = 1):
    """``(starts, ends, vectors)``: :func:`sentence_windows` with each window embedded as a passage."""
    starts, ends, texts = sentence_windows(book, buffer_size)
    return starts, ends, embedder.encode(texts, kind="passage")


def pooled_vectors(chunks: Sequence[Any], starts: np.ndarray, ends: np.ndarray, vecs: np.ndarray):
    """``(vectors, n_without_sentence)``: per chunk the normalised mean of the window vectors of the sentences its
    spans overlap, weighted by overlapping characters; a chunk overlapping no sentence gets a zero vector (counted)."""
    out = np.zeros((len(chunks), vecs.shape[1]), dtype=np.float32)
    missing = 0
    for i, c in enumerate(chunks):
        for a, b in c.spans:
            j = int(np.searchsorted(ends, a, side="right"))
            while j < len(starts) and starts[j] < b:
                out[i] += (min(b, ends[j]) - max(a, starts[j])) * vecs[j]
                j += 1
        n = float(np.linalg.norm(out[i]))
        if n > 0:
            out[i] /= n
        else:
            missing += 1
    return out, missing


def _first_relevant(order: Sequence[int], relevant: set[int]) -> int | None:
    return next((r for r, d in enumerate(order, 1) if d in relevant), None)


def score_tier(tier: str, chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any],
               questions: Sequence[BenchQuestion], embedder: Any, tokenizer: Any, vectors: str = "pooled",
               cfg: Any = None):
    """One row per (method, question, mode): ``rank`` of the first relevant chunk in the full ranking and
    ``tokens_needed`` (:func:`tokens_to_first_relevant`). ``vectors``: ``"pooled"`` (:func:`pooled_vectors` over
    :func:`window_vectors`) or ``"text"`` (each chunk text embedded, cut where the embedder stops reading). Modes:
    dense, BM25 and the paper's hybrid (RRF over the top ``cfg.dense_top_k``/``sparse_top_k``, then the rest)."""

    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r} (tiers: {TIERS})")
    if vectors not in ("pooled", "text"):
        raise ValueError(f"vectors must be 'pooled' or 'text', got {vectors!r}")
    top_d, top_s, rrf_k = (cfg.dense_top_k, cfg.sparse_top_k, cfg.rrf_k) if cfg is not None else (50, 50, 60)
    by_book = {b.book_id: b for b in books}
    qs = [q for q in questions if q.book_id in by_book]
    q_emb = embedder.encode([q.question for q in qs], kind="query") if qs else None
    windows = {bid: window_vectors(b, embedder) for bid, b in by_book.items()} if vectors == "pooled" else {}
    rows, chunk_rows = [], []
    for m, chunks in tqdm(chunk_sets.items(), desc=f"tier {tier}: rank"):
        for bid in by_book:
            cs = [c for c in chunks if c.book_id == bid]
            if not cs:
                continue
            texts = [c.text for c in cs]
            norm = [normalize_for_match(t) for t in texts]
            n_missing = 0
            if vectors == "pooled":
                emb, n_missing = pooled_vectors(cs, *windows[bid])
            else:
                emb = embedder.encode(texts, kind="passage")
            tokens = np.asarray(tokenizer.count_many(texts), dtype=float)
            chunk_rows.append({"tier": tier, "method": m, "book_id": bid, "chunks": len(cs),
                               "mean_tokens": float(tokens.mean()), "no_sentence_vector": n_missing})
            idx = BookIndex.build(bid, [c.chunk_id for c in cs], texts, emb)
            for qi, q in enumerate(qs):
                if q.book_id != bid:
                    continue
                rel = {i for i, t in enumerate(norm) if q.relevant(t)}
                dense, sparse = idx.dense_search(q_emb[qi], len(cs)), idx.sparse_search(q.question, len(cs))
                hybrid = _extend(rrf_fuse([dense[:top_d], sparse[:top_s]], k=rrf_k), rrf_fuse([dense, sparse], k=rrf_k))
                for mode, ranked in (("dense", dense), ("bm25", sparse), ("hybrid", hybrid)):
                    order = [d for d, _ in ranked]
                    rows.append({"tier": tier, "dataset": q.dataset, "book_id": bid, "qid": q.qid, "method": m,
                                 "mode": mode, "rank": _first_relevant(order, rel), "n_relevant": len(rel),
                                 "tokens_needed": tokens_to_first_relevant(tokens[order], [d in rel for d in order])})
    return pd.DataFrame(rows), pd.DataFrame(chunk_rows)


def summary_table(rows, chunk_stats, budgets: Sequence[int] = BUDGETS, k: int = 20):
    """Per (tier, dataset, mode, method): ``n_questions``, ``n_no_relevant_chunk``, MRR@k, Hit@5, Hit@k, the
    budget-matched hits ``hit@B``, chunks and mean tokens per chunk (over the scored books)."""
    out = []
    for (tier, ds, mode, m), g in rows.groupby(["tier", "dataset", "mode", "method"], sort=False):
        r = g["rank"].astype(float).to_numpy()
        hit = budget_hit_matrix(g["tokens_needed"].to_numpy(), budgets).mean(axis=0)
        st = chunk_stats[(chunk_stats.method == m) & chunk_stats.book_id.isin(set(g.book_id))]
        out.append({"tier": tier, "dataset": ds, "mode": mode, "method": m, "n_questions": len(g),
                    "n_books": g.book_id.nunique(), "n_no_relevant_chunk": int((g.n_relevant == 0).sum()),
                    f"MRR@{k}": float(np.where(r <= k, 1.0 / np.nan_to_num(r, nan=np.inf), 0.0).mean()),
                    "Hit@5": float((r <= 5).mean()), f"Hit@{k}": float((r <= k).mean()),
                    **{f"hit@{b}": float(h) for b, h in zip(budgets, hit)},
                    "chunks": int(st.chunks.sum()),
                    "mean_tokens": float((st.mean_tokens * st.chunks).sum() / max(1, st.chunks.sum()))})
    return pd.DataFrame(out)


def paired_table(rows, reference: str = "recursive", budget: int = 1024, mode: str = "hybrid", k: int = 20,
                 **kw: Any):
    """:func:`paired_difference` of every method against ``reference`` (``mode``), per dataset and over all of them,
    for two scores per question: ``hit@budget`` and ``MRR@k``; ``excludes_zero`` marks a 95 % interval without 0."""
    g = rows[rows["mode"] == mode]
    parts = []
    for tier in g["tier"].unique():
        t = g[g["tier"] == tier]
        for ds in [*sorted(t["dataset"].unique()), "all"]:
            d = t if ds == "all" else t[t["dataset"] == ds]
            if ds == "all" and t["dataset"].nunique() < 2:
                continue
            wide_tok = d.pivot_table(index=["book_id", "qid"], columns="method", values="tokens_needed", aggfunc="first")
            wide_rank = d.pivot_table(index=["book_id", "qid"], columns="method", values="rank", aggfunc="first",
                                      dropna=False)
            wide_rank = wide_rank.reindex(wide_tok.index)
            unscored = wide_tok.columns[wide_tok.isna().any()].tolist()
            if unscored:  # a method without a ranking for some question would count as a miss there
                raise ValueError(f"tier {tier}, {ds}: {unscored} have no ranking for some questions; every method "
                                 "must be scored on the same questions")
            books = wide_tok.index.get_level_values(0).to_numpy()
            for score, wide in ((f"hit@{budget}", (wide_tok <= budget).astype(float)),
                                (f"MRR@{k}", wide_rank.where(wide_rank <= k).rtruediv(1.0).fillna(0.0))):
                p = paired_difference({m: wide[m].to_numpy() for m in wide.columns}, books, reference, **kw)
                p.insert(0, "score", score)
                p.insert(0, "dataset", ds)
                p.insert(0, "tier", tier)
                parts.append(p)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["excludes_zero"] = (out.ci_low > 0) | (out.ci_high < 0)
    return out


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 1 and ra.std() > 0 and rb.std() > 0 else float("nan")


def pooling_check(chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], questions: Sequence[BenchQuestion],
                  embedder: Any, k: int = 20):
    """Pooled chunk vectors (:func:`pooled_vectors`) against embedding each chunk text, dense retrieval, on
    ``books``: per method the mean Spearman correlation of the two score vectors over a book's chunks (per
    question), how often both rank the same chunk first, and dense MRR@k each way; ``attrs["method_ranking_rho"]``
    is the Spearman correlation of the methods' MRR@k under the two."""
    by_book = {b.book_id: b for b in books}
    qs = [q for q in questions if q.book_id in by_book]
    if not qs:
        raise ValueError(f"no question in the pooling-check books {sorted(by_book)}")
    q_emb = dict(zip((q.qid for q in qs), embedder.encode([q.question for q in qs], kind="query")))
    windows = {bid: window_vectors(b, embedder) for bid, b in by_book.items()}
    out = []
    for m, chunks in chunk_sets.items():
        rho, same_top, rr = [], [], {"pooled": [], "text": []}
        for bid in by_book:
            cs = [c for c in chunks if c.book_id == bid]
            if not cs:
                continue
            vecs = {"pooled": pooled_vectors(cs, *windows[bid])[0],
                    "text": embedder.encode([c.text for c in cs], kind="passage")}
            norm = [normalize_for_match(c.text) for c in cs]
            for q in (q for q in qs if q.book_id == bid):
                scores = {v: vecs[v] @ q_emb[q.qid] for v in vecs}
                rho.append(_spearman(scores["pooled"], scores["text"]))
                same_top.append(int(np.argmax(scores["pooled"])) == int(np.argmax(scores["text"])))
                rel = {i for i, t in enumerate(norm) if q.relevant(t)}
                for v, s in scores.items():
                    r = _first_relevant(np.argsort(-s, kind="stable").tolist(), rel)
                    rr[v].append(1.0 / r if r is not None and r <= k else 0.0)
        out.append({"method": m, "n_questions": len(rho), "score_rho": float(np.nanmean(rho)),
                    "same_top_chunk": float(np.mean(same_top)), f"MRR@{k}_pooled": float(np.mean(rr["pooled"])),
                    f"MRR@{k}_text": float(np.mean(rr["text"]))})
    df = pd.DataFrame(out)
    df.attrs["method_ranking_rho"] = _spearman(df[f"MRR@{k}_pooled"].to_numpy(), df[f"MRR@{k}_text"].to_numpy())
    return df


#: the narrative-aware methods: the trained boundary model (tier A) and the LLM segmenters (tier B)
NARRATIVE_AWARE = ("boundary-model", "litseg", "litseg-lite")


@dataclass
class TierResult:
    """One tier's per-question ``rows``, ``chunk_stats``, ``summary`` and ``paired`` tables, with a ``note`` for
    the table captions (books, questions, methods)."""

    tier: str
    rows: Any
    chunk_stats: Any
    summary: Any
    paired: Any
    note: str

    def ranking(self, dataset: str, budget: int, mode: str = "hybrid"):
        """This tier's methods on ``dataset`` ranked by ``hit@budget`` (:func:`ranking_table`)."""
        s = self.summary
        return ranking_table(s[(s.dataset == dataset) & (s["mode"] == mode)].to_dict("records"), self.tier,
                             f"hit@{budget}")


def needs_llm(method: str) -> bool:
    """Whether a chunk set's method segments with an LLM (``name@variant`` and imported names by their base)."""
    base = method.split("@", 1)[0]
    if is_library_method(base):
        return needs_of(base) == "llm"
    return base in METHOD_NAMES and get_method(base).needs == "llm"


def _result(tier: str, rows, stats, cfg: Any, note: str) -> TierResult:
    return TierResult(tier, rows, stats, summary_table(rows, stats, cfg.budgets, cfg.retrieve_top_k),
                      paired_table(rows, cfg.paired_reference, cfg.paired_budget, k=cfg.retrieve_top_k, seed=cfg.seed),
                      note)


def tier_a_books(cfg: Any) -> list[Any]:
    """The books of tier A: ``cfg.tier_a_books`` (empty = every local GutenQA and LiteraryQA book), whole."""
    return load_corpus(cfg.corpus.replace(datasets=("gutenqa", "literaryqa"), books=cfg.tier_a_books, max_books=0,
                                          max_units_per_book=0))


def run_tier_a(cfg: Any, books: Sequence[Any], embedder: Any, tokenizer: Any):
    """Tier A on ``books``: every LLM-free method (:func:`tier_a_methods`) segments every unit; every question
    (:func:`benchmark_questions`) is scored with pooled vectors. ``(result, chunk sets, rule report)``."""
    questions, rule = benchmark_questions(books)
    if not questions:
        raise ValueError(f"tier A: no question with evidence or a kept answer in {[b.book_id for b in books]}")
    base = BaselinesConfig.for_profile(cfg.profile, seed=cfg.seed, embedding=cfg.embedding.to_dict(),
                                       semantic_books=(), semantic_units="all")
    methods = tier_a_methods(cfg.tier_a_embedding_presets)
    if cfg.paired_reference not in methods:
        raise ValueError(f"paired_reference {cfg.paired_reference!r} is not a tier-A method ({', '.join(methods)})")
    sets = segment_whole_books(books, methods, base, embedder)
    rows, stats = score_tier("A", sets, books, questions, embedder, tokenizer, "pooled", cfg)
    windows = {"windows": [SimpleNamespace(text=t) for b in books for t in sentence_windows(b)[2]]}
    over = limit_report(windows, embedder).iloc[0]
    n_ds = rows.groupby("dataset").qid.nunique().to_dict()
    names = ", ".join(b.book_id for b in books) if len(books) <= 8 else f"every local book of {len(n_ds)} datasets"
    note = (f"tier A: {len(books)} whole books ({names}), {', '.join(f'{n} {d} q' for d, n in n_ds.items())}, {len(methods)} "
            f"LLM-free methods{'' if cfg.tier_a_embedding_presets else ' (lib: presets that embed left out)'} | "
            f"dense = sentence windows pooled per chunk (no chunk is cut; {over['over embedder limit']} of "
            f"{over['chunks']} windows longer than the embedder's {over['embedder limit']} tokens)")
    return _result("A", rows, stats, cfg, note), sets, rule


def run_tier_b(cfg: Any, chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], embedder: Any,
               tokenizer: Any) -> TierResult:
    """Tier B: ``chunk_sets`` restricted to the units every set covers, each chunk text embedded (rewritten chunks
    have no sentences to pool); the questions whose evidence or kept answer lies in those units."""
    chunk_sets = restrict_to_units(chunk_sets, set(common_units(chunk_sets)))
    by_book = {b.book_id: b for b in books}
    units = {(c.book_id, c.unit_id) for cs in chunk_sets.values() for c in cs}
    text = {bid: normalize_for_match(" ".join(by_book[bid].text[u.start:u.end] for u in by_book[bid].units
                                              if (bid, u.unit_id) in units)) for bid in {b for b, _ in units}}
    questions = [q for q in benchmark_questions([by_book[b] for b in text])[0] if q.relevant(text[q.book_id])]
    if not questions:
        raise ValueError(f"tier B: no question's evidence or kept answer lies in the {len(units)} common unit(s)")
    rows, stats = score_tier("B", chunk_sets, [by_book[b] for b in text], questions, embedder, tokenizer, "text", cfg)
    llm = [m for m in chunk_sets if needs_llm(m)]
    note = (f"tier B: {len(units)} unit(s) every chunk set covers, {len(questions)} q | LLM methods: "
            f"{', '.join(llm) or 'none'} | dense = chunk texts embedded")
    return _result("B", rows, stats, cfg, note)


def verdict(result: TierResult, dataset: str = "all", score: str | None = None) -> str:
    """The paired table in words: which methods differ from the reference with a 95 % interval that excludes 0, and
    whether the narrative-aware methods are among them."""
    p = result.paired
    ds = dataset if dataset in set(p.dataset) else p.dataset.iloc[-1]
    score = score or p.score.iloc[0]
    t = p[(p.dataset == ds) & (p.score == score)]
    if t.empty:
        return f"tier {result.tier}: no paired comparison on {ds}"
    ref, n = t.reference.iloc[0], int(t.n_questions.iloc[0])
    sig = t[t.excludes_zero]
    better = ", ".join(f"{r.method} ({r.mean_difference:+.2f})" for r in sig.itertuples() if r.mean_difference > 0)
    worse = ", ".join(f"{r.method} ({r.mean_difference:+.2f})" for r in sig.itertuples() if r.mean_difference < 0)
    narrative = [m for m in t.method if m.split("@")[0] in NARRATIVE_AWARE]
    nar = [f"{m} {'differs' if m in set(sig.method) else 'does not differ'}" for m in narrative]
    return (f"Tier {result.tier}, {ds}, {score}, {n} questions: against {ref}, better with a 95 % interval above 0: "
            f"{better or 'none'}; worse (below 0): {worse or 'none'}; every other method's interval includes 0. "
            f"Narrative-aware: {'; '.join(nar) if nar else 'none in this tier'}.")


def pooling_check_for(cfg: Any, books: Sequence[Any], chunk_sets: Mapping[str, Sequence[Any]], embedder: Any):
    """:func:`pooling_check` on the ``cfg.pooling_check_books`` shortest books with questions, for
    ``cfg.pooling_check_methods`` (empty = every set in ``chunk_sets``)."""
    questions = benchmark_questions(books)[0]
    asked = {q.book_id for q in questions}
    sample = sorted((b for b in books if b.book_id in asked), key=lambda b: len(b.text))[:cfg.pooling_check_books]
    methods = cfg.pooling_check_methods or tuple(chunk_sets)
    unknown = [m for m in methods if m not in chunk_sets]
    if unknown:
        raise ValueError(f"pooling_check_methods {unknown} are not tier-A chunk sets ({', '.join(chunk_sets)})")
    return pooling_check({m: chunk_sets[m] for m in methods}, sample, questions, embedder, cfg.retrieve_top_k)


def cli(args: Any) -> int:
    """``python -m litseg_nb retrieval-benchmark``: tier A on every local book (or ``--books``), the pooling check,
    tier B on the profile's chunk artifacts; tables in outputs/<profile>/tables/retrieval_benchmark_*."""

    t0 = time.perf_counter()
    try:
        chosen = tuple(b.strip() for x in args.books for b in x.split(",") if b.strip())
        if args.books and not chosen:
            raise ValueError(f"--books {','.join(args.books)!r} names no book; give book ids, comma-separated "
                             "(e.g. gutenqa:Emma_-_Jane_Austen,literaryqa:1710), or leave --books out for every book")
        presets = {} if args.embedding_presets is None else {"tier_a_embedding_presets": args.embedding_presets}
        cfg = RagConfig.for_profile(args.profile, seed=args.seed, pooling_check_methods=(), tier_a_books=chosen,
                                    **presets)
        ensure_writable(outputs_dir(cfg.profile) / "tables")  # before the work, not after it
        books = tier_a_books(cfg)  # an unknown book fails here, before any model loads
        embedder = load_embedder(cfg.embedding)
        tokenizer = MemoTokenizer(load_tokenizer("all-MiniLM-L6-v2"))
        a, sets, rule = run_tier_a(cfg, books, embedder, tokenizer)
        pool = pooling_check_for(cfg, books, sets, embedder)
        b_books = load_corpus(cfg.corpus)  # the books notebook 05 evaluates the chunk artifacts on
        paths = {m: p for m, p in chunk_set_files.discover(cfg.profile)[0].items() if needs_llm(m) or m in sets}
        b = None
        if any(needs_llm(m) for m in paths):
            found = chunk_set_files.load_evaluable(paths, [x.book_id for x in b_books])[0]
            b = run_tier_b(cfg, found, b_books, embedder, tokenizer)
    except (LitsegError, ValueError, FileNotFoundError) as exc:
        print(f"[litseg_nb] retrieval-benchmark: {exc}", file=sys.stderr)
        return 2
    label = f"{cfg.describe()} | tokens = all-MiniLM-L6-v2"
    save_table(a.summary, "retrieval_benchmark_tier_a", cfg.profile, f"{label} | {a.note}")
    save_table(a.paired, "retrieval_benchmark_tier_a_paired", cfg.profile, f"{label} | {a.note}")
    save_table(rule, "retrieval_benchmark_literaryqa_rule", cfg.profile, f"{label} | {RULE_NOTE}")
    save_table(pool, "retrieval_benchmark_pooling_check", cfg.profile,
               f"{label} | method-ranking Spearman {pool.attrs['method_ranking_rho']:.2f}")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500):
        print(label)
        print(a.note)
        for ds in sorted(a.summary.dataset.unique()):
            print(a.ranking(ds, cfg.paired_budget)[["rank", "method", "n_questions", f"hit@{cfg.paired_budget}",
                                                    f"MRR@{cfg.retrieve_top_k}", "mean_tokens"]].to_string(index=False))
        print(verdict(a))
        print(f"pooling check: method-ranking Spearman {pool.attrs['method_ranking_rho']:.2f} on "
              f"{int(pool.n_questions.iloc[0])} questions")
        if b is None:
            print(f"tier B: not run: no LLM chunk set in {outputs_dir(cfg.profile) / 'artifacts' / 'chunks'} "
                  "(notebooks 02-04 write them)")
        else:
            save_table(b.summary, "retrieval_benchmark_tier_b", cfg.profile, f"{label} | {b.note}")
            save_table(b.paired, "retrieval_benchmark_tier_b_paired", cfg.profile, f"{label} | {b.note}")
            print(b.note)
            print(verdict(b))
    print(f"[litseg_nb] retrieval-benchmark: {time.perf_counter() - t0:.0f} s; tables: "
          f"{outputs_dir(cfg.profile) / 'tables'}/retrieval_benchmark_*")
    return 0


def plot_budget_curves(summary, methods: Sequence[str], mode: str = "hybrid"):
    """hit@B against B, one line per method (at most 8), one panel per dataset of ``summary`` (the run's label goes
    under it as :func:`~litseg_nb.core.artifacts.save_figure`'s footer)."""
    import matplotlib.pyplot as plt

    if len(methods) > 8:
        raise ValueError(f"{len(methods)} methods: a readable figure has at most 8 lines")
    s = summary[(summary["mode"] == mode) & summary.method.isin(methods)]
    budgets = sorted(int(c.split("@")[1]) for c in s.columns if c.startswith("hit@"))
    datasets = sorted(s.dataset.unique())
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.4), squeeze=False, sharey=True)
    for ax, ds in zip(axes[0], datasets):
        for m in methods:
            r = s[(s.dataset == ds) & (s.method == m)]
            if len(r):
                ax.plot(budgets, [r[f"hit@{b}"].iloc[0] for b in budgets], marker="o", label=m)
        n = int(s[s.dataset == ds].n_questions.max())
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
        ax.set(xticks=budgets, xticklabels=[str(b) for b in budgets], xlabel="budget B (tokens of chunk text)",
               title=f"{ds} ({n} questions)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"hit@B ({mode} retrieval)")
    axes[0][-1].legend(fontsize=7, loc="upper left", frameon=False)
    fig.tight_layout()
    return fig
