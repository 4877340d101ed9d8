"""Scoring narrative-unit detection against hand-read gold headings (``tests/structure_gold.jsonl``)."""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from .structure import FRONT_MATTER, build_units
from ..data.gutenberg import GutenbergFormatError, clean_gutenberg_text

FRONT = "@front"
HELD_OUT_SEED = "litseg-22"


def is_held_out(file: str) -> bool:
    """The held-out quarter of the gold: a seeded hash of the book's path, so a book
    added later is assigned by the same rule, before any score of it is seen."""
    return int(hashlib.sha256(f"{HELD_OUT_SEED}:{file}".encode()).hexdigest(), 16) % 4 == 0


def _norm(s: str) -> list[str]:
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).casefold()
    return re.sub(r"[\W_]+", " ", s).split()


def _keys(title: str) -> list[list[str]]:
    parts = [p for p in title.split(" / ") if p.strip()]
    keys = [_norm(parts[-1]) if parts else [], *(_norm(" ".join(parts[k:])) for k in range(len(parts)))]
    return [k for k in keys if k]


def headings_match(gold: str, pred: str) -> bool:
    """Some key of one title is a word prefix of a key of the other."""
    return any(x[:len(y)] == y[:len(x)] for x in _keys(gold) for y in _keys(pred))


def _lcs_pairs(gold: Sequence[str], pred: Sequence[str], match) -> int:
    n, m = len(gold), len(pred)
    prev = [0] * (m + 1)
    for i in range(1, n + 1):
        cur = [0] * (m + 1)
        for j in range(1, m + 1):
            cur[j] = prev[j - 1] + 1 if match(i - 1, j - 1) else max(prev[j], cur[j - 1])
        prev = cur
    return prev[m]


@dataclass
class GoldEntry:
    file: str
    units: list[str]
    first_text: str | None
    kind: str = ""
    note: str = ""
    held_out: bool = False  # in the held-out quarter (never looked at while writing rules)


def load_gold(path: Path | str) -> list[GoldEntry]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(GoldEntry(**json.loads(line)))
                except (TypeError, json.JSONDecodeError) as err:
                    raise ValueError(f"{path}:{lineno}: bad gold entry ({err})") from err
    return out


def score_book(entry: GoldEntry, text: str, predicted: Sequence[tuple[str, int]]) -> dict:
    """Scores of one book; ``predicted`` = ``(title, start)`` of its narrative units in order."""
    pos = text.find(entry.first_text) if entry.first_text else 0
    if entry.first_text and pos < 0:
        raise ValueError(f"{entry.file}: gold first_text {entry.first_text!r} not in the cleaned text")
    titles = [t for t, _ in predicted]

    def match(i: int, j: int) -> bool:
        g = entry.units[i]
        if g == FRONT:
            return j == 0 and predicted[0][1] <= pos
        return headings_match(g, titles[j])

    tp = _lcs_pairs(entry.units, titles, match)
    first = predicted[0][1] if predicted else len(text)
    lost = len(text[pos:first].split()) if first > pos else 0
    return {"file": entry.file, "kind": entry.kind, "gold_units": len(entry.units), "units": len(titles),
            "count_exact": len(titles) == len(entry.units), "matched": tp,
            **_prf(tp, len(titles), len(entry.units)), "words_lost": lost}


def _prf(tp: int, n_pred: int, n_gold: int) -> dict:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0}


def summarise(rows: Sequence[dict]) -> dict:
    """Micro-averaged heading P/R/F1, share of books with the exact unit count, words lost."""
    totals = {k: sum(r[k] for r in rows) for k in ("matched", "units", "gold_units", "count_exact")}
    return {"books": len(rows), "count_exact": totals["count_exact"],
            "count_exact_pct": round(100 * totals["count_exact"] / max(len(rows), 1), 1),
            **_prf(totals["matched"], totals["units"], totals["gold_units"]),
            "words_lost": sum(r["words_lost"] for r in rows),
            "books_losing_words": sum(1 for r in rows if r["words_lost"])}


def score_gold(gold: Sequence[GoldEntry], root: Path) -> tuple[list[dict], dict]:
    """Clean every gold book under the data ``root`` and score the narrative units
    :func:`~litseg_nb.preprocess.structure.build_units` finds; returns ``(rows, summary)``."""
    rows = []
    for entry in gold:
        t0 = time.perf_counter()
        path = Path(root) / entry.file
        data = path.read_bytes()
        if path.suffix == ".gz":  # a gutenberg_train book (tests/structure_gold_train.jsonl)
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as err:
                raise ValueError(f"{entry.file}: cannot read the gzipped gold book ({err})") from err
        try:
            cleaned = clean_gutenberg_text(data, source=str(path))
        except GutenbergFormatError as err:  # a book that cannot be cleaned loses everything
            raw = " ".join(data.decode("utf-8", errors="replace").split())
            row = score_book(GoldEntry(entry.file, entry.units, None, entry.kind), raw, [])
            row["error"] = str(err)[:200]
        else:
            units = build_units("gold", cleaned.text, cleaned.paragraphs, max_unit_words=None,
                                sentences=[tuple(p) for p in cleaned.paragraphs], whole_title=FRONT,
                                author=cleaned.report.author)
            row = score_book(entry, cleaned.text,
                             [(u.title, u.start) for u in units if not u.title.startswith(FRONT_MATTER)])
        row["seconds"] = round(time.perf_counter() - t0, 3)
        rows.append(row)
    return rows, summarise(rows)


def split_scores(gold: Sequence[GoldEntry], rows: Sequence[dict]) -> dict[str, dict]:
    """Summaries of the tuning books and of the held-out quarter (:func:`is_held_out`), separately."""
    held = {g.file for g in gold if g.held_out}
    return {"tuning": summarise([r for r in rows if r["file"] not in held]),
            "held_out": summarise([r for r in rows if r["file"] in held])}


#: the gold file and the recorded numbers of the earlier detectors
GOLD_FILE = Path(__file__).resolve().parents[2] / "tests" / "structure_gold.jsonl"


def before_after(root: Path):
    """``(per-book rows now, summary table before/after)``: the earlier detectors' recorded numbers beside
    today's, over all books, the tuning books and the held-out quarter."""
    import pandas as pd

    gold = load_gold(GOLD_FILE)
    rows, now = score_gold(gold, root)
    parts = split_scores(gold, rows)
    before, b22 = (json.loads(GOLD_FILE.with_name(f"structure_gold_{name}.json").read_text(encoding="utf-8"))
                   for name in ("before", "before22"))
    table = pd.DataFrame(
        # the recorded files name the commits they were measured at (measured_with); the table names the rules
        [{"detector": "before the nesting-level rules (an older 53-book gold, innermost level)", "books_in": "all",
          **before["summary"]}]
        + [{"detector": "before the chapter-level rules (this gold)", "books_in": k, **b22[v]}
           for k, v in (("all", "summary"), ("tuning", "tuning"), ("held-out quarter", "held_out"))]
        + [{"detector": "now", "books_in": k, **v}
           for k, v in (("all", now), ("tuning", parts["tuning"]), ("held-out quarter", parts["held_out"]))])
    return pd.DataFrame(rows).assign(held_out=[g.held_out for g in gold]), table
