"""Human evaluation (Appendices A and B): blinded sheets, their import, ICC(2,1) and kappas, and LLM stand-ins.

The A.2 LLM rater reads what a human reads, with the A.2 rubric; its sheets are labelled :data:`LLM_SOURCE`."""
from __future__ import annotations

import csv
import html
import itertools
import json
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.safe_io import atomic_path, write_text_atomic
from ..errors import UsageError
from ..core.paths import outputs_dir, shown_path
from ..llm.base import UsageTag, LLMError, SamplingParams
from ..metrics.pairwise import (book_judge_context, judge_context_budget, pairwise_conversation, pairwise_win_rate,
                                parse_verdict)
from ..core.artifacts import artifact_dir
from ..core.prompts import load_prompt, render_prompt
from ..litseg.validate import extract_json
from .segment_quality import SegmentQualityConfig

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
KEY_COLUMNS = ("item_id", "method", "book_id", "unit_id", "chunk_id", "dataset")


class RatingSheetError(UsageError, ValueError):
    """A filled rating sheet is malformed (the message names file, row and column)."""


def icc_2_1(ratings: np.ndarray | Sequence[Sequence[float]]) -> float:
    """ICC(2,1) (Shrout & Fleiss 1979) of an ``n_targets x k_raters`` matrix without missing values."""
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


def labels_to_counts(labels_by_annotator: Sequence[Sequence[Any]], categories: Sequence[Any]) -> np.ndarray:
    """Per-annotator label lists (same items, same order) → the count matrix of :func:`fleiss_kappa`."""
    n = {len(x) for x in labels_by_annotator}
    if len(n) != 1:
        raise ValueError(f"annotators labelled different numbers of items: {sorted(n)}")
    cats = list(categories)
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
    rows = [{"annotator_a": na, "annotator_b": nb, "cohen_kappa": cohen_kappa(a, b),
             "raw_agreement": raw_agreement(a, b), "n_items": len(a)}
            for (na, a), (nb, b) in itertools.combinations(labels_by_annotator.items(), 2)]
    return pd.DataFrame(rows, columns=["annotator_a", "annotator_b", "cohen_kappa", "raw_agreement", "n_items"])


def export_rating_sheets(chunks_by_method: Mapping[str, Sequence[Any]], books: Mapping[str, Any],
                         out_dir: Path, n_per_method: int, raters: Sequence[str] = ("rater1", "rater2"),
                         seed: int = 0, context_chars: int = 300) -> dict[str, Any]:
    """Blinded, shuffled ``<rater>.csv``/``.html`` sheets per rater and ``key.csv``: ``n_per_method`` chunks per
    method on each dataset, sampled reproducibly."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    picked = []
    for method in sorted(chunks_by_method):
        groups: dict[str, list[Any]] = {}
        for c in chunks_by_method[method]:
            if c.is_source_span:
                groups.setdefault(getattr(books.get(c.book_id), "dataset", ""), []).append(c)
        for ds in sorted(groups):
            picked.extend((method, c) for c in rng.sample(groups[ds], min(n_per_method, len(groups[ds]))))
    if not picked:
        raise ValueError("no chunks to export for rating")
    rng = random.Random(seed + 1)
    ids = rng.sample(range(10_000, 100_000), len(picked))
    items, key_rows = [], []
    for item_no, (method, c) in zip(ids, picked):
        book = books[c.book_id]
        start, end = c.spans[0][0], c.spans[-1][1]
        before, after = book.text[max(0, start - context_chars):start], book.text[end:end + context_chars]
        before = ("…" + before.lstrip()) if start - context_chars > 0 else before
        after = (after.rstrip() + "…") if end + context_chars < len(book.text) else after
        item_id = f"item-{item_no}"
        items.append({"item_id": item_id, "book": getattr(book, "title", c.book_id), "text_before": before,
                      "chunk_text": c.text, "text_after": after, **{d: "" for d in DIMENSIONS}, "comment": ""})
        key_rows.append({"item_id": item_id, "method": method, "book_id": c.book_id, "unit_id": c.unit_id,
                         "chunk_id": c.chunk_id, "dataset": getattr(book, "dataset", "")})
    paths: dict[str, Any] = {"sheets": {}, "html": {}}
    for r_i, rater in enumerate(raters):
        order = list(items)
        random.Random(seed + 100 + r_i).shuffle(order)
        paths["sheets"][rater] = _write_rows(out_dir / f"{rater}.csv", order, SHEET_COLUMNS)
        paths["html"][rater] = write_text_atomic(out_dir / f"{rater}.html", _sheet_html(order, rater))
    return {**paths, "key": _write_rows(out_dir / "key.csv", sorted(key_rows, key=lambda r: r["item_id"]), KEY_COLUMNS),
            "n_items": len(items)}


def _sheet_html(items: Sequence[Mapping[str, str]], rater: str) -> str:
    dims = "".join(f"<li><b>{html.escape(t)}</b>: {html.escape(d)}</li>" for t, d in DIMENSION_TEXT.values())
    rows = [f"<section><h3>{html.escape(it['item_id'])} <small>({html.escape(str(it['book']))})</small></h3>"
            f"<p class='ctx'>{html.escape(it['text_before'])}</p>"
            f"<p class='chunk'>{html.escape(it['chunk_text']).replace(chr(10), '<br>')}</p>"
            f"<p class='ctx'>{html.escape(it['text_after'])}</p>"
            + "".join(f"<p>{html.escape(DIMENSION_TEXT[d][0])}: 1 2 3 4 5</p>" for d in DIMENSIONS)
            + "</section>" for it in items]
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
    key = {row["item_id"]: row for row in _read_rows(key_path)}
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
                                    "dataset": key[item].get("dataset", ""), "dimension": d, "score": score})
            if seen != set(key):
                raise RatingSheetError(f"{path}: {len(set(key) - seen)} item(s) not rated")
    return pd.DataFrame(records, columns=["rater", "item_id", "method", "dataset", "dimension", "score"])


def summarize_ratings(long_df):
    """(per-method means table, per-dimension ICC(2,1) table) from :func:`import_ratings` output."""
    item_means = long_df.groupby(["method", "item_id", "dimension"])["score"].mean().reset_index()
    means = item_means.pivot_table(index="method", columns="dimension", values="score", aggfunc="mean")
    means = means.reindex(columns=list(DIMENSIONS))
    means["overall"] = means[list(DIMENSIONS)].mean(axis=1)
    means["n_items"] = item_means.groupby("method")["item_id"].nunique()
    rows = []
    for d in DIMENSIONS:
        mat = long_df[long_df.dimension == d].pivot_table(index="item_id", columns="rater", values="score")
        # ICC needs >= 2 items and >= 2 raters: else NaN, and n_items / n_raters say why
        computable = mat.shape[0] >= 2 and mat.shape[1] >= 2
        rows.append({"dimension": d, "icc_2_1": icc_2_1(mat.to_numpy()) if computable else float("nan"),
                     "n_items": len(mat), "n_raters": mat.shape[1]})
    return means.reset_index(), pd.DataFrame(rows)




@dataclass
class A2Rating:
    scores: dict[str, int]
    neutral: bool  # no valid reply after the retries: the neutral 3 everywhere
    attempts: int


def parse_a2_scores(text: str) -> dict[str, int] | None:
    """The three A.2 scores of a reply (integers 1-5), or None when any is missing or out of range."""
    obj = extract_json(text).obj
    if not isinstance(obj, Mapping):
        return None
    out: dict[str, int] = {}
    for d in DIMENSIONS:
        v = obj.get(d)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            return None
        try:
            f = float(v)
        except ValueError:
            return None
        if f != int(f) or not 1 <= f <= 5:
            return None
        out[d] = int(f)
    return out


def rate_chunks(backend: Any, items: Sequence[Mapping[str, str]], *, retries: int = 1, seed: int = 0,
                first_temperature: float = 0.0, max_new_tokens: int = 64,
                tag: UsageTag = UsageTag("llm-rater", stage="a2-rating"),
                errors: list[str] | None = None) -> list[A2Rating | None]:
    """Rate every item with the A.2 rubric; an item never scored keeps the neutral 3. With ``errors``, a
    request the backend fails (refused, timed out) fails its item only: ``None``, its error in ``errors``."""
    convs = [[{"role": "system", "content": load_prompt("judge/a2_rubric_system")},
              {"role": "user", "content": render_prompt(
                  "judge/a2_rubric_user", text_before=it.get("text_before") or "(start of the unit)",
                  chunk_text=it["chunk_text"], text_after=it.get("text_after") or "(end of the unit)")}]
             for it in items]
    got, attempts = _ask_until_read(
        backend, convs, parse_a2_scores, retries, tag, lambda attempt: SamplingParams(
            max_new_tokens=max_new_tokens, seed=seed + 1000 * attempt,
            temperature=first_temperature if attempt == 0 else max(0.7, first_temperature)), errors, "A.2 rater")
    return [A2Rating(g, False, n) if g is not None else None if n == 0
            else A2Rating({d: 3 for d in DIMENSIONS}, True, n) for g, n in zip(got, attempts)]


def _ask_until_read(backend: Any, convs: Sequence[Any], parse: Any, retries: int, tag: UsageTag, params: Any,
                    errors: list[str] | None = None, who: str = "") -> tuple[list[Any], list[int]]:
    """Ask until ``parse`` reads each reply, retrying the unread in batches; backend errors go to ``errors``."""
    got: list[Any] = [None] * len(convs)
    attempts = [0] * len(convs)
    todo = list(range(len(convs)))
    for attempt in range(retries + 1):
        if not todo:
            break
        if errors is None:
            gens = backend.chat([convs[i] for i in todo], params(attempt), tag)
            if len(gens) != len(todo):
                raise LLMError(f"A.2 rater: backend answered {len(gens)} of {len(todo)} requests")
            answered = dict(zip(todo, gens))
        else:  # a failed request fails its item only: the call is split until it stands alone
            answered = _chat_split(backend, todo, convs, params(attempt), tag, errors, f"{who} attempt {attempt}")
        left = []
        for i in todo:
            if i in answered:
                attempts[i] += 1
                got[i] = parse(answered[i].text)
            if got[i] is None:
                left.append(i)
        todo = left
    return got, attempts


def _chat_split(backend: Any, idx: Sequence[int], convs: Sequence[Any], params: Any, tag: UsageTag,
                errors: list[str], who: str) -> dict[int, Any]:
    """``{index: reply}`` for ``idx``: a call that fails (a request refused, timed out) is split in halves
    until each failing request is alone; its error goes to ``errors`` (``"<who> item <index>: ..."``)."""
    try:
        gens = backend.chat([convs[i] for i in idx], params, tag)
    except LLMError as exc:
        if len(idx) == 1:
            errors.append(f"{who} item {idx[0]}: {exc}")
            return {}
        mid = len(idx) // 2
        return {**_chat_split(backend, idx[:mid], convs, params, tag, errors, who),
                **_chat_split(backend, idx[mid:], convs, params, tag, errors, who)}
    return dict(zip(idx, gens))


def rater_label(models: Sequence[str]) -> str:
    """``"2 raters: A, B"`` or, when they are one model, says so."""
    distinct = list(dict.fromkeys(models))
    if len(distinct) == 1 and len(models) > 1:
        return (f"{len(models)} raters, the SAME model {distinct[0]} (rater 1 greedy, the others sampled at T=0.7): "
                "agreement here is one model's self-consistency, not agreement between raters")
    if len(distinct) == len(models):
        return f"{len(models)} raters, different models: {', '.join(models)}"
    return (f"{len(models)} raters on {len(distinct)} different models ({', '.join(models)}): a model's later raters "
            "sample at T=0.7")


def build_rater_backends(cfgs: Sequence[Any], reuse: tuple[Any, Any] | None = None,
                         ledger: Any = None) -> tuple[list[Any], list[Any]]:
    """One backend per rater config, built once per model: ``(per rater, built here)``."""
    # deferred: tests patch litseg_nb.llm.make_backend (read at call time)
    from ..llm import make_backend

    out, built = [], {}
    for c in cfgs:
        if reuse is not None and (reuse[0].backend, reuse[0].model, tuple(reuse[0].base_urls)) == \
                (c.backend, c.model, tuple(c.base_urls)):
            out.append(reuse[1])
            continue
        key = (c.backend, c.model, tuple(c.base_urls), c.max_model_len, c.dtype, c.device)
        if key not in built:
            built[key] = make_backend(c, ledger)
        out.append(built[key])
    return out, list(built.values())


LLM_SOURCE = "LLM ratings, not human"


def filled_sheets_dir(profile: str, sheet_set: str) -> Path:
    """Where filled sheets go: ``outputs/<profile>/human_ratings/<sheet_set>/<rater>.csv``."""
    return outputs_dir(profile) / "human_ratings" / sheet_set


def _filled_sheets(profile: str, sheet_set: str, sheets: Mapping[str, Any], backend: Any, llm_fill: Any) -> dict:
    """Every rater's filled sheet (some but not all is an error), else the LLM-filled copies, else a note."""
    folder = filled_sheets_dir(profile, sheet_set)
    paths = {r: folder / f"{r}.csv" for r in sheets["sheets"]}
    present = [r for r, p in paths.items() if p.is_file()]
    if present and len(present) < len(paths):
        raise RatingSheetError(f"{folder}: filled sheets of {sorted(set(paths) - set(present))} missing "
                               f"(found {sorted(present)}); every rater's sheet is needed")
    if present:
        return {"sheets": (paths, sheets["key"], {"source": "human ratings", "folder": shown_path(folder)})}
    if backend is None:
        return {"source": "none", "note": f"no filled sheets in {folder}"}
    out = Path(sheets["key"]).parent / "llm_filled"
    filled, key, info = llm_fill(out)
    info["folder"] = shown_path(out)
    return {"sheets": (filled, key, info)}


def _read_rows(path: Path) -> list[dict[str, str]]:
    with Path(path).open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _write_rows(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Path:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        w.writerows(rows)
    return path


def _llm_fill_start(key_path: Path, out_dir: Path, max_items: int, seed: int) -> tuple[Path, list[dict], set[str]]:
    """``(out_dir, created; the key's rows; the item ids the LLM fills: max_items of them, 0 = all)``."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    key_rows = _read_rows(key_path)
    ids = sorted(r["item_id"] for r in key_rows)
    keep = ids if not max_items or max_items >= len(ids) else random.Random(f"{seed}-llm-fill").sample(ids, max_items)
    return Path(out_dir), key_rows, set(keep)


def rater_backends(sheets: Mapping[str, Any], backend: Any) -> dict[str, Any]:
    """Rater name -> backend: one backend for all, or a sequence (the last repeated)."""
    raters = list(sheets)
    if isinstance(backend, (list, tuple)):
        if not backend:
            raise UsageError("LLM raters: an empty list of backends")
        return {r: backend[min(k, len(backend) - 1)] for k, r in enumerate(raters)}
    return {r: backend for r in raters}


def llm_fill_rating_sheets(sheets: Mapping[str, Path], key_path: Path, out_dir: Path, backend: Any, max_items: int = 0,
                           seed: int = 0, retries: int = 1) -> tuple[dict[str, Path], Path, dict[str, Any]]:
    """A copy of the rating sheets filled by LLM raters (A.2 rubric): ``(sheets, key, info)``. A request a
    rater's backend fails loses that item (for every rater, so each sheet rates the same items), counted."""

    out_dir, key_rows, keep = _llm_fill_start(key_path, out_dir, max_items, seed)
    backends = rater_backends(sheets, backend)
    rows_of: dict[str, list[dict[str, str]]] = {}
    neutral: dict[str, int] = {}
    failed: dict[str, int] = {}
    errors: list[str] = []
    models: dict[str, str] = {}
    for k, (rater, path) in enumerate(sheets.items()):
        be = backends[rater]
        model = str(getattr(be, "model_id", "") or "?")
        shared = model in models.values()
        models[rater] = model
        rows = [r for r in _read_rows(path) if r["item_id"] in keep]
        results = rate_chunks(be, rows, retries=retries, seed=seed + k, first_temperature=0.7 if shared else 0.0,
                              tag=UsageTag("llm-rater", stage=f"a2-rating:{rater}"), errors=errors)
        neutral[rater] = sum(r is not None and r.neutral for r in results)
        failed[rater] = sum(r is None for r in results)
        rows_of[rater] = []
        for row, res in zip(rows, results):
            if res is not None:
                rows_of[rater].append({**row, **{d: str(res.scores[d]) for d in DIMENSIONS}, "comment": LLM_SOURCE
                                       + (" (neutral 3: no valid reply)" if res.neutral else "")})
    rated = [{r["item_id"] for r in rows} for rows in rows_of.values()]
    complete = set(keep).intersection(*rated)
    filled = {rater: _write_rows(out_dir / f"{rater}.csv", [r for r in rows if r["item_id"] in complete],
                                 SHEET_COLUMNS) for rater, rows in rows_of.items()}
    key_out = _write_rows(out_dir / "key.csv", [r for r in key_rows if r["item_id"] in complete], KEY_COLUMNS)
    label = rater_label(list(models.values()))
    info = {"source": LLM_SOURCE, "rubric": "Appendix A.2 (the human rubric), not E.3 (the GRPO reward)",
            "model": ", ".join(dict.fromkeys(models.values())), "models": models, "raters_label": label,
            "same_model": len(set(models.values())) < len(models),
            "n_items": len(complete), "n_items_exported": len(key_rows), "n_neutral": sum(neutral.values()),
            "n_neutral_by_rater": neutral, "raters": list(sheets), "n_dropped": len(keep) - len(complete),
            "request_failed_by_rater": failed, "llm_errors": errors[:5], "n_llm_errors": len(errors)}
    write_text_atomic(out_dir / "SOURCE.txt",
                      f"{LLM_SOURCE}: A.2 rubric; {label}; {json.dumps(info, ensure_ascii=False, default=str)}\n")
    return filled, key_out, info


def ratings_by_dataset(long_df):
    """Appendix A per dataset: ``(table1, table9, agreement)``."""
    t1, t9, ag = [], [], []
    for ds, g in long_df.groupby("dataset", sort=True):
        for out, df in zip((t1, t9), summarize_ratings(g)):  # the means, the ICCs
            df.insert(0, "dataset", ds)
            out.append(df)
        for d in DIMENSIONS:
            mat = g[g.dimension == d].pivot_table(index="item_id", columns="rater", values="score")
            labels = {r: [int(round(v)) for v in mat[r]] for r in mat.columns}
            fk = fleiss_kappa(labels_to_counts(list(labels.values()), categories=[1, 2, 3, 4, 5])) \
                if len(labels) >= 2 and len(mat) else float("nan")
            ag += [{"dataset": ds, "dimension": d, **rec, "fleiss_kappa": fk}
                   for rec in pairwise_agreement_table(labels).to_dict("records")]
    cat = lambda xs: pd.concat(xs, ignore_index=True) if xs else pd.DataFrame(columns=["dataset"])  # noqa: E731
    return cat(t1), cat(t9), pd.DataFrame(ag, columns=["dataset", "dimension", "annotator_a", "annotator_b",
                                                       "cohen_kappa", "raw_agreement", "n_items", "fleiss_kappa"])


def evaluate_rating_sheets(profile: str, sheet_set: str, sheets: Mapping[str, Any], backend: Any = None,
                           llm_max_items: int = 0, seed: int = 0, retries: int = 1) -> dict[str, Any]:
    """Tables 1/5, 9 and agreement from human-filled sheets, else from LLM-filled copies."""
    got = _filled_sheets(profile, sheet_set, sheets, backend, lambda out: llm_fill_rating_sheets(
        sheets["sheets"], sheets["key"], out, backend, llm_max_items, seed, retries))
    if "note" in got:
        return got
    filled, key, info = got["sheets"]
    long_df = import_ratings(filled, key)
    t1, t9, ag = ratings_by_dataset(long_df)
    return {"source": info["source"], "info": info, "table1": t1, "table9": t9, "agreement": ag, "ratings": long_df}


PAIRWISE_ANNOTATORS = {"gutenqa": ("A1", "A2", "A3", "A4", "A5"), "literaryqa": ("A1", "A2", "A3")}  # B.1
PAIRWISE_COLUMNS = ("item_id", "dataset", "question", "original_context", "reference_answer", "response_a",
                    "response_b", "verdict", "comment")
PAIRWISE_KEY_COLUMNS = ("item_id", "dataset", "qid", "target", "opponent", "target_shown_as")
#: beside the key: per book-context item, what rebuilds its Original Context for a reader with a shorter context
BOOK_CONTEXTS_FILE = "contexts.jsonl"
BOOK_CONTEXT_KEYS = ("book_id", "units_a", "units_b", "chunks_a", "chunks_b")
VERDICTS = ("A", "B", "Tie")


def export_pairwise_sheets(items: Sequence[Mapping[str, Any]], out_dir: Path, seed: int = 0) -> dict[str, Any]:
    """Blinded pairwise sheets (Appendix B.1) per annotator, and ``key.csv``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    rows, keys, rebuild = [], [], []
    for n, it in enumerate(items):
        shown = "A" if rng.random() < 0.5 else "B"
        a, b = (it["target_answer"], it["other_answer"]) if shown == "A" else (it["other_answer"], it["target_answer"])
        item_id = f"pair-{n:05d}"
        rows.append({"item_id": item_id, "dataset": it["dataset"], "question": it["question"],
                     "original_context": it["context"], "reference_answer": it["reference"], "response_a": a,
                     "response_b": b, "verdict": "", "comment": ""})
        keys.append({"item_id": item_id, "dataset": it["dataset"], "qid": it["qid"], "target": it["target"],
                     "opponent": it["opponent"], "target_shown_as": shown})
        if all(k in it for k in BOOK_CONTEXT_KEYS):  # a and b as shown on the sheet
            a_side, b_side = ("a", "b") if shown == "A" else ("b", "a")
            rebuild.append({"item_id": item_id, "book_id": it["book_id"],
                            "units_a": it[f"units_{a_side}"], "units_b": it[f"units_{b_side}"],
                            "chunks_a": it[f"chunks_{a_side}"], "chunks_b": it[f"chunks_{b_side}"]})
    by_annotator: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for a in PAIRWISE_ANNOTATORS.get(r["dataset"], ()):
            by_annotator.setdefault(a, []).append(r)
    paths: dict[str, Any] = {"sheets": {}}
    for i, (a, rs) in enumerate(sorted(by_annotator.items())):
        order = list(rs)
        random.Random(seed + 200 + i).shuffle(order)
        paths["sheets"][a] = _write_rows(out_dir / f"{a}.csv", order, PAIRWISE_COLUMNS)
    write_text_atomic(out_dir / BOOK_CONTEXTS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rebuild))
    return {**paths, "key": _write_rows(out_dir / "key.csv", keys, PAIRWISE_KEY_COLUMNS), "n_items": len(rows)}


def import_pairwise_verdicts(sheet_paths: Mapping[str, Path], key_path: Path):
    """Filled pairwise sheets -> long DataFrame with the target's verdict (win/tie/loss)."""
    key = {r["item_id"]: r for r in _read_rows(key_path)}
    out = []
    for a, path in sheet_paths.items():
        for line_no, row in enumerate(_read_rows(path), 2):
            k = key.get(row["item_id"])
            if k is None:
                raise RatingSheetError(f"{path}:{line_no}: unknown item_id {row['item_id']!r}")
            v = (row.get("verdict") or "").strip()
            norm = {x.lower(): x for x in VERDICTS}.get(v.lower())
            if norm is None:
                raise RatingSheetError(f"{path}:{line_no}: verdict {v!r} is not one of {VERDICTS}")
            res = "tie" if norm == "Tie" else ("win" if norm == k["target_shown_as"] else "loss")
            out.append({"annotator": a, "item_id": row["item_id"], "dataset": k["dataset"], "target": k["target"],
                        "opponent": k["opponent"], "verdict": res})
    return pd.DataFrame(out, columns=["annotator", "item_id", "dataset", "target", "opponent", "verdict"])


def pairwise_agreement(long_df):
    """Appendix B.3 per dataset, over the items every annotator judged: ``(win_rates, pairs, fleiss)``."""
    wins, pairs, fl = [], [], []
    for ds, g in long_df.groupby("dataset", sort=True):
        mat = g.pivot_table(index="item_id", columns="annotator", values="verdict", aggfunc="first").dropna()
        if mat.empty:
            continue
        opp = g.drop_duplicates("item_id").set_index("item_id")["opponent"]
        for o, ids in mat.groupby(opp.reindex(mat.index)).groups.items():
            wr = pairwise_win_rate([list(mat.loc[i]) for i in ids])
            wins.append({"dataset": ds, "opponent": o, "n_items": len(ids), **wr})
        labels = {a: list(mat[a]) for a in mat.columns}
        pairs += [{"dataset": ds, **rec} for rec in pairwise_agreement_table(labels).to_dict("records")]
        fk = fleiss_kappa(labels_to_counts(list(labels.values()), categories=["win", "tie", "loss"])) \
            if len(labels) >= 2 else float("nan")
        fl.append({"dataset": ds, "fleiss_kappa": fk, "n_items": len(mat), "n_annotators": len(labels)})
    return (pd.DataFrame(wins, columns=["dataset", "opponent", "n_items", "win_rate", "n_instances", "win_frac",
                                        "tie_frac", "loss_frac"]),
            pd.DataFrame(pairs, columns=["dataset", "annotator_a", "annotator_b", "cohen_kappa", "raw_agreement",
                                         "n_items"]),
            pd.DataFrame(fl, columns=["dataset", "fleiss_kappa", "n_items", "n_annotators"]))


def _cycled(value: Any, n: int) -> list[Any]:
    """``value`` for each of ``n`` annotators: a sequence cycled over them, else the one value for all."""
    if isinstance(value, (list, tuple)) and value:
        return [value[k % len(value)] for k in range(n)]
    return [value] * n


def read_book_contexts(key_path: Path) -> dict[str, dict[str, Any]]:
    """What rebuilds each book-context item's Original Context (``contexts.jsonl`` beside the key), by item."""
    path = Path(key_path).parent / BOOK_CONTEXTS_FILE
    if not path.is_file():
        return {}
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return {r["item_id"]: r for r in rows}


def fit_context(row: Mapping[str, str], backend: Any, max_model_len: int, max_new_tokens: int,
                rebuild: Mapping[str, Any] | None, books: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """The Original Context ``backend`` can read within ``max_model_len`` (0 = unchecked): the sheet's, else
    rebuilt from the book for this reader's budget; ``(None, why)`` when none fits."""
    ctx = row["original_context"]
    if not max_model_len:
        return ctx, "as exported"
    budget = judge_context_budget(backend.count_tokens, max_model_len, max_new_tokens, row["question"],
                                  row["reference_answer"], row["response_a"], row["response_b"])
    if backend.count_tokens(ctx) <= budget:
        return ctx, "as exported"
    book = (books or {}).get((rebuild or {}).get("book_id", ""))
    if book is None:
        return None, f"context over this reader's {budget} tokens and no book to rebuild it from"
    ctx, policy = book_judge_context(book, rebuild["units_a"], rebuild["units_b"], rebuild["chunks_a"],
                                     rebuild["chunks_b"], backend.count_tokens, budget)
    if backend.count_tokens(ctx) > budget:
        return None, f"context over this reader's {budget} tokens even as {policy}"
    return ctx, f"rebuilt for this reader's {budget} tokens: {policy}"


def llm_fill_pairwise_sheets(sheets: Mapping[str, Path], key_path: Path, out_dir: Path, backend: Any,
                             max_items: int = 0, seed: int = 0, max_new_tokens: int = 96,
                             retries: int = 1, context_limits: Any = 0,
                             books: Mapping[str, Any] | None = None) -> tuple[dict[str, Path], Path, dict[str, Any]]:
    """A copy of the pairwise sheets filled by the B.2 judge: ``(sheets, key, info)``. ``backend`` and
    ``context_limits`` (each reader's ``max_model_len``; 0 = unchecked) are cycled over the annotators; a
    context longer than its reader's is rebuilt from ``books`` for that reader, else that item alone fails for it;
    a request that fails fails its item only. Items not judged by every annotator are dropped and counted."""

    errors: list[str] = []
    out_dir, key_rows, keep = _llm_fill_start(key_path, out_dir, max_items, seed)
    rebuild = read_book_contexts(key_path)
    verdicts: dict[str, dict[str, str]] = {}
    rows_of: dict[str, list[dict[str, str]]] = {}
    names = sorted(sheets)
    if isinstance(backend, (list, tuple)) and backend:  # cycled over the annotators
        backend = _cycled(backend, len(names))
    backends = rater_backends(dict.fromkeys(names), backend)
    limits = dict(zip(names, _cycled(context_limits, len(names))))
    models: dict[str, str] = {}
    greedy_of: dict[str, bool] = {}
    lost: dict[str, dict[str, int]] = {}
    for k, (a, path) in enumerate(sorted(sheets.items())):
        be = backends[a]
        model = str(getattr(be, "model_id", "") or "?")
        greedy = greedy_of[a] = model not in models.values()
        models[a] = model
        rows, why = [], {}
        for r in (r for r in _read_rows(path) if r["item_id"] in keep):
            ctx, note = fit_context(r, be, int(limits[a] or 0), max_new_tokens, rebuild.get(r["item_id"]), books)
            if ctx is None:
                why[r["item_id"]] = note
                continue
            rows.append({**r, "original_context": ctx, "comment": LLM_SOURCE + ("" if note == "as exported" else
                                                                                  f" (context {note})")})
        rows_of[a] = rows
        convs = [pairwise_conversation(r["original_context"], r["question"], r["reference_answer"], r["response_a"],
                                       r["response_b"]) for r in rows]
        n_err = len(errors)
        got, _ = _ask_until_read(
            be, convs, parse_verdict, retries, UsageTag("llm-annotator", stage="llm-pairwise"),
            lambda attempt: SamplingParams(max_new_tokens=max_new_tokens, temperature=(
                0.0 if greedy else 0.7) if attempt == 0 else 0.7, seed=seed + k + 100 * attempt), errors, a)
        verdicts[a] = {r["item_id"]: v for r, v in zip(rows, got) if v is not None}
        failed = {int(e.split(" item ", 1)[1].split(":", 1)[0]) for e in errors[n_err:] if " item " in e}
        lost[a] = {"over_context": len(why), "rebuilt_context": sum("rebuilt" in r["comment"] for r in rows),
                   "request_failed": sum(rows[i]["item_id"] not in verdicts[a] for i in failed),
                   "unreadable": sum(r["item_id"] not in verdicts[a] for i, r in enumerate(rows) if i not in failed)}
        rows_of[a] += [{"item_id": i} for i in why]  # the annotator held them: the item is incomplete
    complete = {i for i in keep if all(i in verdicts[a] for a in verdicts if any(r["item_id"] == i for r in rows_of[a]))}
    filled: dict[str, Path] = {}
    for a, rows in rows_of.items():
        out = [{**r, "verdict": verdicts[a][r["item_id"]]} for r in rows if r["item_id"] in complete]
        filled[a] = _write_rows(out_dir / f"{a}.csv", out, PAIRWISE_COLUMNS)
    key_out = _write_rows(out_dir / "key.csv", [r for r in key_rows if r["item_id"] in complete], PAIRWISE_KEY_COLUMNS)
    info = {"source": LLM_SOURCE, "model": ", ".join(dict.fromkeys(models.values())), "models": models,
            "greedy": greedy_of, "raters_label": rater_label(list(models.values())), "n_items": len(complete),
            "n_dropped": len(keep) - len(complete), "n_items_exported": len(key_rows), "annotators": sorted(sheets),
            "lost_by_annotator": lost, "context_limits": limits,  # "lost": summed over the annotators
            "lost": {k: sum(v[k] for v in lost.values()) for k in ("over_context", "rebuilt_context",
                                                                   "request_failed", "unreadable")},
            "llm_errors": errors[:5], "n_llm_errors": len(errors)}
    write_text_atomic(out_dir / "SOURCE.txt",
                      f"{LLM_SOURCE}: B.2 judge {info['model']}; {json.dumps(info, ensure_ascii=False, default=str)}\n")
    return filled, key_out, info


def evaluate_pairwise_sheets(profile: str, sheets: Mapping[str, Any], backend: Any = None, llm_max_items: int = 0,
                             seed: int = 0, max_new_tokens: int = 96, context_limits: Any = 0,
                             books: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Appendix B.3 from human-filled pairwise sheets, else from the B.2 judge's copy (each annotator's
    contexts budgeted to ``context_limits``, rebuilt from ``books``: :func:`llm_fill_pairwise_sheets`)."""
    got = _filled_sheets(profile, "pairwise", sheets, backend, lambda out: llm_fill_pairwise_sheets(
        sheets["sheets"], sheets["key"], out, backend, llm_max_items, seed, max_new_tokens,
        context_limits=context_limits, books=books))
    if "note" in got:
        return got
    filled, key, info = got["sheets"]
    long_df = import_pairwise_verdicts(filled, key)
    wins, pairs, fl = pairwise_agreement(long_df)
    models, greedy = info.get("models") or {}, info.get("greedy") or {}
    if models:  # which pairs are one model with itself (an LLM copy): shown in the table and in Figures 2-3
        def who(a: str) -> str:
            return f"{models.get(a, '?')} ({'greedy' if greedy.get(a, True) else 'T=0.7'})"
        pairs["model_a"], pairs["model_b"] = pairs["annotator_a"].map(who), pairs["annotator_b"].map(who)
        pairs["same_model"] = pairs["annotator_a"].map(models) == pairs["annotator_b"].map(models)
    return {"source": info["source"], "info": info, "win_rates": wins, "pairs": pairs, "fleiss": fl,
            "verdicts": long_df}


def read_pairwise_export(folder: Path) -> dict[str, Any] | None:
    """The pairwise sheets notebook 05 exported to ``folder`` (None when there are none)."""
    folder = Path(folder)
    if not (folder / "key.csv").is_file():
        return None
    sheets = {p.stem: p for p in sorted(folder.glob("A*.csv"))}
    return {"sheets": sheets, "key": folder / "key.csv"} if sheets else None


def plot_agreement_heatmap(pairs, fleiss, dataset: str, title: str = ""):
    """Figures 2-3: Cohen's kappa above and raw agreement below the diagonal, Fleiss' kappa in the title."""
    import matplotlib.pyplot as plt

    p = pairs[pairs["dataset"] == dataset]
    names = sorted(set(p["annotator_a"]) | set(p["annotator_b"]))
    n = len(names)
    kap = np.full((n, n), np.nan)
    for r in p.itertuples():
        i, j = names.index(r.annotator_a), names.index(r.annotator_b)
        i, j = min(i, j), max(i, j)
        kap[i, j], kap[j, i] = r.cohen_kappa, r.raw_agreement
    same = p[p["same_model"]] if "same_model" in p else p.iloc[:0]
    same_cells = {(names.index(a), names.index(b)) for a, b in zip(same["annotator_a"], same["annotator_b"])}
    same_cells |= {(j, i) for i, j in same_cells}
    fig, ax = plt.subplots(figsize=(1.1 * n + 2.2, 1.0 * n + 1.4))
    ax.imshow(np.nan_to_num(kap, nan=0.0), cmap="Blues", vmin=0.0, vmax=1.0)
    for i in range(n):
        for j in range(n):
            if i != j and not np.isnan(kap[i, j]):
                mark = "*" if (i, j) in same_cells else ""
                ax.text(j, i, f"{'κ' if i < j else 'Ag'}={kap[i, j]:.2f}{mark}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(n), names)
    ax.set_yticks(range(n), names)
    if "model_a" in p:  # which model each annotator is
        who = {**dict(zip(p["annotator_a"], p["model_a"])), **dict(zip(p["annotator_b"], p["model_b"]))}
        notes = ["; ".join(f"{a} = {who[a]}" for a in names if a in who)]
        if len(same):
            notes.append(f"* {len(same)} of {len(p)} pairs are ONE model with itself (greedy vs sampled at T=0.7): "
                         f"self-consistency, not agreement between raters")
        ax.set_xlabel("\n".join(ln for t in notes for ln in textwrap.wrap(t, 60 + 12 * n)), fontsize=6, loc="left")
    fk = fleiss[fleiss["dataset"] == dataset]["fleiss_kappa"]
    fk_text = f"Fleiss' κ = {float(fk.iloc[0]):.4f}" if len(fk) else "Fleiss' κ n/a"
    ax.set_title((title + "\n" if title else "") + f"{dataset}: κ above, Ag below the diagonal; {fk_text}", fontsize=8)
    fig.tight_layout()
    return fig


def ablation_table5(profile: str, chunk_sets: Mapping[str, Sequence[Any]], books: Mapping[str, Any], backend: Any,
                    names: Mapping[str, str], seed: int = 0) -> dict[str, Any]:
    """Notebook 07's Table 5 from the ablation variants' rating sheets."""

    sq = SegmentQualityConfig.for_profile(profile, seed=seed)
    sheets = export_rating_sheets(chunk_sets, books, artifact_dir(profile, "ablation", "human_eval"),
                                  sq.human_sheet_chunks, sq.human_raters, seed)
    res = evaluate_rating_sheets(profile, "ablation", sheets, backend, sq.llm_rating_items, seed, sq.judge_retries)
    t5 = res["table1"].copy()
    t5.insert(1, "variant", t5["method"].map(dict(names)))
    res["table5"], res["sheets"] = t5, sheets
    return res
