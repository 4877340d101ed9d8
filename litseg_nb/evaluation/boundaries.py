"""Do the methods find the boundaries the authors marked? (notebook 06, ``boundaries`` command)

Per gold window: P/R/F1 within ±t sentences, NLTK's Pk and WindowDiff, segeval's B, and lift over random boundaries
(exact E[TP] where possible, else seeded draws), with bootstrap intervals over books and permutation p-values."""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import contextlib
import itertools
import json
import math
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..config import ConfigError, StageConfig, at_least, between, one_of
from ..chunkers.config import LLM_METHODS, BaselinesConfig
from ..core.schema import Book, Chunk, TextRow, check_coverage, read_rows, write_jsonl
from ..litseg.config import LitSegConfig
from .boundary_gold import (GOLD_RULES, window_gold, GoldSet, build_gold, corpus_books, hand_checked_books,
                            local_book_files, local_book_texts, ornament_census)
from ..core.cache import StepCache
from ..core.progress import bar
from ..corpus import book_from_json, book_to_json, data_files
from ..core.paths import data_dir, outputs_dir
from ..preprocess.gold import GOLD_FILE
from ..segmenters.book_runs import run_chunker
from ..llm import make_backend, release_backend
from ..llm.embeddings import load_embedder
from ..segmenters.registry import chunk_units, get_method, METHOD_NAMES
from ..core.chunk_align import import_chunks
from ..core.artifacts import save_table
from ..chunkers.base import chunks_from_boundaries
from ..chunkers.scores import top_k, unit_scores
from ..core.safe_io import check_name, ensure_writable

SOURCES = ("hand-checked", "corpus")
NON_LLM = ("token", "recursive", "semantic", "paragraph", "texttiling", "c99", "boundary-model")
SEGMENTERS = ("litseg",)  # the paper's segmenters scored here (LitSeg-Lite: from its chunk set, --chunks)
#: rows the benchmark adds itself: no inner boundary, one cut at the paragraph start nearest the middle
REFERENCE_ROWS = ("no-boundary", "one-cut")
#: how the table's label starts (``--name`` replaces only a table that starts so)
LABEL_PREFIX = "boundary benchmark | "
#: suffix of a score-based method's row with exactly ``|G|`` boundaries per window (its top-scored positions)
TOP_G = "@top-G"


@dataclass(frozen=True)
class BoundaryConfig(StageConfig):
    """The boundary benchmark: where the gold comes from, window sizes, methods, statistics."""

    methods: tuple[str, ...] = one_of(NON_LLM, *NON_LLM)  # rules/embedder methods: every window
    llm_methods: tuple[str, ...] = one_of(LLM_METHODS, *LLM_METHODS)  # test/smoke: their own subsets
    llm_max_windows: int = at_least(0, 0)  # windows the LLM methods segment (0 = all), chapter and scene alternating
    embedder_max_windows: int = at_least(0, 0)  # windows the embedding-based semantic chunker segments (0 = all)
    # the paper's segmenter on the first ``segmenter_max_windows`` windows (LitSeg-Lite: --chunks)
    segmenters: tuple[str, ...] = one_of(SEGMENTERS, *SEGMENTERS)
    segmenter_max_windows: int = at_least(8, 0)
    # ``lib:`` splitters on every window (LLM ones on the LLM methods' windows)
    library_methods: tuple[str, ...] = ()
    source: str = one_of("corpus", *SOURCES)  # hand-checked: tests/structure_gold.jsonl books; corpus: cfg.corpus
    forms: tuple[str, ...] = one_of(("narrative",), "narrative", "collection", "play", "poetry", "non-fiction")
    clean_gold: bool = True  # remove heading text left behind by the headings
    reference_rows: bool = True  # the no-boundary and one-cut rows
    max_books: int = at_least(0, 0)  # source books (0 = all)
    max_windows_per_book: int = at_least(0, 0)  # per kind (0 = all)
    window_sentences: int = at_least(120, 4)
    min_side_sentences: int = at_least(5, 1)
    tolerances: tuple[int, ...] = (0, 1, 2)
    headline_tolerance: int = at_least(1, 0)  # t of the lift interval, the p-value and the figure
    random_draws: int = at_least(1000, 1000)
    bootstrap: int = at_least(1000, 100)
    ci_level: float = between(0.95, 0.5, 0.999)

    def __post_init__(self) -> None:
        super().__post_init__()
        for m in self.library_methods:
            if not (isinstance(m, str) and m.startswith("lib:")):
                raise ConfigError(f"BoundaryConfig.library_methods: {m!r} is not a lib: method")
        if self.headline_tolerance not in self.tolerances:
            raise ConfigError(f"BoundaryConfig.headline_tolerance: {self.headline_tolerance} is not one of "
                              f"tolerances {self.tolerances}")

    def describe(self) -> str:  # noqa: D102
        llm = LitSegConfig.for_profile(self.profile).llm
        src = ("hand-checked books of tests/structure_gold.jsonl" if self.source == "hand-checked"
               else "corpus " + "+".join(self.corpus.datasets) + " (GutenQA chapters from the dataset, "
               "other books' detected units: not hand-checked)")
        return (f"{self.describe_models()} | gold: {src}, windows of <= {self.window_sentences} sentences"
                + (f", <= {self.max_windows_per_book}/kind/book" if self.max_windows_per_book else "")
                + (f" | LLM methods on {self.llm_max_windows} windows" if self.llm_methods and self.llm_max_windows
                   else "")
                + (f" | semantic on {self.embedder_max_windows} windows" if "semantic" in self.methods
                   and self.embedder_max_windows else "")
                + (f" | {','.join(self.segmenters)} on {self.segmenter_max_windows or 'all'} windows "
                   f"(LLM={llm.model}, structured={'on' if llm.structured_output else 'off'})"
                   if self.segmenters else ""))


def gap_string(n: int, boundaries: Sequence[int]) -> str:
    """The window's gaps as NLTK reads them: ``n-1`` characters, ``"1"`` at gap ``b-2`` per boundary ``b``."""
    s = ["0"] * max(n - 1, 0)
    for b in boundaries:
        s[b - 2] = "1"
    return "".join(s)


def pk_k(n: int, n_gold: int) -> int:
    """Half the mean gold segment length in sentences (at least 1, at most n-1)."""
    return int(min(max(1, round(n / (2 * (n_gold + 1)))), max(n - 1, 1)))


def pk(n: int, gold: Sequence[int], hyp: Sequence[int], k: int | None = None) -> float:
    """Pk of one window with NLTK's implementation."""
    from nltk.metrics.segmentation import pk as nltk_pk

    return float(nltk_pk(gap_string(n, gold), gap_string(n, hyp), k=k or pk_k(n, len(gold))))


def windowdiff(n: int, gold: Sequence[int], hyp: Sequence[int], k: int | None = None) -> float:
    """WindowDiff of one window with NLTK's implementation."""
    from nltk.metrics.segmentation import windowdiff as nltk_wd

    return float(nltk_wd(gap_string(n, gold), gap_string(n, hyp), k or pk_k(n, len(gold))))


def _window_counts(ind: np.ndarray, k: int) -> np.ndarray:
    """Boundaries inside every window of k gaps, per row of a (draws x gaps) 0/1 matrix."""
    c = np.concatenate([np.zeros((ind.shape[0], 1), dtype=np.int64), np.cumsum(ind, axis=1)], axis=1)
    return c[:, k:] - c[:, :-k]


def pk_wd_many(n: int, gold: Sequence[int], hyps: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Pk and WindowDiff of many hypotheses at once (rows of a draws x (n-1) 0/1 matrix); equals NLTK."""
    ref = np.zeros((1, n - 1), dtype=np.int64)
    ref[0, np.asarray(gold, dtype=np.int64) - 2] = 1
    rc, hc = _window_counts(ref, k), _window_counts(hyps.astype(np.int64), k)
    return ((rc > 0) != (hc > 0)).mean(axis=1), (rc != hc).mean(axis=1)


def match_count(gold: Sequence[int], hyp: Sequence[int], t: int) -> int:
    """Gold boundaries found within ±t, each hypothesis boundary used once (greedy = maximum matching)."""
    hs = sorted(set(hyp))
    used = [False] * len(hs)
    j0, tp = 0, 0
    for g in sorted(set(gold)):
        while j0 < len(hs) and (hs[j0] < g - t or used[j0]):
            j0 += 1
        j = j0
        while j < len(hs) and hs[j] <= g + t:
            if not used[j] and abs(hs[j] - g) <= t:
                used[j] = True
                tp += 1
                break
            j += 1
    return tp


def prf(tp: float, n_hyp: float, n_gold: float) -> tuple[float, float, float]:
    p = tp / n_hyp if n_hyp else 0.0
    r = tp / n_gold if n_gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def masses(n: int, boundaries: Sequence[int]) -> tuple[int, ...]:
    """Segment sizes (segeval's mass format) of ``n`` sentences cut before ``boundaries``."""
    cuts = [1] + sorted(set(b for b in boundaries if 1 < b <= n)) + [n + 1]
    return tuple(b - a for a, b in zip(cuts, cuts[1:]))


def boundary_similarity_parts(n: int, gold: Sequence[int], hyp: Sequence[int]) -> tuple[float, float]:
    """(numerator, denominator) of segeval's boundary similarity B of one window (pooled: the micro B)."""
    import segeval

    if not any(1 < b <= n for b in gold) and not any(1 < b <= n for b in hyp):
        return 0.0, 0.0  # segeval raises on two segmentations without a boundary: nothing to edit, B = 1
    num, den, *_ = segeval.boundary_similarity(masses(n, hyp), masses(n, gold), n_t=2, return_parts=True)
    return float(num), float(den)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def expected_tp(gold: Sequence[int], candidates: Sequence[int], k: int, t: int) -> float | None:
    """Exact (hypergeometric) E[TP] of k random candidates; None when gold neighbourhoods overlap."""
    cand = sorted(set(candidates))
    n = len(cand)
    near = [{c for c in cand if abs(c - g) <= t} for g in sorted(set(gold))]
    seen: set[int] = set()
    for s in near:
        if s & seen:
            return None
        seen |= s
    if k == 0:
        return 0.0
    # per gold boundary: 1 - P(no drawn candidate within ±t)
    return sum((1.0 - (0.0 if n - len(s) < k else math.exp(_log_comb(n - len(s), k) - _log_comb(n, k)))
                for s in near), 0.0)


def random_draws(candidates: Sequence[int], k: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` x ``k`` boundary positions, each row k distinct candidates drawn uniformly."""
    cand = np.asarray(sorted(set(candidates)), dtype=np.int64)
    if k == 0:
        return np.zeros((draws, 0), dtype=np.int64)
    idx = np.argpartition(rng.random((draws, len(cand))), k - 1, axis=1)[:, :k]
    return np.sort(cand[idx], axis=1)


def draws_tp(gold: Sequence[int], drawn: np.ndarray, t: int) -> np.ndarray:
    """TP of each row of ``drawn`` (vectorised where the gold neighbourhoods are disjoint)."""
    g = np.asarray(sorted(set(gold)), dtype=np.int64)
    if drawn.shape[1] == 0 or len(g) == 0:
        return np.zeros(drawn.shape[0], dtype=np.int64)
    if len(g) < 2 or np.min(np.diff(g)) > 2 * t:
        near = np.abs(drawn[:, :, None] - g[None, None, :]) <= t  # draws x k x gold
        return near.any(axis=1).sum(axis=1)
    return np.array([match_count(g.tolist(), row.tolist(), t) for row in drawn], dtype=np.int64)


@dataclass
class WindowScore:
    method: str
    book_id: str
    unit_id: str
    kind: str
    n: int
    gold: list[int]
    hyp: list[int]
    paragraph_positions: bool  # every method boundary is a paragraph start
    paragraph_starts: list[int]
    tp: dict[int, int]
    pk: float
    wd: float
    # per candidate kind ("sentence", "paragraph"): E[TP] per t, the draws' TP per t, mean random Pk/WD
    exp_tp: dict[str, dict[int, float]] = field(default_factory=dict)
    draw_tp: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    rand_pk: dict[str, float] = field(default_factory=dict)
    rand_wd: dict[str, float] = field(default_factory=dict)
    source_book: str = ""
    b_num: float = 0.0  # boundary similarity B's numerator and denominator (n_t = 2)
    b_den: float = 0.0


def method_boundaries(chunks: Sequence[Chunk], n: int) -> list[int]:
    """The chunk starts inside a window (2..n): its boundaries."""
    return sorted({c.from_idx for c in chunks if 1 < c.from_idx <= n})


def score_window(method: str, book: Book, unit_id: str, chunks: Sequence[Chunk], tolerances: Sequence[int],
                 draws: int, seed: int) -> WindowScore:
    """Every statistic of one method on one window."""
    unit = book.unit(unit_id)
    rep = check_coverage(unit, chunks)
    if not rep.ok:
        raise ValueError(f"{method}: chunks of window {book.book_id}/{unit_id} leave sentences "
                         f"{list(rep.missing)[:10]} uncovered (invalid {list(rep.out_of_range)[:10]}): a chunk "
                         f"set must cover every sentence of a window it segments")
    g = window_gold(book, unit_id)
    n, gold = unit.n_sentences, list(g["gold"])
    para = [p for p in g["paragraph_starts"] if p > 1]
    hyp = method_boundaries(chunks, n)
    k = pk_k(n, len(gold))
    ws = WindowScore(method, book.book_id, unit_id, g["kind"], n, gold, hyp, set(hyp) <= set(para), para,
                     {t: match_count(gold, hyp, t) for t in tolerances}, pk(n, gold, hyp, k),
                     windowdiff(n, gold, hyp, k), source_book=book.meta.get("source_book", book.book_id))
    ws.b_num, ws.b_den = boundary_similarity_parts(n, gold, hyp)
    for kind, cand in (("sentence", list(range(2, n + 1))), ("paragraph", para)):
        kk = min(len(hyp), len(cand))
        rng = np.random.default_rng([seed, kk, len(cand), n, zlib.crc32(f"{book.book_id}/{unit_id}".encode())])
        drawn = random_draws(cand, kk, draws, rng)
        ws.draw_tp[kind] = {t: draws_tp(gold, drawn, t) for t in tolerances}
        ws.exp_tp[kind] = {}
        for t in tolerances:
            e = expected_tp(gold, cand, kk, t)
            ws.exp_tp[kind][t] = float(ws.draw_tp[kind][t].mean()) if e is None else e
        ind = np.zeros((draws, n - 1), dtype=np.int64)
        if kk:
            np.put_along_axis(ind, drawn - 2, 1, axis=1)
        p_, w_ = pk_wd_many(n, gold, ind, k)
        ws.rand_pk[kind], ws.rand_wd[kind] = float(p_.mean()), float(w_.mean())
    return ws


def _per_window(chunks: Sequence[Chunk], by_book: Mapping[str, Book]) -> dict[tuple[str, str], list[Chunk]]:
    """A method's chunks per (window book, window), chunks of other books left out."""
    per: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        if c.book_id in by_book:
            per.setdefault((c.book_id, c.unit_id), []).append(c)
    return per


def score_chunk_sets(chunk_sets: Mapping[str, Sequence[Chunk]], books: Sequence[Book], cfg: BoundaryConfig,
                     progress: bool = False) -> list[WindowScore]:
    """Score every method on every window it segmented (windows without its chunks are left out)."""
    by_book = {b.book_id: b for b in books}
    out = []
    for method, chunks in chunk_sets.items():
        per = _per_window(chunks, by_book)
        if not per:
            raise ValueError(f"{method}: none of its chunks belongs to a boundary window (book ids "
                             f"'windows:<source>'; run `python -m litseg_nb boundaries --export-windows` to get them)")
        for (bid, uid), cs in bar(sorted(per.items()), progress=progress, desc=f"scoring {method}"):
            out.append(score_window(method, by_book[bid], uid, cs, cfg.tolerances, cfg.random_draws, cfg.seed))
    return out


def reference_chunk_sets(books: Sequence[Book]) -> dict[str, list[Chunk]]:
    """The ``no-boundary`` row (one chunk per window) and ``one-cut`` (nearest the middle)."""

    out: dict[str, list[Chunk]] = {m: [] for m in REFERENCE_ROWS}
    for b in books:
        for u in b.units:
            out["no-boundary"] += chunks_from_boundaries(b, u, "no-boundary", [1])
            para = [p for p in window_gold(b, u.unit_id)["paragraph_starts"] if p > 1]
            mid = (u.n_sentences + 1) / 2
            cut = [min(para, key=lambda p: (abs(p - mid), p))] if para else []
            out["one-cut"] += chunks_from_boundaries(b, u, "one-cut", [1] + cut)
    return out


def top_g_chunk_sets(chunk_sets: Mapping[str, Sequence[Chunk]], books: Sequence[Book]) -> dict[str, list[Chunk]]:
    """``<method>@top-G``: per window the ``|G|`` top-scored positions of a score-based method."""

    by_book = {b.book_id: b for b in books}
    out: dict[str, list[Chunk]] = {}
    for method, chunks in chunk_sets.items():
        if method.endswith(TOP_G) or method in REFERENCE_ROWS:
            continue
        rows: list[Chunk] = []
        for (bid, uid), cs in sorted(_per_window(chunks, by_book).items()):
            b, u = by_book[bid], by_book[bid].unit(uid)
            sc = unit_scores(cs, u.n_sentences, method)
            if sc is None:
                rows = []
                break  # a method scores every window it segments, or it gets no top-G row
            rows += chunks_from_boundaries(b, u, method + TOP_G, [1] + top_k(sc, len(window_gold(b, uid)["gold"])))
        if rows:
            out[method + TOP_G] = rows
    return out


def benchmark_sets(chunk_sets: Mapping[str, Sequence[Chunk]], books: Sequence[Book],
                   cfg: "BoundaryConfig") -> dict[str, list[Chunk]]:
    """The methods' chunk sets with their top-G rows (score-based methods) and the reference rows."""
    out = {m: list(c) for m, c in chunk_sets.items()}
    out.update(top_g_chunk_sets(chunk_sets, books))
    if cfg.reference_rows:
        out.update(reference_chunk_sets(books))
    return out


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    v = values[np.isfinite(values)]
    if not len(v):
        return float("nan"), float("nan")
    return float(np.quantile(v, a)), float(np.quantile(v, 1 - a))


def summarize(scores: Sequence[WindowScore], cfg: BoundaryConfig) -> "pd.DataFrame":  # noqa: F821
    """One row per (method, kind): P/R/F1, B, Pk, WindowDiff, lifts, intervals and p-values."""
    import pandas as pd

    rows = []
    th = cfg.headline_tolerance
    keys = list(dict.fromkeys((s.method, s.kind) for s in scores))
    for method, kind in keys:
        ws = [s for s in scores if s.method == method and s.kind == kind]
        allm = [s for s in scores if s.method == method]
        base = "paragraph" if all(s.paragraph_positions for s in allm) else "sentence"
        n_gold = sum(len(s.gold) for s in ws)
        n_hyp = sum(len(s.hyp) for s in ws)
        row: dict[str, Any] = {"method": method, "kind": kind, "n_windows": len(ws), "n_books": len({s.source_book for s in ws}),
                               "n_gold": n_gold, "n_boundaries": n_hyp, "random_positions": base,
                               "share_at_paragraph_starts": (sum(len(set(s.hyp) & set(s.paragraph_starts)) for s in ws)
                                                             / n_hyp if n_hyp else float("nan")),
                               "windows_without_cut": sum(1 for s in ws if not s.hyp)}
        for t in cfg.tolerances:
            tp = sum(s.tp[t] for s in ws)
            p, r, f = prf(tp, n_hyp, n_gold)
            row.update({f"P@{t}": p, f"R@{t}": r, f"F1@{t}": f})
            for kind_c in ("sentence", "paragraph"):
                row[f"R_random_{kind_c}@{t}"] = sum(s.exp_tp[kind_c][t] for s in ws) / n_gold if n_gold else 0.0
            e = sum(s.exp_tp[base][t] for s in ws)
            row[f"lift@{t}"] = tp / e if e else float("nan")
            for kind_c in ("sentence", "paragraph"):  # both, whatever the method's positions
                e_c = sum(s.exp_tp[kind_c][t] for s in ws)
                row[f"lift_vs_{kind_c}@{t}"] = tp / e_c if e_c else float("nan")
        b_num, b_den = sum(s.b_num for s in ws), sum(s.b_den for s in ws)
        row["B"] = b_num / b_den if b_den else 1.0
        row["Pk"] = float(np.mean([s.pk for s in ws]))
        row["WindowDiff"] = float(np.mean([s.wd for s in ws]))
        row["Pk_random"] = float(np.mean([s.rand_pk[base] for s in ws]))
        row["WindowDiff_random"] = float(np.mean([s.rand_wd[base] for s in ws]))
        # per book: TP, E[TP] of both nulls, |G|, |H|, B parts at the headline tolerance
        books = sorted({s.source_book for s in ws})
        bi = [books.index(s.source_book) for s in ws]
        tp_b, es_b, ep_b, g_b, h_b, bn_b, bd_b = (np.bincount(bi, [f(s) for s in ws], len(books)) for f in (
            lambda s: s.tp[th], lambda s: s.exp_tp[base][th], lambda s: s.exp_tp["paragraph"][th],
            lambda s: len(s.gold), lambda s: len(s.hyp), lambda s: s.b_num, lambda s: s.b_den))
        with np.errstate(divide="ignore", invalid="ignore"):
            p_b, r_b = np.where(h_b > 0, tp_b / h_b, 0.0), tp_b / g_b
            f_b = np.where(p_b + r_b > 0, 2 * p_b * r_b / (p_b + r_b), 0.0)
            row[f"F1@{th}_macro"] = float(np.mean(f_b))
            row[f"R@{th}_macro"] = float(np.mean(r_b))
            row["B_macro"] = float(np.mean(np.where(bd_b > 0, bn_b / bd_b, 1.0)))
            lp_b = tp_b / ep_b
            row[f"lift_vs_paragraph@{th}_macro"] = float(np.nanmean(lp_b[np.isfinite(lp_b)])) \
                if np.isfinite(lp_b).any() else float("nan")
        # bootstrap over books of the lifts (own null, paragraph null) and F1 at the headline tolerance
        rng = np.random.default_rng([cfg.seed, 26])
        idx = rng.integers(0, len(books), size=(cfg.bootstrap, len(books)))
        tps, es, ep, gs, hs = tp_b[idx].sum(1), es_b[idx].sum(1), ep_b[idx].sum(1), g_b[idx].sum(1), h_b[idx].sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            p_, r_ = tps / hs, tps / gs
            f1s = np.where(p_ + r_ > 0, 2 * p_ * r_ / (p_ + r_), 0.0)
            row[f"lift@{th}_lo"], row[f"lift@{th}_hi"] = _interval(tps / es, cfg.ci_level)
            row[f"lift_vs_paragraph@{th}_lo"], row[f"lift_vs_paragraph@{th}_hi"] = _interval(tps / ep, cfg.ci_level)
        row[f"F1@{th}_lo"], row[f"F1@{th}_hi"] = _interval(f1s, cfg.ci_level)
        # permutation p-values: per window as many random positions of the null's kind as the method has
        obs = sum(s.tp[th] for s in ws)
        for name, null in ((f"p_value@{th}", base), (f"p_vs_paragraph@{th}", "paragraph")):
            tot = sum((s.draw_tp[null][th] for s in ws), np.zeros(cfg.random_draws))
            row[name] = float((1 + np.sum(tot >= obs)) / (1 + cfg.random_draws)) if n_hyp else float("nan")
        rows.append(row)
    df = pd.DataFrame(rows)
    return df.round(4) if len(df) else df


def headline_table(table: "pd.DataFrame", cfg: BoundaryConfig) -> "pd.DataFrame":  # noqa: F821
    """The columns the conclusion rests on, at ``headline_tolerance``."""
    import pandas as pd

    th = cfg.headline_tolerance

    def ci(r):
        if not np.isfinite(r[f"lift_vs_paragraph@{th}"]):
            return "–"
        return f"{r[f'lift_vs_paragraph@{th}']:.2f} [{r[f'lift_vs_paragraph@{th}_lo']:.2f}, {r[f'lift_vs_paragraph@{th}_hi']:.2f}]"

    out = pd.DataFrame({
        "method": table["method"], "kind": table["kind"], "windows": table["n_windows"], "books": table["n_books"],
        "gold": table["n_gold"], "boundaries": table["n_boundaries"],
        f"lift vs paragraphs@{th} [95% CI]": table.apply(ci, axis=1),
        f"p vs paragraphs@{th}": table[f"p_vs_paragraph@{th}"],
        f"F1@{th}": table[f"F1@{th}"], f"F1@{th} macro": table[f"F1@{th}_macro"],
        "B": table["B"], "B macro": table["B_macro"],
        "Pk": table["Pk"], "Pk random": table["Pk_random"], "WD": table["WindowDiff"],
        "WD random": table["WindowDiff_random"],
    })
    return out.round(3)


def plot_lift(table: "pd.DataFrame", cfg: BoundaryConfig):  # noqa: F821
    """Lift over random paragraph starts per method and kind, with its interval over books; 1 = chance."""
    import matplotlib.pyplot as plt

    th = cfg.headline_tolerance
    kinds = [k for k in ("chapter", "scene") if k in set(table["kind"])]
    table = table[~table["method"].isin(REFERENCE_ROWS)]
    methods = list(dict.fromkeys(table["method"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(methods) + 2), 3.8))
    width = 0.8 / max(len(kinds), 1)
    for j, kind in enumerate(kinds):
        sub = table[table["kind"] == kind].set_index("method").reindex(methods)
        x = np.arange(len(methods)) + (j - (len(kinds) - 1) / 2) * width
        y = sub[f"lift_vs_paragraph@{th}"].to_numpy(float)
        lo = y - sub[f"lift_vs_paragraph@{th}_lo"].to_numpy(float)
        hi = sub[f"lift_vs_paragraph@{th}_hi"].to_numpy(float) - y
        ax.bar(x, y, width=width, label=f"{kind} breaks", alpha=0.8)
        ax.errorbar(x, y, yerr=np.vstack([np.nan_to_num(lo), np.nan_to_num(hi)]), fmt="none", ecolor="black",
                    capsize=3, lw=1)
        for xi, yi in zip(x, y):
            if not np.isfinite(yi):  # no inner boundary at all: nothing to compare with chance
                ax.text(xi, 0.05, "no cut", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_xticks(np.arange(len(methods)), methods, rotation=30, ha="right")
    ax.set_ylabel(f"lift over random paragraph starts @±{th}")
    ax.set_title("Recovering the authors' boundaries: lift over random paragraph starts, 95% CI over books")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig


def load_gold(cfg: BoundaryConfig):
    """The window books and per-book counts for ``cfg`` (cached)."""
    root = data_dir()
    params = {**{k: getattr(cfg, k) for k in ("source", "max_books", "max_windows_per_book", "window_sentences",
                                               "min_side_sentences", "seed", "forms", "clean_gold")},
              "rules": GOLD_RULES}
    hand = cfg.source == "hand-checked"
    if hand:
        files = [GOLD_FILE] + local_book_files(root)
    else:
        files = data_files(cfg.corpus, root)
        params["corpus"] = cfg.corpus.to_dict()
    cache = StepCache("boundary-gold", config=params, inputs={"files": files, "splitter": cfg.corpus.sentence_splitter})
    if cache.exists():
        d = cache.load()
        return GoldSet([book_from_json(b) for b in d["books"]], d["counts"], d["shapes"])
    if hand:
        sources, rows = hand_checked_books(root, cfg.corpus.sentence_splitter, cfg.max_books)
    else:
        sources, rows = corpus_books(cfg.corpus)[:cfg.max_books or None], ()
    gs = build_gold(sources, cfg.window_sentences, cfg.min_side_sentences, cfg.seed, cfg.max_windows_per_book, hand,
                    rows, forms=cfg.forms if hand else None, clean=cfg.clean_gold)
    cache.save({"books": [book_to_json(b) for b in gs.books], "counts": gs.counts, "shapes": gs.shapes})
    return gs


def llm_windows(books: Sequence[Book], n: int) -> tuple[str, ...]:
    """``book_id/unit_id`` of the first ``n`` windows, alternating chapter and scene windows, spread over books."""
    queues: dict[str, list[str]] = {"chapter": [], "scene": []}
    for row in itertools.zip_longest(*[[(b, u) for u in b.units] for b in books]):
        for b, u in filter(None, row):
            queues[b.meta["boundary_gold"][u.unit_id]["kind"]].append(f"{b.book_id}/{u.unit_id}")
    out = [w for pair in itertools.zip_longest(queues["scene"], queues["chapter"]) for w in pair if w is not None]
    return tuple(out[:n] if n else out)


def baselines_config(cfg: BoundaryConfig, books: Sequence[Book]):
    """The notebook-04 config the methods run with here (same knobs; the LLM methods on the chosen windows)."""
    units = llm_windows(books, cfg.llm_max_windows) if cfg.llm_methods else ()
    order = {f"{b.book_id}/{u.unit_id}": i for i, (b, u) in enumerate((b, u) for b in books for u in b.units)}
    return BaselinesConfig.for_profile(
        cfg.profile, seed=cfg.seed, llm=cfg.llm.to_dict(), embedding=cfg.embedding.to_dict(),
        methods=tuple(cfg.methods) + tuple(cfg.llm_methods), semantic_books=(), semantic_units="all",
        selection={"strategy": "first", "books": (), "units": tuple(sorted(units, key=order.get)),
                   "min_questions": 0, "max_units": 0, "skip_units_over_words": None})


def segment_windows(books: Sequence[Book], cfg: BoundaryConfig, backend: Any = None, embedder: Any = None,
                    report: Any = None) -> dict[str, list[Chunk]]:
    """Every method's chunks of the windows (cached per method and window book). With segmenters, ``backend``
    is released after the LLM methods (a vLLM engine: the segmenters' models need the GPU)."""
    from tqdm.auto import tqdm

    bcfg = baselines_config(cfg, books)
    names = list(cfg.methods) + list(cfg.llm_methods)
    if any(m in LLM_METHODS for m in names) and backend is None:
        backend = make_backend(cfg.llm)
    if embedder is None and "semantic" in names:
        embedder = load_embedder(cfg.embedding)
    out = {}
    for m in tqdm(names, desc="methods on boundary windows"):
        subset = books
        if m == "semantic" and cfg.embedder_max_windows:
            keep = set(llm_windows(books, cfg.embedder_max_windows))
            subset = [b for b in (dataclasses.replace(b, units=[u for u in b.units if f"{b.book_id}/{u.unit_id}" in keep])
                                  for b in books) if b.units]
        out[m] = run_chunker(m, subset, bcfg, backend=backend, embedder=embedder, report=report)
    for m in cfg.library_methods:
        out[m] = library_chunks(m, books, cfg, backend=backend, embedder=embedder)
    if cfg.segmenters:  # vLLM holds one engine per GPU: each segmenter starts its own model's, then releases it
        release_backend(backend)
    for m in cfg.segmenters:  # its profile config, on the first ``segmenter_max_windows`` windows
        wanted = set(llm_windows(books, cfg.segmenter_max_windows))
        items = [(b, u) for b in books for u in b.units if f"{b.book_id}/{u.unit_id}" in wanted]
        out[m] = _window_chunks(m, items, get_method(m).config.for_profile(cfg.profile, seed=cfg.seed), {})
    return out


def _window_chunks(name: str, items: list, rcfg: Any, inputs: dict[str, Any], backend: Any = None,
                   embedder: Any = None) -> list[Chunk]:
    """A registry method's chunks of ``items`` (window book, unit), cached per window set and config."""
    if not items:
        return []
    spec = get_method(name)
    fp = [(b.book_id, u.unit_id, hashlib.sha256(u.text(b.text).encode()).hexdigest(),
           [(x.start, x.end) for x in u.sentences]) for b, u in items]
    cache = StepCache(f"boundary-chunks-{name.replace(':', '-')}", config=rcfg, inputs={"units": fp, **inputs})
    if cache.exists():
        return [Chunk.from_json(d) for d in cache.load()]
    own = backend is None and spec.needs_llm
    if own:
        backend = make_backend(rcfg.llm)
    if embedder is None and spec.needs_embedder:
        embedder = load_embedder(rcfg.embedding)
    try:
        chunks, _ = chunk_units(name, items, rcfg, backend, embedder)
    finally:
        if own:
            release_backend(backend)
    cache.save([c.to_json() for c in chunks])
    return chunks


def library_chunks(name: str, books: Sequence[Book], cfg: BoundaryConfig, backend: Any = None,
                   embedder: Any = None) -> list[Chunk]:
    """A ``lib:`` splitter's chunks of every window (an LLM one: the LLM methods' windows)."""
    spec = get_method(name)
    wanted = set(llm_windows(books, cfg.llm_max_windows)) if spec.needs_llm else None
    items = [(b, u) for b in books for u in b.units if u.n_sentences
             and (wanted is None or f"{b.book_id}/{u.unit_id}" in wanted)]
    lcfg = spec.config.for_profile(cfg.profile, seed=cfg.seed, llm=cfg.llm.to_dict(),
                                   embedding=cfg.embedding.to_dict())
    return _window_chunks(name, items, lcfg, {"method": name}, backend, embedder)


def census_table() -> "pd.DataFrame":  # noqa: F821
    """:func:`.boundary_gold.ornament_census` over every local book."""

    return ornament_census(local_book_texts(data_dir()))


def shapes_table(gold) -> "pd.DataFrame":  # noqa: F821
    import pandas as pd

    return pd.DataFrame(sorted(gold.shapes.items(), key=lambda x: -x[1]), columns=["shape", "removed"])


def _read_external(path: Path, books: Sequence[Book], name: str) -> list[Chunk]:
    """``--chunks``: the package's chunk JSONL, or rows ``{'book_id', 'text'}`` imported onto the windows; every
    row checked (:func:`~litseg_nb.core.schema.read_rows`), progress on stderr in a terminal."""
    from tqdm.auto import tqdm

    if not path.is_file():
        raise FileNotFoundError(f"--chunks {path}: no such file")
    if path.suffix != ".jsonl":
        raise ValueError(f"--chunks {path}: expected a .jsonl file (the package's chunk JSONL or rows with "
                         "'book_id' and 'text')")
    first = b""
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                first = line
                break
    try:
        package = isinstance(row := json.loads(first), dict) and "from_idx" in row
    except ValueError:
        package = False  # read_rows names the line
    with tqdm(total=path.stat().st_size, unit="B", unit_scale=True, desc=f"reading {path.name}", disable=None,
              file=sys.stderr) as bar:
        rows = list(read_rows(path, Chunk if package else TextRow, progress=bar.update))
    if not rows:
        raise ValueError(f"--chunks {path}: the file holds no rows")
    if package:
        return rows
    by_book: dict[str, list[str]] = {}
    for r in rows:
        by_book.setdefault(r.book_id, []).append(r.text)
    index = {b.book_id: b for b in books}
    out = []
    for bid, texts in tqdm(by_book.items(), desc=f"aligning {path.name}", disable=None, file=sys.stderr):
        if bid not in index:
            raise ValueError(f"--chunks {path}: book {bid!r} is not a boundary window book of this profile")
        chunks, rep = import_chunks(index[bid], texts, name, source=str(path))
        print(rep.summary(), file=sys.stderr)
        out.extend(c for c in chunks if c.unit_id)
    return out


def chunk_set_names(files: Sequence[str], methods: Sequence[str]) -> dict[str, Path]:
    """``{set name: file}`` of ``--chunks`` files: a set is named after its file, and a name may be neither
    another file's nor a row the benchmark adds (``methods``, the reference rows, ``<method>@top-G``)."""
    out: dict[str, Path] = {}
    for f in files:
        path = Path(f)
        name = path.stem
        if name in out:
            raise ValueError(f"--chunks {out[name]} and {path} both name the set {name!r} (a set takes its file's "
                             "name): rename one file")
        if name in methods or name in REFERENCE_ROWS or name.endswith(TOP_G):
            raise ValueError(f"--chunks {path}: its set name {name!r} (the file's name) is also a row the benchmark "
                             "computes itself: rename the file")
        out[name] = path
    return out


def table_name(name: str, profile: str) -> str:
    """``--name``: a plain name that replaces no table of a notebook or another command (``NN_...``,
    ``retrieval_benchmark...``, or an existing table whose label is not this benchmark's)."""
    if not name:
        return "boundaries"
    check_name(name, "--name")
    if re.match(r"\d\d_", name) or name.startswith("retrieval_benchmark"):
        raise ValueError(f"--name {name!r} is a notebook's or the retrieval benchmark's table name; choose another")
    table = outputs_dir(profile) / "tables" / f"{name}.csv"
    if table.exists() or table.with_suffix(".md").exists():
        label = ""
        with contextlib.suppress(OSError, UnicodeError):
            label = table.with_suffix(".label.txt").read_text(encoding="utf-8")
        if not label.startswith(LABEL_PREFIX):
            raise ValueError(f"--name {name!r}: {table} exists and was not written by `boundaries`; choose "
                             "another --name")
    return name


def export_windows(path: Path | str, cfg: BoundaryConfig) -> int:
    """Write the windows as JSONL for an external chunker (its rows come back through ``--chunks``)."""
    gold = load_gold(cfg)
    rows = [{"book_id": b.book_id, "unit_id": u.unit_id, "kind": b.meta["boundary_gold"][u.unit_id]["kind"],
             "text": u.text(b.text), "sentences": [b.text[s.start:s.end] for s in u.sentences]}
            for b in gold.books for u in b.units]
    write_jsonl(Path(path), rows)
    return len(rows)


def cli(args: argparse.Namespace) -> int:
    try:
        name = table_name(args.name, args.profile)
        over: dict[str, Any] = {"seed": args.seed}
        if args.method:
            ms = [m.strip() for x in args.method for m in x.split(",") if m.strip()]
            if not ms:
                raise ConfigError(f"--method {','.join(args.method)!r} names no method; give registered method "
                                  f"names, comma-separated (e.g. token,recursive)")

            for m in ms:  # every registered method and lib: splitter, or one line naming them
                if m.startswith("lib:"):
                    get_method(m)  # an unknown preset / library: a ConfigError naming the presets
                elif m not in METHOD_NAMES:
                    raise ConfigError(f"--method {m!r} is not a registered method; known: {', '.join(METHOD_NAMES)}, "
                                      "or lib:<preset> (python -m litseg_nb methods lists them)")
                elif m not in NON_LLM and m not in SEGMENTERS and m not in LLM_METHODS:
                    raise ConfigError(f"--method {m!r}: not scored on the windows here (it needs a trained "
                                      "student); score its chunk set with --chunks")
            for key, names in (("methods", NON_LLM), ("llm_methods", LLM_METHODS), ("segmenters", SEGMENTERS)):
                over[key] = tuple(m for m in ms if m in names)
            over["library_methods"] = tuple(m for m in ms if m.startswith("lib:"))
        if args.llm_windows is not None:
            over["llm_max_windows"] = args.llm_windows
        cfg = BoundaryConfig.for_profile(args.profile, **over)
        run_methods = args.method or not args.chunks
        computed = (*cfg.methods, *cfg.llm_methods, *cfg.segmenters, *cfg.library_methods) if run_methods else ()
        files = chunk_set_names(args.chunks or (), computed)
        if args.export_windows:
            if Path(args.export_windows).expanduser().exists():
                raise ValueError(f"--export-windows {args.export_windows}: exists; give a new file name")
            ensure_writable(Path(args.export_windows).expanduser().resolve().parent)
            n = export_windows(args.export_windows, cfg)
            print(f"[litseg_nb] wrote {n} windows to {args.export_windows}")
            return 0
        gold = load_gold(cfg)
        if args.counts:
            import pandas as pd

            with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500):
                print(pd.DataFrame(gold.counts).drop(columns=["shapes"], errors="ignore").to_string(index=False))
                print(census_table().to_string(index=False))
            return 0
        sets = {n: _read_external(f, gold.books, n) for n, f in files.items()}
        if run_methods:
            sets.update(segment_windows(gold.books, cfg))
        table = summarize(score_chunk_sets(benchmark_sets(sets, gold.books, cfg), gold.books, cfg, progress=True), cfg)
    except (ConfigError, ValueError, FileNotFoundError, KeyError, OSError) as exc:
        print(f"[litseg_nb] boundaries: {exc}", file=sys.stderr)
        return 2
    n_gold = {k: int(sum(r.get(f"{k}_gold", 0) or 0 for r in gold.counts)) for k in ("chapter", "scene")}
    label = LABEL_PREFIX + cfg.describe() + f" | {len(gold.books)} books, gold chapter {n_gold['chapter']}, scene {n_gold['scene']}"
    paths = save_table(table, name, cfg.profile, label)
    print(label)
    print(headline_table(table, cfg).to_string(index=False))
    print(f"[litseg_nb] full table: {paths['csv']}")
    return 0
