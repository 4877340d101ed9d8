"""Human-evaluation toolkit (LitSeg paper, Appendices A and B).

Segment quality (Appendix A): :func:`export_rating_sheets` samples ``n`` chunks per method, blinds
them (no method name; items shuffled; opaque item ids) and writes, per rater, a CSV to fill in and a
readable HTML sheet with the three dimensions of Appendix A.2 (Content Completeness, Topical
Coherence, Boundary Placement; 1-5). The un-blinding key is written separately.
:func:`import_ratings` reads the filled CSVs back (validating every score, errors name file and
row) and :func:`summarize_ratings` gives per-method per-dimension and overall means (Overall = mean
of the three dimensions, averaged over raters) and ICC(2,1) per dimension.

Pairwise preference (Appendix B): :func:`litseg_nb.metrics.pairwise.pairwise_win_rate` scores
Win/Tie/Loss verdicts as in
B.2's zero-sum rule (win 1, tie 0.5, loss 0), averaged over annotators per instance, then over
instances. Agreement: :func:`cohen_kappa`, :func:`raw_agreement`, :func:`pairwise_agreement_table`
(every annotator pair) and :func:`fleiss_kappa`.

Statistics are implemented from their definitions and tested against the published worked examples
(Shrout & Fleiss 1979, Table 2, for ICC; the standard Fleiss kappa example of 10 subjects and 14
raters for Fleiss' kappa).
"""
from __future__ import annotations

import csv
import html
import itertools
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .safe_io import atomic_path, write_text_atomic

DIMENSIONS = ("content_completeness", "topical_coherence", "boundary_placement")
DIMENSION_TEXT = {  # Appendix A.2, verbatim definitions
    "content_completeness": (
        "Content Completeness", "Whether the chunk captures a self-contained, complete piece of information "
        "that a reader can understand on its own, rather than a fragment of a larger narrative event."),
    "topical_coherence": (
        "Topical Coherence", "Whether the chunk stays focused on a single topic, rather than mixing unrelated "
        "events or themes within a boundary."),
    "boundary_placement": (
        "Boundary Placement", "Whether the cut is made at a natural transition point (between scenes, topics, "
        "or speakers) rather than in the middle of a concept or argument."),
}
SHEET_COLUMNS = ("item_id", "book", "text_before", "chunk_text", "text_after", *DIMENSIONS, "comment")
KEY_COLUMNS = ("item_id", "method", "book_id", "unit_id", "chunk_id")


class RatingSheetError(ValueError):
    """A filled rating sheet is malformed (the message names file, row and column)."""


# --------------------------------------------------------------------------- statistics
def icc_2_1(ratings: np.ndarray | Sequence[Sequence[float]]) -> float:
    """ICC(2,1): two-way random effects, single rater, absolute agreement (Shrout & Fleiss 1979).

    ``ratings`` is an ``n_targets x k_raters`` matrix without missing values.
    ``ICC(2,1) = (BMS - EMS) / (BMS + (k-1) EMS + k (JMS - EMS) / n)``.
    """
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"ICC needs at least 2 targets x 2 raters, got shape {x.shape}")
    if np.isnan(x).any():
        raise ValueError("ICC: ratings contain missing values")
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_total = ((x - grand) ** 2).sum()
    ss_err = ss_total - ss_rows - ss_cols
    bms = ss_rows / (n - 1)
    jms = ss_cols / (k - 1)
    ems = ss_err / ((n - 1) * (k - 1))
    denom = bms + (k - 1) * ems + k * (jms - ems) / n
    if denom == 0:
        return float("nan")  # no variance at all
    return float((bms - ems) / denom)


def raw_agreement(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Fraction of items on which two annotators gave the same label."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need two equally long, non-empty label lists (got {len(a)} and {len(b)})")
    return sum(x == y for x, y in zip(a, b)) / len(a)


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two annotators: ``(p_o - p_e) / (1 - p_e)``."""
    po = raw_agreement(a, b)
    n = len(a)
    cats = set(a) | set(b)
    pe = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in cats)
    if pe == 1.0:
        return 1.0 if po == 1.0 else float("nan")
    return (po - pe) / (1 - pe)


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa from an ``n_items x n_categories`` matrix of rater counts (same raters per item)."""
    m = np.asarray(counts, dtype=float)
    if m.ndim != 2 or m.shape[0] < 1:
        raise ValueError(f"Fleiss' kappa needs an items x categories count matrix, got shape {m.shape}")
    r = m.sum(axis=1)
    if not np.allclose(r, r[0]) or r[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings for every item")
    r = r[0]
    p_j = m.sum(axis=0) / m.sum()
    p_i = ((m * m).sum(axis=1) - r) / (r * (r - 1))
    p_bar, pe_bar = p_i.mean(), (p_j ** 2).sum()
    if pe_bar == 1.0:
        return float("nan")
    return float((p_bar - pe_bar) / (1 - pe_bar))


def labels_to_counts(labels_by_annotator: Sequence[Sequence[Any]],
                     categories: Sequence[Any] | None = None) -> np.ndarray:
    """Per-annotator label lists (same items, same order) → the count matrix of :func:`fleiss_kappa`."""
    n = {len(x) for x in labels_by_annotator}
    if len(n) != 1:
        raise ValueError(f"annotators labelled different numbers of items: {sorted(n)}")
    cats = list(categories) if categories is not None else sorted({l for x in labels_by_annotator for l in x},
                                                                  key=str)
    index = {c: j for j, c in enumerate(cats)}
    out = np.zeros((n.pop(), len(cats)), dtype=int)
    for labels in labels_by_annotator:
        for i, l in enumerate(labels):
            if l not in index:
                raise ValueError(f"label {l!r} is not one of the categories {cats}")
            out[i, index[l]] += 1
    return out


def pairwise_agreement_table(labels_by_annotator: Mapping[str, Sequence[Any]]):
    """Cohen's kappa and raw agreement for every annotator pair (Appendix B.3's figures), as a DataFrame."""
    import pandas as pd

    rows = []
    for (na, a), (nb, b) in itertools.combinations(labels_by_annotator.items(), 2):
        rows.append({"annotator_a": na, "annotator_b": nb, "cohen_kappa": cohen_kappa(a, b),
                     "raw_agreement": raw_agreement(a, b), "n_items": len(a)})
    return pd.DataFrame(rows, columns=["annotator_a", "annotator_b", "cohen_kappa", "raw_agreement", "n_items"])


# --------------------------------------------------------------------------- rating sheets
def _context(book_text: str, start: int, end: int, width: int) -> tuple[str, str]:
    before = book_text[max(0, start - width):start]
    after = book_text[end:end + width]
    return ("…" + before.lstrip()) if start - width > 0 else before, (after.rstrip() + "…") if end + width < len(book_text) else after


def sample_chunks_for_rating(chunks_by_method: Mapping[str, Sequence[Any]], n: int, seed: int = 0,
                             only_source_spans: bool = True) -> list[tuple[str, Any]]:
    """``n`` chunks per method (fewer when a method has fewer), sampled reproducibly."""
    rng = random.Random(seed)
    picked = []
    for method in sorted(chunks_by_method):
        pool = [c for c in chunks_by_method[method] if c.is_source_span or not only_source_spans]
        take = rng.sample(pool, min(n, len(pool))) if pool else []
        picked.extend((method, c) for c in take)
    return picked


def export_rating_sheets(chunks_by_method: Mapping[str, Sequence[Any]], books: Mapping[str, Any],
                         out_dir: Path, n_per_method: int, raters: Sequence[str] = ("rater1", "rater2"),
                         seed: int = 0, context_chars: int = 300) -> dict[str, Any]:
    """Blinded, shuffled rating sheets: ``<rater>.csv`` + ``<rater>.html`` per rater, and ``key.csv``.

    Each rater gets the same items in their own random order. Returns the written paths.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    picked = sample_chunks_for_rating(chunks_by_method, n_per_method, seed)
    if not picked:
        raise ValueError("no chunks to export for rating")
    rng = random.Random(seed + 1)
    ids = rng.sample(range(10_000, 100_000), len(picked))
    items, key_rows = [], []
    for item_no, (method, c) in zip(ids, picked):
        book = books[c.book_id]
        start, end = c.spans[0][0], c.spans[-1][1]
        before, after = _context(book.text, start, end, context_chars)
        item_id = f"item-{item_no}"
        items.append({"item_id": item_id, "book": getattr(book, "title", c.book_id), "text_before": before,
                      "chunk_text": c.text, "text_after": after, **{d: "" for d in DIMENSIONS}, "comment": ""})
        key_rows.append({"item_id": item_id, "method": method, "book_id": c.book_id, "unit_id": c.unit_id,
                         "chunk_id": c.chunk_id})
    paths: dict[str, Any] = {"sheets": {}, "html": {}}
    for r_i, rater in enumerate(raters):
        order = list(items)
        random.Random(seed + 100 + r_i).shuffle(order)
        csv_path = out_dir / f"{rater}.csv"
        with atomic_path(csv_path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=SHEET_COLUMNS)
            w.writeheader()
            w.writerows(order)
        html_path = out_dir / f"{rater}.html"
        write_text_atomic(html_path, _sheet_html(order, rater))
        paths["sheets"][rater], paths["html"][rater] = csv_path, html_path
    key_path = out_dir / "key.csv"
    with atomic_path(key_path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=KEY_COLUMNS)
        w.writeheader()
        w.writerows(sorted(key_rows, key=lambda r: r["item_id"]))
    paths["key"] = key_path
    paths["n_items"] = len(items)
    return paths


def _sheet_html(items: Sequence[Mapping[str, str]], rater: str) -> str:
    dims = "".join(f"<li><b>{html.escape(t)}</b>: {html.escape(d)}</li>" for t, d in DIMENSION_TEXT.values())
    rows = []
    for it in items:
        rows.append(
            f"<section><h3>{html.escape(it['item_id'])} <small>({html.escape(str(it['book']))})</small></h3>"
            f"<p class='ctx'>{html.escape(it['text_before'])}</p>"
            f"<p class='chunk'>{html.escape(it['chunk_text']).replace(chr(10), '<br>')}</p>"
            f"<p class='ctx'>{html.escape(it['text_after'])}</p>"
            + "".join(f"<p>{html.escape(DIMENSION_TEXT[d][0])}: 1 2 3 4 5</p>" for d in DIMENSIONS)
            + "</section>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Chunk rating sheet – "
            f"{html.escape(rater)}</title><style>body{{font-family:Georgia,serif;max-width:52em;margin:auto}}"
            ".ctx{color:#888;font-size:90%}.chunk{border-left:4px solid #369;padding-left:1em}"
            "section{border-bottom:1px solid #ccc;margin-bottom:2em}</style></head><body>"
            f"<h1>Chunk rating sheet ({html.escape(rater)})</h1><p>Rate every chunk (the blue-bordered text; "
            "grey text is the surrounding book text, for orientation only) independently on a 1–5 scale "
            "(higher is better) on the three dimensions below, and enter the scores in the matching CSV "
            f"file. Do not discuss with other raters.</p><ul>{dims}</ul>" + "".join(rows) + "</body></html>")


def import_ratings(sheet_paths: Mapping[str, Path], key_path: Path):
    """Filled sheets → long DataFrame (rater, item_id, method, dimension, score); strict validation."""
    import pandas as pd

    key = {}
    with Path(key_path).open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            key[row["item_id"]] = row
    records = []
    for rater, path in sheet_paths.items():
        with Path(path).open(encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing_cols = [c for c in ("item_id", *DIMENSIONS) if c not in (reader.fieldnames or [])]
            if missing_cols:
                raise RatingSheetError(f"{path}: missing column(s) {missing_cols}")
            seen = set()
            for line_no, row in enumerate(reader, 2):
                item = row["item_id"]
                if item not in key:
                    raise RatingSheetError(f"{path}:{line_no}: unknown item_id {item!r}")
                if item in seen:
                    raise RatingSheetError(f"{path}:{line_no}: item {item!r} rated twice")
                seen.add(item)
                for d in DIMENSIONS:
                    raw = (row[d] or "").strip()
                    try:
                        score = float(raw)
                    except ValueError:
                        raise RatingSheetError(f"{path}:{line_no}: {d} = {raw!r} is not a score 1-5") from None
                    if not 1 <= score <= 5:
                        raise RatingSheetError(f"{path}:{line_no}: {d} = {score} outside 1-5")
                    records.append({"rater": rater, "item_id": item, "method": key[item]["method"],
                                    "dimension": d, "score": score})
            if seen != set(key):
                raise RatingSheetError(f"{path}: {len(set(key) - seen)} item(s) not rated")
    return pd.DataFrame(records, columns=["rater", "item_id", "method", "dimension", "score"])


def summarize_ratings(long_df):
    """(per-method means table, per-dimension ICC(2,1) table) from :func:`import_ratings` output."""
    import pandas as pd

    item_means = long_df.groupby(["method", "item_id", "dimension"])["score"].mean().reset_index()
    means = item_means.pivot_table(index="method", columns="dimension", values="score", aggfunc="mean")
    means = means.reindex(columns=list(DIMENSIONS))
    means["overall"] = means[list(DIMENSIONS)].mean(axis=1)
    means["n_items"] = item_means.groupby("method")["item_id"].nunique()
    rows = []
    for d in DIMENSIONS:
        mat = long_df[long_df.dimension == d].pivot_table(index="item_id", columns="rater", values="score")
        rows.append({"dimension": d, "icc_2_1": icc_2_1(mat.to_numpy()) if mat.shape[1] >= 2 else float("nan"),
                     "n_items": len(mat), "n_raters": mat.shape[1]})
    return means.reset_index(), pd.DataFrame(rows)


