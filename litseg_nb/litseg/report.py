"""Tables, figures and the HTML rendering of notebook 02 (from annotation records)."""
from __future__ import annotations

import html
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..core.schema import Book, Chunk
from .validate import FALLBACK_ORDER

def _overlaps(segs: list[dict[str, Any]]) -> list[bool]:
    return [any(j != i and s["from_idx"] <= t["to_idx"] and t["from_idx"] <= s["to_idx"] for j, t in enumerate(segs))
            for i, s in enumerate(segs)]


def segment_frame(records: Sequence[dict[str, Any]], chunks: Sequence[Chunk],
                  count_tokens: Callable[[str], int]) -> pd.DataFrame:
    """One row per segment: lengths in sentences and tokens (main text), overlap, context."""
    by_unit: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
    rows = []
    for r in records:
        cs = by_unit.get((r["book_id"], r["unit_id"]), [])
        if len(cs) != len(r["segments"]):
            raise ValueError(f"chunks of unit {r['unit_id']} of {r['book_id']} do not match its segments")
        for seg, ov, c in zip(r["segments"], _overlaps(r["segments"]), cs):
            rows.append({
                "book_id": r["book_id"], "unit_id": r["unit_id"], "fallback": r["fallback"],
                "structured_output": r["structured_output"], "subtitle": seg["subtitle"],
                "from_idx": seg["from_idx"], "to_idx": seg["to_idx"],
                "len_sentences": seg["to_idx"] - seg["from_idx"] + 1,
                "len_tokens": count_tokens(c.main_text),
                "overlap": ov, "has_context": bool(c.context_idx),
            })
    return pd.DataFrame(rows)


def summary_table(records: Sequence[dict[str, Any]], segments: pd.DataFrame, model_label: str) -> pd.DataFrame:
    """Per book: units, segments, lengths, overlap/context shares, validity, retries, fallbacks, tokens, time."""
    rows = []
    recs = pd.DataFrame(records)
    for book_id, grp in recs.groupby("book_id", sort=False):
        seg = segments[segments.book_id == book_id]
        row: dict[str, Any] = {
            "book_id": book_id,
            "model": model_label,
            "structured_output": bool(grp["structured_output"].iloc[0]),
            "units": len(grp),
            "segments": len(seg),
            "len_sent_mean": seg.len_sentences.mean(),
            "len_sent_std": seg.len_sentences.std(ddof=0),
            "len_tok_mean": seg.len_tokens.mean(),
            "len_tok_std": seg.len_tokens.std(ddof=0),
            "share_overlap": seg.overlap.mean(),
            "share_context": seg.has_context.mean(),
        }
        for stage in ("stage1", "stage2", "stage3"):
            row[f"first_try_valid_{stage}"] = float(np.mean([r[stage] for r in grp.first_try_valid]))
        row["valid_after_retries_stage3"] = float(np.mean([s["stage3"]["valid"] for s in grp.stages]))
        row["retries"] = int(grp.retries.sum())
        for fb in FALLBACK_ORDER:
            row[f"fallback_{fb}"] = int((grp.fallback == fb).sum())
        for stage in ("stage1", "stage2"):
            row[f"{stage}_passthrough"] = int(sum(r[stage] != "none" for r in grp.stage_fallbacks))
        row["backend_errors"] = int(sum(sum(grp.stages.iloc[i][s]["backend_errors"] for s in grp.stages.iloc[i])
                                        for i in range(len(grp))))
        for col, key in (("llm_calls", "calls"), ("tokens_in", "prompt"), ("tokens_out", "completion"),
                         ("cache_hits", "cache_hits"), ("llm_latency_s", "latency_s")):
            row[col] = (float if key == "latency_s" else int)(sum(t[key] for t in grp.tokens))
        row["wall_s"] = float(grp.group_wall_share_s.sum())
        rows.append(row)
    return pd.DataFrame(rows)


FALLBACK_COLOURS = {"none": "#2e7d32", "schema_repair": "#6d4c41", "index_repair": "#ef6c00",
                    "coverage_repair": "#f9a825", "whole_unit": "#c62828"}
_SEG_BG = ("#e3f2fd", "#fce4ec", "#e8f5e9", "#fff3e0", "#ede7f6", "#e0f7fa")


def render_segments_html(book: Book, record: dict[str, Any], label: str) -> str:
    """A unit's LitSeg segmentation as HTML: a coloured block per segment (subtitle, range, context in
    italics); overlapping sentences underlined, fallback-added ones outlined."""
    unit = book.unit(record["unit_id"])
    repaired = set(record.get("repaired_indices") or [])
    segs = record["segments"]
    in_ranges = Counter(i for s in segs for i in range(s["from_idx"], s["to_idx"] + 1))
    overl = {i for i, count in in_ranges.items() if count > 1}
    fb = record["fallback"]
    parts = [
        "<div style='font-family:Georgia,serif;max-width:60em'>",
        f"<h3>{html.escape(book.title)} — {html.escape(unit.title)} ({html.escape(unit.unit_id)})</h3>",
        f"<p style='font-size:80%;color:#555'>{html.escape(label)}<br>{unit.n_sentences} sentences, "
        f"{len(segs)} segments, fallback: <b style='color:{FALLBACK_COLOURS.get(fb, '#000')}'>{fb}</b>"
        f"{' — repaired sentences ' + ', '.join(map(str, sorted(repaired))) if repaired else ''}</p>",
    ]
    for k, s in enumerate(segs):
        bg = _SEG_BG[k % len(_SEG_BG)]
        parts.append(f"<div style='background:{bg};border-left:4px solid #1565c0;margin:6px 0;padding:4px 8px'>")
        parts.append(f"<div style='font-weight:bold'>§{k + 1} {html.escape(s['subtitle'] or '(no subtitle)')} "
                     f"<span style='font-weight:normal;color:#555'>[{s['from_idx']}–{s['to_idx']}]</span></div>")
        if s["context_idx"]:
            ctx = " ".join(f"<span style='color:#6a1b9a'>[{c}] {html.escape(unit.sentence_text(book.text, c))}</span>"
                           for c in s["context_idx"])
            parts.append(f"<div style='font-style:italic;font-size:90%;margin:2px 0 4px 1em'>context: {ctx}</div>")
        sents = []
        for i in range(s["from_idx"], s["to_idx"] + 1):
            style = []
            if i in overl:
                style.append("text-decoration:underline")
            if i in repaired:
                style.append("outline:1px dashed #c62828")
            st = f" style='{';'.join(style)}'" if style else ""
            sents.append(f"<span{st}><sup style='color:#888'>{i}</sup>{html.escape(unit.sentence_text(book.text, i))}</span>")
        parts.append(" ".join(sents))
        parts.append("</div>")
    parts.append("<p style='font-size:80%;color:#555'>underlined: sentence in more than one main range "
                 "(overlap); purple italics: context sentences; dashed: added by the coverage fallback.</p></div>")
    return "\n".join(parts)


def length_figure(segments: pd.DataFrame, title: str):
    """Histogram of segment lengths (sentences and tokens), split by structured output."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, col, xl in ((axes[0], "len_sentences", "segment length (sentences)"),
                        (axes[1], "len_tokens", "segment length (tokens)")):
        for so, grp in segments.groupby("structured_output"):
            ax.hist(grp[col], bins=min(20, max(3, len(grp))), alpha=0.6,
                    label=f"constrained decoding {'on' if so else 'off'} (n={len(grp)})")
        ax.set_xlabel(xl)
        ax.set_ylabel("segments")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
