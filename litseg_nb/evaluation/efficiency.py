"""Efficiency (paper §4.4): the LLM cost of each segmenter (notebook 08).

From the usage ledgers of notebooks 02-04, and measured side by side: the methods in one process, one engine per
model (LitSeg on the teacher: the headline ratio; LitSeg's three stages and LumberChunker on the student's base
model; Lite on its merged weights), interleaved blocks, engine start-ups timed apart, request cache bypassed,
prefix caches emptied."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ..chunk_sets import METHOD_ORDER
from ..chunkers.config import BaselinesConfig
from ..chunkers.llm_chunkers import lumber_chunks_batch
from ..config import StageConfig, at_least, one_of
from ..core.artifacts import artifact_dir, artifact_path
from ..core.display import MAX_SERIES, left_out_note, pick_groups
from ..core.paths import outputs_dir, shown_path
from ..core.progress import bar as progress_bar
from ..core.run_record import read_schedule
from ..core.safe_io import write_text_atomic
from ..core.schema import load_chunks, read_jsonl, save_chunks
from ..corpus import load_corpus
from ..errors import LitsegError
from ..lite.config import LiteConfig
from ..lite.data import annotation_length_reference, load_annotations, student_length_reference
from ..lite.segmenter import LiteSegmenter
from ..lite.train import save_merged_model, student_backend
from ..litseg.config import LitSegConfig
from ..litseg.pipeline import annotate_units, records_to_chunks
from ..llm import make_backend, release_backend
from ..llm.base import SamplingParams, UsageTag
from .ablation import adapter_dirs

TIMING_DATASETS = ("all", "gutenqa", "literaryqa")


@dataclass(frozen=True)
class EfficiencyConfig(StageConfig):
    """Notebook 08: the method every speed-up is measured against."""

    reference: str = one_of("litseg", *METHOD_ORDER)
    #: §4.4's unit set: the units all three methods segmented, of this dataset ("all": every one)
    timing_dataset: str = one_of("literaryqa", *TIMING_DATASETS)
    #: also run LitSeg's three stages with the student's model on the §4.4 units into the ledger (the paired
    #: measurement times them beside the teacher either way)
    litseg_on_student: bool = True
    #: §4.4 measured side by side: the methods in this process, interleaved, one engine per model
    paired: bool = True
    #: the first this many §4.4 units (0 = all: the paper's LiteraryQA test units in ``full``)
    paired_max_units: int = at_least(0, 0)
    #: units per batch = the most requests one call carries, for every method alike (0 = one batch)
    paired_batch_units: int = at_least(256, 0)
    #: passes of every method over every batch (each repeat x batch is one interleaved block)
    paired_repeats: int = at_least(1, 1)
    #: vLLM: also time Lite's requests as LoRA requests on the student's engine (the LoRA cost row)
    paired_lora_row: bool = True


USAGE_COLUMNS = ["method", "book", "stage", "calls", "prompt_tokens", "cached_prompt_tokens",
                 "completion_tokens", "latency_s", "cache_hits"]
UNTAGGED = "(no method tag)"
OPTIONAL_USAGE_COLUMNS = ["reasoning_tokens"]  # ledgers written before the LLM layer counted them: 0
COST_COLUMNS = ["method", "stages", "sentences", "calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens",
                "computed_prefill_tokens", "completion_tokens", "reasoning_tokens", "model_seconds",
                "calls_per_1k_sent", "prompt_tokens_per_1k_sent", "computed_prefill_tokens_per_1k_sent",
                "completion_tokens_per_1k_sent", "seconds_per_1k_sent"]


def load_usage(profile: str) -> pd.DataFrame:
    """All usage ledgers of ``profile`` (one row per method, book, stage and notebook)."""
    frames = []
    for path in usage_files(profile):
        # text columns read as text (an all-empty column would otherwise be float NaN)
        df = pd.read_csv(path, dtype={"method": str, "book": str, "stage": str})
        missing = set(USAGE_COLUMNS) - set(df.columns)
        if missing:
            raise ValueError(f"usage ledger {path} lacks columns {sorted(missing)}")
        df = df.assign(**{c: 0 for c in OPTIONAL_USAGE_COLUMNS if c not in df.columns})
        # a call recorded without a method tag (an empty cell reads as NaN) stays visible, never dropped
        df["method"] = df["method"].fillna("").astype(str).replace("", UNTAGGED)
        df[["book", "stage"]] = df[["book", "stage"]].fillna("").astype(str)
        df["notebook"] = path.stem
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*USAGE_COLUMNS, *OPTIONAL_USAGE_COLUMNS, "notebook"])
    return pd.concat(frames, ignore_index=True)


def sentences_per_method(profile: str, methods: Iterable[str]) -> dict[str, int]:
    """Unit sentences each method's chunk artifact covers."""
    return {m: int(sum(units.values())) for m, units in _unit_sets(profile, methods).items()}


def _unit_sets(profile: str, methods: Iterable[str]) -> dict[str, dict[tuple[str, str], int]]:
    """Per method: {(book, unit): sentences} of its chunk artifact (evaluated, ablation or efficiency chunks)."""
    art = outputs_dir(profile) / "artifacts"
    out = {}
    for m in methods:
        path = next((p for p in (art / "chunks" / f"{m}.jsonl", art / "ablation" / "chunks" / f"{m}.jsonl",
                                 art / "efficiency" / "chunks" / f"{m}.jsonl") if p.is_file()), None)
        if path is not None:  # a unit's sentences: its chunks' largest ``to_idx``
            units = out[m] = {}
            for c in load_chunks(path):
                units[(c.book_id, c.unit_id)] = max(units.get((c.book_id, c.unit_id), 0), c.to_idx)
    return out


def efficiency_table(usage: pd.DataFrame, sentences: dict[str, int]) -> pd.DataFrame:
    """Per method: calls, tokens and model seconds, in total and per 1,000 sentences."""
    if usage.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    usage = usage.assign(**{c: 0 for c in OPTIONAL_USAGE_COLUMNS if c not in usage.columns})
    sums = ("calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens",
            "latency_s")
    stages = ("stage", lambda s: ",".join(sorted(set(map(str, s)))))
    g = usage.groupby("method", sort=True).agg(**{c: (c, "sum") for c in sums}, stages=stages).reset_index()
    g["model_seconds"] = g["latency_s"]
    g["computed_prefill_tokens"] = g["prompt_tokens"] - g["cached_prompt_tokens"]
    g["sentences"] = g["method"].map(sentences).astype("float")
    per_k = 1000.0 / g["sentences"]
    for c in ("calls", "prompt_tokens", "computed_prefill_tokens", "completion_tokens"):
        g[f"{c}_per_1k_sent"] = g[c] * per_k
    g["seconds_per_1k_sent"] = g["model_seconds"] * per_k
    return g[COST_COLUMNS]


def speedup_table(eff: pd.DataFrame, reference: str = "litseg") -> pd.DataFrame:
    """Each method's cost relative to ``reference`` (the paper: Lite is 2.69x faster than LitSeg)."""
    metric = "seconds_per_1k_sent"
    if reference not in set(eff["method"]):
        return pd.DataFrame(columns=["method", metric, f"speedup_vs_{reference}"])
    ref = float(eff.loc[eff["method"] == reference, metric].iloc[0])
    out = eff[["method", metric]].copy()
    out[f"speedup_vs_{reference}"] = ref / out[metric]
    return out


def plot_cost(eff: pd.DataFrame, max_rows: int = MAX_SERIES):
    """Prompt and completion tokens per 1,000 sentences, at most ``max_rows`` rows: §4.4's methods (LitSeg, on
    the teacher and on the student's model, LitSeg-Lite, LumberChunker), then the other segmenters in the
    registry's order; methods with the same cost share a row (``a = b``); rows without sentences and rows left
    out are named under the axis."""
    import textwrap

    import matplotlib.pyplot as plt

    cols = ["prompt_tokens_per_1k_sent", "completion_tokens_per_1k_sent"]
    values = eff[cols].apply(pd.to_numeric, errors="coerce").replace([float("inf"), float("-inf")], float("nan"))
    has_cost = values.notna().all(axis=1)
    shown, skipped = eff[has_cost], eff.loc[~has_cost, "method"].astype(str).tolist()
    keys = [c for c in [*cols, "calls", "sentences"] if c in shown]  # the same cost: the same row
    same = {str(r["method"]): tuple(round(float(r[c]), 6) for c in keys) for _, r in shown.iterrows()}
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    groups, left_out = pick_groups(same, {m: order.get(m, float("nan")) for m in same},
                                   ("litseg", STUDENT_METHOD, "litseg-lite", "lumber"), n=max_rows,
                                   higher_is_better=False)
    _, ax = plt.subplots(figsize=(7, 0.4 * max(len(groups), 1) + 1.6))
    if groups:
        d = shown.set_index("method").loc[[g[0] for g in groups], cols]
        d.index = [" = ".join(g) for g in groups]
        d.columns = ["prompt tokens", "completion tokens"]
        d.plot.barh(stacked=True, ax=ax)
        ax.invert_yaxis()  # §4.4's methods on top
    else:
        ax.text(0.5, 0.5, "no method segmented sentences", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xlabel("tokens per 1,000 sentences segmented")
    ax.set_ylabel("")
    ax.set_title("LLM cost of segmentation")
    notes = []
    if left_out:
        notes.append(left_out_note(left_out, "segmenters", "08_llm_cost"))
    if skipped:
        notes.append(f"not shown ({len(skipped)}: no sentences segmented to divide by; their tokens are in table "
                     f"08_llm_cost): " + ", ".join(skipped))
    if notes:  # anchored under the x label, whatever its height
        text = "\n".join(textwrap.fill(n, 95, break_on_hyphens=False) for n in notes)
        ax.annotate(text, xy=(0, 0), xycoords=("axes fraction", ax.xaxis.label),
                    xytext=(0, -6), textcoords="offset points", ha="left", va="top", fontsize=7, color="0.25")
    return ax


def usage_files(profile: str) -> list[Path]:
    return sorted((outputs_dir(profile) / "artifacts" / "usage").glob("*.csv"))


def notebook_wall_times(profile: str) -> pd.DataFrame:
    """Wall time of each executed notebook of ``profile``, from papermill's recorded metadata."""
    executed = outputs_dir(profile) / "executed"
    schedule = read_schedule(profile)
    rows = []
    # a .RUNNING notebook is still running (or was killed): not a finished run
    for path in (p for p in sorted(executed.glob("*.ipynb")) if not p.name.endswith(".RUNNING.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
        failed = path.name.endswith(".FAILED.ipynb") or bool(meta.get("exception"))
        rec = schedule.get(path.name[:2], {})
        rows.append({"notebook": path.name, "seconds": meta.get("duration"),
                     "status": "failed" if failed else "ok", "finished": meta.get("end_time"),
                     # the runner's record (logs/schedule.json): what ran beside it, its torch threads
                     "ran_beside": ", ".join(rec.get("ran_beside", [])) if rec else "not recorded",
                     "torch_threads": rec.get("torch_threads", "not recorded")})
    return pd.DataFrame(rows, columns=["notebook", "seconds", "status", "finished", "ran_beside", "torch_threads"])


def contention_note(profile: str, notebooks: Iterable[str] = ("02", "03", "04", "05", "06", "07")) -> str:
    """One label phrase naming which of ``notebooks`` ran beside another (``run --jobs``), "" when none did."""
    schedule = read_schedule(profile)
    beside = {n: schedule[n] for n in notebooks if schedule.get(n, {}).get("ran_beside")}
    if not beside:
        return ""
    parts = [f"{n} beside {'+'.join(r['ran_beside'])} (torch threads {r.get('torch_threads', '?')})"
             for n, r in sorted(beside.items())]
    return (" | SIDE BY SIDE (run --jobs): " + ", ".join(parts)
            + ": those notebooks' seconds were taken sharing the cores, token counts are unaffected")


PAPER_SECONDS = {"litseg": 25362.0, "litseg-lite": 9442.0, "lumber": 13514.0}
PAPER_SETUP = "paper: LiteraryQA test, vLLM, one RTX 6000 Ada GPU"
STUDENT_METHOD = "litseg-student"  # LitSeg's three stages run with the student's model (notebook 08)
# method -> (usage tag method, stages counted (None = all), notebook whose ledger holds the work)
MEASURED: dict[str, tuple[str, tuple[str, ...] | None, str]] = {
    "litseg": ("litseg", ("stage1", "stage2", "stage3"), "02"),
    "litseg-lite": ("litseg-lite", ("single-pass",), "03"),
    "lumber": ("lumber", None, "04"),
}
# measured beside the three, on their units, never part of the unit intersection
CONTROLS: dict[str, tuple[str, tuple[str, ...] | None, str]] = {
    STUDENT_METHOD: (STUDENT_METHOD, ("stage1", "stage2", "stage3"), "08"),
}
# ratio -> (numerator, denominator, the paper's value, what the LitSeg side runs on)
RATIOS: dict[str, tuple[str, str, float, str]] = {
    "litseg-lite / litseg": ("litseg-lite", "litseg", 0.37, "LitSeg on the configured teacher"),
    f"litseg-lite / {STUDENT_METHOD}": ("litseg-lite", STUDENT_METHOD, 0.37,
                                        "LitSeg on the student's model (same weights: 3 stages vs 1 pass)"),
    "litseg-lite / lumber": ("litseg-lite", "lumber", 0.70, "LumberChunker on the shared inference configuration"),
}
PAPER_COLUMNS = ["method", "model", "books", "units", "sentences", "same_units", "calls", "cache_hits",
                 "prompt_tokens", "computed_prefill_tokens", "completion_tokens", "reasoning_tokens",
                 "model_seconds", "wall_seconds", "wall_note", "calls_per_1k_sent", "prompt_tokens_per_1k_sent",
                 "computed_prefill_tokens_per_1k_sent", "completion_tokens_per_1k_sent",
                 "model_seconds_per_1k_sent", "wall_seconds_per_1k_sent", "paper_seconds"]


def timing_units(profile: str, timing_dataset: str = "all") -> tuple[set[tuple[str, str]], list[str]]:
    """§4.4's units (all present :data:`MEASURED` methods segmented them): ``(units, methods)``."""
    if timing_dataset not in TIMING_DATASETS:
        raise ValueError(f"timing_dataset {timing_dataset!r} is not one of {TIMING_DATASETS}")
    units = _unit_sets(profile, MEASURED)
    present = [m for m in MEASURED if m in units]
    if not present:
        return set(), present
    common = set.intersection(*(set(units[m]) for m in present))
    if timing_dataset != "all":
        common = {k for k in common if k[0].startswith(timing_dataset + ":")}
    return common, present


def timing_unit_pairs(corpus: Any, units: Iterable[tuple[str, str]], profile: str,
                      error: type[Exception] = ValueError) -> list[tuple[Any, Any]]:
    """The §4.4 ``units`` as sorted ``(book, unit)`` pairs; missing units raise ``error``."""
    want = sorted(units)
    found = {(b.book_id, u.unit_id): (b, u) for b in load_corpus(corpus) if b.book_id in {k[0] for k in want}
             for u in reversed(b.units)}  # reversed: a unit id's first unit wins
    missing = [f"{bid}/{uid}" for bid, uid in want if (bid, uid) not in found]
    if missing:
        raise error(f"§4.4 unit(s) {missing} are not in profile {profile!r}'s corpus; rerun notebooks 01-04")
    return [found[k] for k in want]


def describe_timing_set(timing_dataset: str) -> str:
    return ("every unit all three methods segmented (the profile's evaluation set)" if timing_dataset == "all"
            else f"the {timing_dataset} units all three methods segmented")


def _wall_seconds(profile: str, method: str, units: set[tuple[str, str]]) -> tuple[float, str]:
    """Wall time recorded when the work was done, on ``units`` (nan + why when not available)."""
    art = outputs_dir(profile) / "artifacts"
    nan = float("nan")
    if method in ("litseg", STUDENT_METHOD):
        path = (art / "litseg" / "annotations.jsonl" if method == "litseg"
                else art / "efficiency" / "litseg_student_annotations.jsonl")
        if not path.is_file():
            return nan, f"no {path.name}"
        recs = [r for r in read_jsonl(path) if (r["book_id"], r["unit_id"]) in units]
        if method == STUDENT_METHOD and any((r.get("tokens") or {}).get("cache_hits") for r in recs):
            return nan, "replies served from the request cache: this run's wall time is not the model's"
        return (float(sum(r.get("group_wall_share_s") or 0.0 for r in recs)),
                "recorded per unit when annotated (kept on resume)")
    books = {b for b, _ in units}
    if method == "litseg-lite":
        path = art / "lite" / "chunk_run.jsonl"
        if not path.is_file():
            return nan, "no lite/chunk_run.jsonl"
        rows = [r for r in read_jsonl(path) if (r["book_id"], r["unit_id"]) in units]
        if any(r.get("cache_hits") for r in rows):
            return nan, "replies served from the request cache: this run's wall time is not the model's"
        return float(sum(r.get("seconds") or 0.0 for r in rows)), "measured in notebook 03's chunk-set run"
    if method == "lumber":
        path = outputs_dir(profile) / "tables" / "04_runs.csv"
        if not path.is_file():
            return nan, "no tables/04_runs.csv"
        runs = pd.read_csv(path)
        runs = runs[(runs["method"] == "lumber") & runs["book_id"].isin(books)]
        return float(runs["seconds"].sum()), "recorded per book when computed (kept on step-cache hits)"
    return nan, "not recorded"


def paper_efficiency_table(profile: str, models: dict[str, str] | None = None,
                           timing_dataset: str = "all", controls: bool = True) -> tuple[pd.DataFrame, str]:
    """§4.4 from the ledgers on the units all three methods segmented: ``(table, note)``."""
    usage = load_usage(profile)
    common, present = timing_units(profile, timing_dataset)
    if not present:
        return pd.DataFrame(columns=PAPER_COLUMNS), "no LitSeg, LitSeg-Lite or LumberChunker chunk set yet"
    units = _unit_sets(profile, [*present, *(CONTROLS if controls else ())])
    books = {b for b, _ in common}
    rows = []
    for m in [*present, *(c for c in CONTROLS if c in units)]:
        tag, stages, nb = {**MEASURED, **CONTROLS}[m]
        u = usage[(usage["method"] == tag) & (usage["notebook"] == nb) & usage["book"].isin(books)]
        if stages is not None:
            u = u[u["stage"].isin(stages)]
        mine = {k: v for k, v in units[m].items() if k[0] in books}
        sents = float(sum(mine.values()))
        wall, why = _wall_seconds(profile, m, set(mine))
        per_k = 1000.0 / sents if sents else float("nan")
        tot = {c: float(u[c].sum()) if c in u else 0.0 for c in
               ("calls", "cache_hits", "prompt_tokens", "cached_prompt_tokens", "completion_tokens",
                "reasoning_tokens", "latency_s")}
        prefill = tot["prompt_tokens"] - tot["cached_prompt_tokens"]
        rows.append({
            "method": m, "model": (models or {}).get(m, ""), "books": len(books), "units": len(mine),
            "sentences": int(sents), "same_units": set(mine) == common,
            "computed_prefill_tokens": int(prefill),
            **{c: int(tot[c]) for c in ("calls", "cache_hits", "prompt_tokens", "completion_tokens",
                                        "reasoning_tokens")},
            "model_seconds": tot["latency_s"], "wall_seconds": wall, "wall_note": why,
            "calls_per_1k_sent": tot["calls"] * per_k, "prompt_tokens_per_1k_sent": tot["prompt_tokens"] * per_k,
            "computed_prefill_tokens_per_1k_sent": prefill * per_k,
            "completion_tokens_per_1k_sent": tot["completion_tokens"] * per_k,
            "model_seconds_per_1k_sent": tot["latency_s"] * per_k, "wall_seconds_per_1k_sent": wall * per_k,
            "paper_seconds": PAPER_SECONDS.get(m, PAPER_SECONDS["litseg"] if m == STUDENT_METHOD else float("nan")),
        })
    note = (f"{describe_timing_set(timing_dataset)}: {len(common)} unit(s) of {len(books)} book(s) segmented by all "
            f"of {', '.join(present)}"
            + ("" if len(present) == len(MEASURED) else f" (missing: {', '.join(sorted(set(MEASURED) - set(present)))})"))
    if not common:
        note += f" — NO unit to time: no {timing_dataset} unit was segmented by all of them"
    return pd.DataFrame(rows, columns=PAPER_COLUMNS), note


def paper_ratio_table(table: pd.DataFrame, models: dict[str, str] | None = None) -> pd.DataFrame:
    """Lite/LitSeg and Lite/LumberChunker cost ratios per 1,000 sentences beside the paper's."""
    metrics = ("model_seconds_per_1k_sent", "wall_seconds_per_1k_sent", "computed_prefill_tokens_per_1k_sent",
               "prompt_tokens_per_1k_sent", "completion_tokens_per_1k_sent", "calls_per_1k_sent")
    by = table.set_index("method") if not table.empty else None
    rows = []
    for name, (num, den, paper, side) in RATIOS.items():
        model = (models or {}).get(den, "")
        row: dict[str, Any] = {"ratio": name, "denominator": side + (f" ({model})" if model else ""),
                               "paper (end-to-end seconds)": paper}
        for k in metrics:
            ok = by is not None and num in by.index and den in by.index and by.loc[den, k]
            row[k] = float(by.loc[num, k] / by.loc[den, k]) if ok else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def run_litseg_on_student(profile: str, units: set[tuple[str, str]], ledger: Any,
                          seed: int = 0) -> tuple[Any, Path]:
    """LitSeg's three stages on the student's model (teacher-size control): ``(run, chunks)``."""
    student = LiteConfig.for_profile(profile, seed=seed).llm
    cfg = LitSegConfig.for_profile(profile, seed=seed).replace(llm=student.to_dict())
    recs = [r for r in load_annotations(profile, "eval") if (r["book_id"], r["unit_id"]) in units]
    ref = annotation_length_reference(recs)  # the teacher's run's value on these units
    pairs = timing_unit_pairs(cfg.corpus, units, profile)
    backend = make_backend(student, ledger)
    run = annotate_units(pairs, backend, cfg, length_reference=ref, method=STUDENT_METHOD,
                         annotations_path=artifact_path(profile, "efficiency", "litseg_student_annotations.jsonl"))
    path = artifact_path(profile, "efficiency", "chunks", f"{STUDENT_METHOD}.jsonl")
    books = {b.book_id: b for b, _ in pairs}
    save_chunks(path, records_to_chunks(list(books.values()), run.records, method=STUDENT_METHOD))
    return run, path


def hardware_label() -> str:
    """The machine the recorded model seconds come from (GPU name, else CPU model and cores)."""
    import platform

    with contextlib.suppress(ImportError):
        import torch

        if torch.cuda.is_available():
            return f"GPU {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    lines: list[str] = []
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")),
               platform.processor() or platform.machine())
    return f"CPU {cpu}, {os.cpu_count()} cores"


def save_chunk_run(profile: str, results: Iterable[Any]) -> Path:
    """Notebook 03: per-unit record of Lite's chunk-set run (the §4.4 measurement of Lite)."""
    path = artifact_path(profile, "lite", "chunk_run.jsonl")
    rows = [{k: v for k, v in r.to_json().items() if k not in ("replies", "errors")} for r in results]
    return write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


LITE_LORA_METHOD = "litseg-lite-lora"  # Lite's requests as LoRA requests on the student's base engine
#: ratio -> (numerator, denominator, the paper's value, what it measures); the first row is §4.4's headline
PAIRED_RATIOS: dict[str, tuple[str, str, float, str]] = {
    "litseg-lite / litseg": (
        "litseg-lite", "litseg", 0.37,
        "HEADLINE (the paper's quantity): Lite against LitSeg on the teacher's weights, one engine per model"),
    f"litseg-lite / {STUDENT_METHOD}": (
        "litseg-lite", STUDENT_METHOD, float("nan"),
        "same weights: LitSeg's 3 stages on the student's base model against Lite's 1 pass (not the paper's quantity)"),
    "litseg-lite / lumber": ("litseg-lite", "lumber", 0.70, "LumberChunker on the student's base model"),
    f"{LITE_LORA_METHOD} / litseg-lite": (
        LITE_LORA_METHOD, "litseg-lite", float("nan"),
        "LoRA cost: Lite's requests as LoRA requests on the base engine against the merged weights"),
}
CACHE_NOTE = "request cache bypassed (use_cache=False): every reply computed in this measurement"


class PairedTimingError(LitsegError, ValueError):
    """The paired measurement cannot run (no unit, a method missing, a unit not in the corpus)."""


@dataclass
class MeteredBackend:
    """A backend proxy that times every ``chat`` call and records its concurrency and usage."""

    inner: Any
    clock: Callable[[], float] = time.perf_counter
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __getattr__(self, item: str) -> Any:  # name, model_id, ledger, tokenizer, structured_output ...
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def chat(self, conversations, params: SamplingParams = SamplingParams(), tag: UsageTag = UsageTag()):
        t0 = self.clock()
        gens = self.inner.chat(conversations, params, tag)
        wall = self.clock() - t0
        tokens = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")
        self.calls.append({"requests": len(conversations), "wall_s": wall,
                           "model_s": float(sum(g.latency_s for g in gens)),
                           **{k: int(sum(getattr(g, k) or 0 for g in gens)) for k in tokens},
                           "cache_hits": int(sum(bool(g.cache_hit) for g in gens))})
        return gens


@dataclass
class PairedEngine:
    """One model's engine in the measurement: ``start()`` builds its backend (timed apart from the passes),
    ``stop(backend)`` releases it. An ``exclusive`` engine (vLLM: one per process, it holds the GPU) runs
    alone: every other engine is stopped before it starts, and it is stopped before another starts."""

    name: str
    model: str
    start: Callable[[], Any]
    stop: Callable[[Any], None] = lambda backend: None
    exclusive: bool = False
    backend: Any = None
    starts: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def fixed(cls, backend: Any, name: str = "") -> "PairedEngine":
        """An engine already running (``backend``), never stopped by the measurement."""
        return cls(name or str(getattr(backend, "model_id", "?")), str(getattr(backend, "model_id", "?")),
                   lambda: backend, backend=backend)

    def ensure(self, clock: Callable[[], float], block: int) -> Any:
        if self.backend is None:
            t0 = clock()
            self.backend = self.start()
            self.starts.append({"engine": self.name, "model": self.model, "block": block, "start_s": clock() - t0})
        return self.backend

    def release(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            self.stop(backend)


@dataclass
class PairedMethod:
    """One method of the measurement: ``run(pairs, backend)`` segments the pairs with ``engine``'s backend
    (a :class:`PairedEngine`, or a backend already built)."""

    name: str
    model: str
    engine: Any
    run: Callable[[Sequence[tuple[Any, Any]], Any], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.engine, PairedEngine):
            self.engine = PairedEngine.fixed(self.engine)


def engine_start_table(methods: Sequence[PairedMethod]) -> pd.DataFrame:
    """Every engine start-up of the measurement (not part of any pass): engine, model, block, seconds."""
    engines = list({id(m.engine): m.engine for m in methods}.values())
    rows = [{**s, "methods": ", ".join(m.name for m in methods if m.engine is e)} for e in engines for s in e.starts]
    return pd.DataFrame(rows, columns=["engine", "model", "block", "start_s", "methods"])


def reset_prefix_cache(backend: Any) -> bool:
    """Empty ``backend``'s own prefix cache (hf or vLLM); True when one was emptied."""
    inner = getattr(backend, "inner", backend)
    inner = getattr(inner, "inner", inner)  # a MeteredBackend around a CachedBackend
    llm = getattr(inner, "llm", None)
    for empty in (getattr(inner, "clear_prefixes", None), getattr(llm, "reset_prefix_cache", None)):
        if callable(empty):
            empty()
            return True
    return False


def _load_average() -> float:
    with contextlib.suppress(OSError, AttributeError):  # a platform without it: nan
        return float(os.getloadavg()[0])
    return float("nan")


def measure_paired(pairs: Sequence[tuple[Any, Any]], methods: Sequence[PairedMethod], repeats: int = 1,
                   batch_units: int = 0, clock: Callable[[], float] = time.perf_counter,
                   load: Callable[[], float] = _load_average, progress: bool = True) -> pd.DataFrame:
    """Every method on every batch, interleaved, ``repeats`` times; one row per pass. Methods of one engine
    should be adjacent in ``methods``: the reversed order of odd blocks then alternates the engines A B, B A
    (one engine switch per block); start-ups are recorded on the engines (:func:`engine_start_table`) and
    every engine is released at the end."""

    if not pairs:
        raise PairedTimingError("paired §4.4 measurement: no unit to time")
    if repeats < 1:
        raise PairedTimingError(f"paired §4.4 measurement: repeats must be >= 1, got {repeats}")
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise PairedTimingError(f"paired §4.4 measurement: method given twice in {names}")
    size = batch_units or len(pairs)
    batches = [list(pairs[i:i + size]) for i in range(0, len(pairs), size)]
    by_name = {m.name: m for m in methods}
    engines = list({id(m.engine): m.engine for m in methods}.values())
    rows: list[dict[str, Any]] = []
    calls_keys = ("wall_s", "model_s", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens",
                  "cache_hits")
    bar = progress_bar(total=repeats * len(batches) * len(methods), progress=progress, desc="paired §4.4 passes")
    block = 0
    try:
        for r in range(repeats):
            for b, batch in enumerate(batches):
                for pos, name in enumerate(names if block % 2 == 0 else names[::-1]):  # A B C, C B A, ...
                    m = by_name[name]
                    if m.engine.backend is None:  # start-up timed apart; an exclusive engine runs alone
                        for e in engines:
                            if e is not m.engine and (e.exclusive or m.engine.exclusive):
                                e.release()
                    be = MeteredBackend(m.engine.ensure(clock, block), clock)
                    reset = reset_prefix_cache(be)
                    be.calls = []
                    l0 = load()
                    m.run(batch, be)
                    l1 = load()
                    calls = be.calls
                    req = [c["requests"] for c in calls]
                    tot = {k: sum(c[k] for c in calls) for k in calls_keys}
                    tot["computed_prefill_tokens"] = tot["prompt_tokens"] - tot["cached_prompt_tokens"]
                    rows.append({
                        "repeat": r, "batch": b, "block": block, "position": pos, "method": name, "model": m.model,
                        "units": len(batch), "sentences": int(sum(u.n_sentences for _, u in batch)),
                        "chat_calls": len(calls), "requests": int(sum(req)), "max_concurrency": max(req, default=0),
                        "mean_concurrency": float(sum(req) / len(req)) if req else 0.0,
                        "wall_s": float(tot["wall_s"]), "model_s": float(tot["model_s"]),
                        **{k: int(tot[k]) for k in ("prompt_tokens", "cached_prompt_tokens", "computed_prefill_tokens",
                                                    "completion_tokens", "reasoning_tokens", "cache_hits")},
                        "load_before": l0, "load_after": l1, "prefix_cache_reset": reset})
                    bar.update(1)
                block += 1
    finally:
        bar.close()
        for e in engines:
            e.release()
    return pd.DataFrame(rows)


PAIRED_COLUMNS = ["method", "model", "units", "sentences", "repeats", "blocks", "batch_units", "chat_calls",
                  "requests", "mean_concurrency", "max_concurrency", "wall_s_median", "wall_s_min", "wall_s_max",
                  "wall_seconds_per_1k_sent", "model_s_median", "prompt_tokens", "computed_prefill_tokens",
                  "completion_tokens", "reasoning_tokens", "prompt_tokens_per_1k_sent",
                  "computed_prefill_tokens_per_1k_sent", "completion_tokens_per_1k_sent", "cache_hits",
                  "load_avg_mean", "prefix_cache_reset"]


def paired_method_table(passes: pd.DataFrame, batch_units: int = 0) -> pd.DataFrame:
    """Per method: units, calls and concurrency, wall seconds per repeat (median, min, max), tokens."""
    if passes.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    rows = []
    for m, g in passes.groupby("method", sort=False):
        tokens = ("prompt_tokens", "computed_prefill_tokens", "completion_tokens")
        counts = ("units", "chat_calls", "requests", *tokens, "reasoning_tokens")
        per_rep = g.groupby("repeat").agg(**{k: (k, "sum") for k in ("sentences", "wall_s", "model_s", *counts)})
        med = per_rep.median()
        sents = float(med["sentences"])
        per_k = 1000.0 / sents if sents else float("nan")
        rows.append({  # in PAIRED_COLUMNS' order by the frame below
            "method": m, "model": g["model"].iloc[0], "sentences": int(sents), **{k: int(med[k]) for k in counts},
            **{f"{k}_per_1k_sent": float(med[k]) * per_k for k in tokens},
            "repeats": int(g["repeat"].nunique()), "blocks": int(g["block"].nunique()),
            "batch_units": int(batch_units or g["units"].max()),
            "mean_concurrency": float(med["requests"] / med["chat_calls"]) if med["chat_calls"] else 0.0,
            "max_concurrency": int(g["max_concurrency"].max()),
            "wall_s_median": float(med["wall_s"]), "wall_s_min": float(per_rep["wall_s"].min()),
            "wall_s_max": float(per_rep["wall_s"].max()), "wall_seconds_per_1k_sent": float(med["wall_s"]) * per_k,
            "model_s_median": float(med["model_s"]), "cache_hits": int(g["cache_hits"].sum()),
            "load_avg_mean": float(pd.concat([g["load_before"], g["load_after"]]).mean()),
            "prefix_cache_reset": bool(g["prefix_cache_reset"].all()),
        })
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


RATIO_METRICS = {"wall": "wall_s", "model_seconds": "model_s", "computed_prefill_tokens": "computed_prefill_tokens",
                 "prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens"}


def paired_ratio_table(passes: pd.DataFrame) -> pd.DataFrame:
    """The paper's ratios from the paired passes: spread over blocks, pooled, load; the first row is the
    headline (Lite against the teacher); a ratio whose methods did not both run says so in ``note``."""
    rows = []
    for name, (num, den, paper, quantity) in PAIRED_RATIOS.items():
        row: dict[str, Any] = {"ratio": name, "quantity": quantity, "paper (end-to-end seconds)": paper}
        ran = set(passes["method"]) if not passes.empty else set()
        row["note"] = "" if {num, den} <= ran else f"not measured: {', '.join(sorted({num, den} - ran))} did not run"
        if {num, den} <= ran:
            row["numerator_model"] = str(passes.loc[passes["method"] == num, "model"].iloc[0])
            row["denominator_model"] = str(passes.loc[passes["method"] == den, "model"].iloc[0])
            a = passes[passes["method"] == num].set_index("block")
            b = passes[passes["method"] == den].set_index("block")
            blocks = sorted(set(a.index) & set(b.index))
            row["blocks"] = len(blocks)
            for label, col in RATIO_METRICS.items():
                per = [a.loc[k, col] / b.loc[k, col] if b.loc[k, col] else float("nan") for k in blocks]
                row[f"{label}_ratio_median"] = float(statistics.median(per)) if per else float("nan")
                if label in ("wall", "model_seconds"):
                    row[f"{label}_ratio_min"] = float(min(per)) if per else float("nan")
                    row[f"{label}_ratio_max"] = float(max(per)) if per else float("nan")
                    known = [x for x in per if not np.isnan(x)]
                    q75, q25 = np.percentile(known, [75, 25]) if known else (float("nan"),) * 2
                    row[f"{label}_ratio_iqr"] = float(q75) - float(q25)
                den_sum = float(b.loc[blocks, col].sum())
                row[f"{label}_ratio_pooled"] = float(a.loc[blocks, col].sum()) / den_sum if den_sum else float("nan")
            for side, g in (("numerator", a), ("denominator", b)):
                row[f"{side}_mean_concurrency"] = float(g["requests"].sum() / g["chat_calls"].sum()) \
                    if g["chat_calls"].sum() else 0.0
                row[f"{side}_max_concurrency"] = int(g["max_concurrency"].max())
            both = passes[passes["block"].isin(blocks)]
            loads = pd.concat([both["load_before"], both["load_after"]])
            row["load_avg_mean"], row["load_avg_min"], row["load_avg_max"] = \
                float(loads.mean()), float(loads.min()), float(loads.max())
        rows.append(row)
    return pd.DataFrame(rows)


def paired_pairs(profile: str, units: set[tuple[str, str]], max_units: int = 0) -> list[tuple[Any, Any]]:
    """The first ``max_units`` (0 = all) §4.4 units as ``(book, unit)`` pairs of the profile's corpus."""
    want = sorted(units)[:max_units or None]
    return timing_unit_pairs(LitSegConfig.for_profile(profile).corpus, want, profile, PairedTimingError)


def paired_llm(cfg: Any) -> Any:
    """``cfg`` as a paired engine: request cache bypassed, no LoRA (every engine of the measurement plain)."""
    engine = {k: v for k, v in cfg.engine.items() if k not in ("enable_lora", "max_lora_rank", "max_loras")}
    return dataclasses.replace(cfg, use_cache=False, engine=engine, lora_adapter="")


def llm_engine(name: str, cfg: Any, start: Callable[[], Any] | None = None) -> PairedEngine:
    """The engine of LLM config ``cfg`` (vLLM: exclusive, released when another model's engine starts)."""
    return PairedEngine(name, shown_path(cfg.lora_adapter or cfg.model), start or (lambda: make_backend(cfg)),
                        release_backend, exclusive=cfg.backend == "vllm")


def profile_methods(profile: str, pairs: Sequence[tuple[Any, Any]], seed: int = 0,
                    lora_row: bool = True) -> tuple[list[PairedMethod], dict[str, Any]]:
    """The methods as their notebooks configure them, one engine per model: LitSeg on the teacher, Lite on
    its merged weights, LumberChunker (and LitSeg's three stages, when the student is another model or
    configuration) on the student's base model; with ``lora_row`` on vLLM also Lite's requests as LoRA
    requests on the student's engine. Every engine plain (no LoRA) and the request cache bypassed:
    ``(methods, info)``; nothing is started here but the merged weights are written once."""
    lite_cfg = LiteConfig.for_profile(profile, seed=seed)
    teacher_cfg = LitSegConfig.for_profile(profile, seed=seed)
    student, teacher = paired_llm(lite_cfg.llm), paired_llm(teacher_cfg.llm)
    dirs = adapter_dirs(profile)
    adapters, root = [dirs["sft"], dirs["grpo"]], artifact_dir(profile, "lite", "merged")
    # vLLM: merged in the engine's dtype (an 8B model in float32 would be 32 GB); hf: float32, as notebook 03's
    dtype = student.dtype if student.backend == "vllm" and student.dtype in ("bfloat16", "float16") else "float32"
    merged = paired_llm(student.replace(model=str(save_merged_model(student.model, adapters, root, dtype))))
    student_engine = llm_engine("student", student)
    engines = {"teacher": student_engine if teacher == student else llm_engine("teacher", teacher),
               "student": student_engine, "lite": llm_engine("lite", merged)}
    lora_note = "off (lora_row=False)"
    if lora_row and student.backend == "vllm":
        lora_cfg = lite_cfg.llm.replace(use_cache=False)  # the engine notebooks 03 and 07 serve Lite on
        engines["lite-lora"] = llm_engine("student+lora", lora_cfg, lambda: student_backend(lora_cfg, adapters, root)[0])
        lora_note = "Lite's combined adapter as LoRA requests on the student's engine with enable_lora"
    elif lora_row:
        lora_note = f"not measured: the {student.backend} backend serves Lite as merged weights only"
    keys = {(b.book_id, u.unit_id) for b, u in pairs}
    recs = [r for r in load_annotations(profile, "eval") if (r["book_id"], r["unit_id"]) in keys]
    litseg_ref = annotation_length_reference(recs)  # notebook 02's value on these units
    lite_ref = student_length_reference(profile)
    methods = build_methods(engines["teacher"], engines["student"], engines["lite"], teacher_cfg, lite_cfg,
                            BaselinesConfig.for_profile(profile, seed=seed), litseg_ref, lite_ref,
                            lite_lora=engines.get("lite-lora"))
    same = engines["teacher"] is engines["student"]
    info = {"engine": ("one engine per model, started one at a time (vLLM) and timed apart; every engine without "
                       "LoRA and with the request cache bypassed"),
            "teacher": teacher.model, "student": student.model, "lite": merged.model, "lora": lora_note,
            "same_model": same,
            "note": (f"teacher {teacher.model} and student {student.model} are one model and configuration: LitSeg "
                     f"runs once, so the same-weights row is the headline row" if same else
                     f"teacher {teacher.model}, student {student.model}, Lite = the student + adapters merged"),
            "litseg_length_reference": litseg_ref, "lite_length_reference": lite_ref}
    return methods, info


def build_methods(teacher: Any, student: Any, lite: Any, litseg_cfg: Any, lite_cfg: Any, baselines_cfg: Any,
                  litseg_ref: Any, lite_ref: Any, lite_lora: Any = None) -> list[PairedMethod]:
    """LitSeg on ``teacher``; LitSeg's three stages (when ``student`` is another engine) and LumberChunker on
    ``student``; Lite on ``lite`` (and on ``lite_lora``); engines (:class:`PairedEngine`) or backends. The
    methods of one engine are adjacent (engines alternate A B, B A between blocks); nothing is written."""
    teacher_cfg = litseg_cfg.replace(unit_group_size=0)  # the batch is the group
    student_cfg = teacher_cfg.replace(llm=lite_cfg.llm.to_dict())

    def litseg_run(cfg, method):
        def run(batch, be):
            annotate_units(batch, be, cfg, length_reference=litseg_ref, method=method, progress=False,
                           batch_by_book=False)
        return run

    def run_lite(batch, be):
        LiteSegmenter(be, lite_cfg.infer_max_new_tokens, lite_cfg.infer_retries, seed=lite_cfg.seed,
                      length_reference=lite_ref, stage="paired", batch_by_book=False).segment_units(batch)

    def run_lumber(batch, be):
        b = baselines_cfg
        lumber_chunks_batch(batch, be, b.lumber_budget_tokens, b.lumber_max_retries, b.lumber_retry_temperature,
                            b.lumber_max_new_tokens, b.lumber_reference_mode, stage="paired", batch_by_book=False)

    def model(engine):
        return engine.model if isinstance(engine, PairedEngine) else shown_path(str(getattr(engine, "model_id", "?")))

    out = [PairedMethod("litseg", f"{model(teacher)} (teacher: LitSeg's 3 stages)", teacher,
                        litseg_run(teacher_cfg, "litseg"))]
    if student is not teacher:
        out.append(PairedMethod(STUDENT_METHOD, f"{model(student)} (student's base: LitSeg's 3 stages)", student,
                                litseg_run(student_cfg, STUDENT_METHOD)))
    out.append(PairedMethod("lumber", f"{model(student)} (student's base)", student, run_lumber))
    if lite_lora is not None:
        out.append(PairedMethod(LITE_LORA_METHOD, f"{model(lite_lora)} (trained student: LoRA requests)", lite_lora,
                                run_lite))
    out.append(PairedMethod("litseg-lite", f"{model(lite)} (trained student: merged weights)", lite, run_lite))
    return out


def toy_passes(seconds: dict[str, Sequence[float]]) -> pd.DataFrame:
    """Paired passes with only seconds (block ``b`` of method ``m`` took ``seconds[m][b]``; no tokens, one request
    per call, no load): the input of :func:`paired_ratio_table` for a worked example."""
    return pd.DataFrame([{"repeat": b, "batch": 0, "block": b, "position": i, "method": m, "model": "toy", "units": 1,
                          "sentences": 1, "chat_calls": 1, "requests": 1, "max_concurrency": 1, "mean_concurrency": 1.0,
                          "wall_s": float(s), "model_s": float(s), "prompt_tokens": 0, "cached_prompt_tokens": 0,
                          "computed_prefill_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0, "cache_hits": 0,
                          "load_before": 0.0, "load_after": 0.0, "prefix_cache_reset": True}
                         for i, (m, per_block) in enumerate(seconds.items()) for b, s in enumerate(per_block)])
