"""Efficiency analysis (paper §4.4): LLM cost of each segmenter, from the recorded usage ledgers.

Notebooks 02 (LitSeg), 03 (LitSeg-Lite) and 04 (LLM baselines) write their
:class:`~litseg_nb.llm.base.UsageLedger` to ``artifacts/usage/<NN>.csv``. This module joins those
ledgers with the chunk artifacts (to know how many sentences each method segmented) and reports
calls, tokens and seconds per 1,000 sentences — hardware-independent token counts next to the
wall-clock seconds of this machine.

Requests served from the persistent request cache carry the token counts and latency recorded
when they were first computed (see :mod:`litseg_nb.llm.request_cache`), so the table reports the
model's cost whether or not this run recomputed it; ``cache_hits`` says how many calls this run
actually served from the cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .chunkers.config import METHOD_NAMES
from .config import StageConfig, one_of
from .paths import outputs_dir
from .schema import load_chunks


@dataclass(frozen=True)
class EfficiencyConfig(StageConfig):
    """Notebook 08: the method every speed-up is measured against."""

    reference: str = one_of("litseg", *METHOD_NAMES)

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        return {"test": {}, "smoke": {}, "full": {}}[profile]

USAGE_COLUMNS = ["method", "book", "stage", "calls", "prompt_tokens", "cached_prompt_tokens",
                 "completion_tokens", "latency_s", "cache_hits"]
COST_COLUMNS = ["method", "stages", "sentences", "calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens",
                "completion_tokens", "model_seconds", "calls_per_1k_sent", "prompt_tokens_per_1k_sent",
                "completion_tokens_per_1k_sent", "seconds_per_1k_sent"]


def load_usage(profile: str, notebooks: Iterable[str] | None = None) -> pd.DataFrame:
    """All usage ledgers of ``profile`` (one row per method, book, stage and notebook)."""
    root = outputs_dir(profile) / "artifacts" / "usage"
    frames = []
    for path in sorted(root.glob("*.csv")):
        if notebooks is not None and path.stem not in set(notebooks):
            continue
        df = pd.read_csv(path)
        missing = set(USAGE_COLUMNS) - set(df.columns)
        if missing:
            raise ValueError(f"usage ledger {path} lacks columns {sorted(missing)}")
        df["notebook"] = path.stem
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*USAGE_COLUMNS, "notebook"])
    return pd.concat(frames, ignore_index=True)


def sentences_per_method(profile: str, methods: Iterable[str]) -> dict[str, int]:
    """Number of unit sentences each method's chunk artifact covers (max ``to_idx`` per unit; chunk
    sets of notebooks 02-04 and the ablation variants of notebook 07)."""
    out: dict[str, int] = {}
    art = outputs_dir(profile) / "artifacts"
    for method in methods:
        # notebook 07 keeps its ablation variants' chunks apart from the evaluated chunk sets
        path = next((p for p in (art / "chunks" / f"{method}.jsonl", art / "ablation" / "chunks" / f"{method}.jsonl")
                     if p.is_file()), None)
        if path is None:
            continue
        last: dict[tuple[str, str], int] = {}
        for c in load_chunks(path):
            key = (c.book_id, c.unit_id)
            last[key] = max(last.get(key, 0), c.to_idx)
        out[method] = int(sum(last.values()))
    return out


def efficiency_table(usage: pd.DataFrame, sentences: dict[str, int]) -> pd.DataFrame:
    """Per method: calls, tokens and model seconds, in total and per 1,000 sentences."""
    if usage.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    g = usage.groupby("method", sort=True).agg(
        calls=("calls", "sum"), cache_hits=("cache_hits", "sum"), prompt_tokens=("prompt_tokens", "sum"),
        cached_prompt_tokens=("cached_prompt_tokens", "sum"), completion_tokens=("completion_tokens", "sum"),
        latency_s=("latency_s", "sum"), stages=("stage", lambda s: ",".join(sorted(set(map(str, s))))),
    ).reset_index()
    g["model_seconds"] = g["latency_s"]
    g["sentences"] = g["method"].map(sentences).astype("float")
    per_k = 1000.0 / g["sentences"]
    g["calls_per_1k_sent"] = g["calls"] * per_k
    g["prompt_tokens_per_1k_sent"] = g["prompt_tokens"] * per_k
    g["completion_tokens_per_1k_sent"] = g["completion_tokens"] * per_k
    g["seconds_per_1k_sent"] = g["model_seconds"] * per_k
    return g[COST_COLUMNS]


def speedup_table(eff: pd.DataFrame, reference: str = "litseg",
                  metric: str = "seconds_per_1k_sent") -> pd.DataFrame:
    """Each method's cost relative to ``reference`` (the paper: Lite is 2.69x faster than LitSeg)."""
    if reference not in set(eff["method"]):
        return pd.DataFrame(columns=["method", metric, f"speedup_vs_{reference}"])
    ref = float(eff.loc[eff["method"] == reference, metric].iloc[0])
    out = eff[["method", metric]].copy()
    out[f"speedup_vs_{reference}"] = ref / out[metric]
    return out


def plot_cost(eff: pd.DataFrame, ax=None):
    """Bar chart of prompt and completion tokens per 1,000 sentences per method."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    d = eff.set_index("method")[["prompt_tokens_per_1k_sent", "completion_tokens_per_1k_sent"]]
    d.columns = ["prompt tokens", "completion tokens"]
    d.plot.barh(stacked=True, ax=ax)
    ax.set_xlabel("tokens per 1,000 sentences segmented")
    ax.set_ylabel("")
    ax.set_title("LLM cost of segmentation")
    return ax


def usage_files(profile: str) -> list[Path]:
    return sorted((outputs_dir(profile) / "artifacts" / "usage").glob("*.csv"))


def notebook_wall_times(profile: str) -> pd.DataFrame:
    """Wall time of each executed notebook of ``profile``, from papermill's recorded metadata."""
    import json

    rows = []
    for path in sorted((outputs_dir(profile) / "executed").glob("*.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
        rows.append({"notebook": path.name, "seconds": meta.get("duration"),
                     "status": "failed" if meta.get("exception") else "ok",
                     "finished": meta.get("end_time")})
    return pd.DataFrame(rows, columns=["notebook", "seconds", "status", "finished"])
