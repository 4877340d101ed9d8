"""§4.4 measured side by side: LitSeg, LitSeg-Lite and LumberChunker timed in ONE process, interleaved.

Why. The usage ledgers of notebooks 02, 03 and 04 are written hours apart, each at the load the machine
had then, and with each method's own batching (LitSeg's cross-book unit groups, Lite's one call per book,
LumberChunker book after book); a ratio of their seconds measures the load and the concurrency as much
as the method (a smoke run gave Lite/LitSeg 0.043 on a loaded machine, 0.36 idle). Notebook 08 therefore
measures the paper's two ratios the way a benchmark pairs two commands:

* **same units**: the §4.4 units (:func:`litseg_nb.evaluation.efficiency.timing_units`), the first
  ``EfficiencyConfig.paired_max_units`` of them (0 = all: the paper's LiteraryQA test units in ``full``);
* **same engine**: LitSeg's three stages and LumberChunker run on the student's base model with the
  student's inference configuration (``LiteConfig.llm``: §4.4's "LitSeg-Lite and LumberChunker using the
  same inference configuration"), Lite on the trained student (a LoRA request on that engine with
  vLLM; the merged model folder with hf). The configured teacher is a different model in ``full``
  (one vLLM engine per process: it cannot be interleaved); its ratio stays in the ledger table;
* **same batching**: the units are cut into batches of ``paired_batch_units`` (0 = one batch); for
  each batch every method sends ONE ``chat`` call per stage attempt (LitSeg), per attempt (Lite) or per
  lockstep step (LumberChunker) over all of the batch's still-pending units, across books
  (``batch_by_book=False`` in :func:`litseg_nb.litseg.pipeline.annotate_units`,
  :class:`litseg_nb.lite.segmenter.LiteSegmenter`, :func:`litseg_nb.chunkers.llm_chunkers.lumber_chunks_batch`).
  The concurrency of every call (its number of requests) is recorded: ``max_concurrency``,
  ``mean_concurrency`` per method;
* **interleaved**: for every repeat and batch (a *block*) the methods run one after the other, in
  forward order in even blocks and reversed in odd ones (A B C, C B A, ...), so a drift of the
  machine's load falls on all of them alike; the 1-minute load average is read before and after every
  pass and reported;
* **computed, not cached**: the backends are built with ``use_cache=False`` (a reply served from the
  request cache takes no time), and a backend's prefix cache is emptied before every pass
  (``prefix_cache_reset``) so no pass reuses another's prefixes.

Per block the ratio of the wall seconds (``time.perf_counter`` around every ``chat`` call, summed) is
computed; the tables give its median and spread (min, max, interquartile range) over blocks, the pooled
ratio (sums over all blocks), the model-seconds ratio (the backends' own latencies) and the token ratios
(computed prefill = prompt tokens not served from a prefix cache; prompt tokens; completion tokens) beside
them. The clock and the load reader are parameters (tests use a fake clock).
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import pandas as pd

from ..errors import LitsegError
from ..llm.base import SamplingParams, UsageTag
from ..litseg.config import LitSegConfig
from ..core.artifacts import artifact_dir
from ..core.paths import shown_path
from ..chunkers.config import BaselinesConfig
from ..lite.config import LiteConfig
from ..lite.data import annotation_length_reference, load_annotations, student_length_reference
from .ablation import adapter_dirs
from .efficiency import timing_unit_pairs
from ..lite.train import student_backend
from ..chunkers.llm_chunkers import lumber_chunks_batch
from ..lite.segmenter import LiteSegmenter
from ..litseg.pipeline import annotate_units

#: the paired methods (numerators and denominators of the paper's two ratios)
PAIRED_METHODS = ("litseg", "litseg-lite", "lumber")
#: ratio -> (numerator, denominator, the paper's value)
PAIRED_RATIOS: dict[str, tuple[str, str, float]] = {
    "litseg-lite / litseg": ("litseg-lite", "litseg", 0.37),
    "litseg-lite / lumber": ("litseg-lite", "lumber", 0.70),
}
CACHE_NOTE = "request cache bypassed (use_cache=False): every reply computed in this measurement"


class PairedTimingError(LitsegError, ValueError):
    """The paired measurement cannot run (no unit, a method missing, a unit not in the corpus)."""


@dataclass
class MeteredBackend:
    """A backend proxy that times every ``chat`` call with ``clock`` and records its concurrency
    (the number of requests it carried) and the usage of its generations."""

    inner: Any
    clock: Callable[[], float] = time.perf_counter
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __getattr__(self, item: str) -> Any:  # name, model_id, ledger, tokenizer, structured_output ...
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def chat(self, conversations, params: SamplingParams = SamplingParams(), tag: UsageTag = UsageTag()):
        t0 = self.clock()
        gens = self.inner.chat(conversations, params, tag)
        wall = self.clock() - t0
        self.calls.append({
            "requests": len(conversations), "wall_s": wall,
            "model_s": float(sum(g.latency_s for g in gens)),
            "prompt_tokens": int(sum(g.prompt_tokens for g in gens)),
            "cached_prompt_tokens": int(sum(g.cached_prompt_tokens or 0 for g in gens)),
            "completion_tokens": int(sum(g.completion_tokens for g in gens)),
            "reasoning_tokens": int(sum(g.reasoning_tokens or 0 for g in gens)),
            "cache_hits": int(sum(bool(g.cache_hit) for g in gens)),
        })
        return gens

    def take(self) -> list[dict[str, Any]]:
        out, self.calls = self.calls, []
        return out


@dataclass
class PairedMethod:
    """One method of the measurement: ``run(pairs, backend)`` segments the pairs with ``backend``."""

    name: str
    model: str
    backend: Any
    run: Callable[[Sequence[tuple[Any, Any]], Any], Any]


@dataclass
class PassRecord:
    repeat: int
    batch: int
    block: int
    position: int  # 0-based place of this pass in its block's order
    method: str
    model: str
    units: int
    sentences: int
    chat_calls: int
    requests: int
    max_concurrency: int
    mean_concurrency: float
    wall_s: float
    model_s: float
    prompt_tokens: int
    cached_prompt_tokens: int
    computed_prefill_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cache_hits: int
    load_before: float
    load_after: float
    prefix_cache_reset: bool


def reset_prefix_cache(backend: Any) -> bool:
    """Empty ``backend``'s own prefix cache (hf: :meth:`HFBackend.clear_prefixes`; vLLM:
    ``LLM.reset_prefix_cache``); True when one was emptied."""
    inner = getattr(backend, "inner", backend)
    inner = getattr(inner, "inner", inner)  # a MeteredBackend around a CachedBackend
    clear = getattr(inner, "clear_prefixes", None)
    if callable(clear):
        clear()
        return True
    reset = getattr(getattr(inner, "llm", None), "reset_prefix_cache", None)
    if callable(reset):
        reset()
        return True
    return False


def _load_average() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):  # a platform without it
        return float("nan")


def block_order(methods: Sequence[str], block: int) -> list[str]:
    """Forward order in even blocks, reversed in odd ones (A B C, C B A, ...)."""
    return list(methods) if block % 2 == 0 else list(reversed(methods))


def measure_paired(pairs: Sequence[tuple[Any, Any]], methods: Sequence[PairedMethod], repeats: int = 1,
                   batch_units: int = 0, clock: Callable[[], float] = time.perf_counter,
                   load: Callable[[], float] = _load_average, progress: bool = True) -> pd.DataFrame:
    """Run every method on every batch of ``pairs``, interleaved, ``repeats`` times; one row per pass
    (:class:`PassRecord`). The methods' backends are wrapped in :class:`MeteredBackend` with ``clock``."""
    from tqdm.auto import tqdm

    if not pairs:
        raise PairedTimingError("paired §4.4 measurement: no unit to time")
    if repeats < 1:
        raise PairedTimingError(f"paired §4.4 measurement: repeats must be >= 1, got {repeats}")
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise PairedTimingError(f"paired §4.4 measurement: method given twice in {names}")
    size = batch_units or len(pairs)
    batches = [list(pairs[i:i + size]) for i in range(0, len(pairs), size)]
    metered = {m.name: MeteredBackend(m.backend, clock) for m in methods}
    by_name = {m.name: m for m in methods}
    rows: list[PassRecord] = []
    bar = tqdm(total=repeats * len(batches) * len(methods), desc="paired §4.4 passes", disable=not progress)
    block = 0
    try:
        for r in range(repeats):
            for b, batch in enumerate(batches):
                for pos, name in enumerate(block_order(names, block)):
                    m, be = by_name[name], metered[name]
                    reset = reset_prefix_cache(m.backend)
                    be.take()
                    l0 = load()
                    m.run(batch, be)
                    l1 = load()
                    calls = be.take()
                    req = [c["requests"] for c in calls]
                    tot = {k: sum(c[k] for c in calls) for k in ("wall_s", "model_s", "prompt_tokens",
                                                                   "cached_prompt_tokens", "completion_tokens",
                                                                   "reasoning_tokens", "cache_hits")}
                    rows.append(PassRecord(
                        r, b, block, pos, name, m.model, len(batch), int(sum(u.n_sentences for _, u in batch)),
                        len(calls), int(sum(req)), max(req, default=0),
                        float(sum(req) / len(req)) if req else 0.0, float(tot["wall_s"]), float(tot["model_s"]),
                        int(tot["prompt_tokens"]), int(tot["cached_prompt_tokens"]),
                        int(tot["prompt_tokens"] - tot["cached_prompt_tokens"]), int(tot["completion_tokens"]),
                        int(tot["reasoning_tokens"]), int(tot["cache_hits"]), l0, l1, reset))
                    bar.update(1)
                block += 1
    finally:
        bar.close()
    return pd.DataFrame([asdict(x) for x in rows])


PAIRED_COLUMNS = ["method", "model", "units", "sentences", "repeats", "blocks", "batch_units", "chat_calls",
                  "requests", "mean_concurrency", "max_concurrency", "wall_s_median", "wall_s_min", "wall_s_max",
                  "wall_seconds_per_1k_sent", "model_s_median", "prompt_tokens", "computed_prefill_tokens",
                  "completion_tokens", "reasoning_tokens", "prompt_tokens_per_1k_sent",
                  "computed_prefill_tokens_per_1k_sent", "completion_tokens_per_1k_sent", "cache_hits",
                  "load_avg_mean", "prefix_cache_reset"]


def paired_method_table(passes: pd.DataFrame, batch_units: int = 0) -> pd.DataFrame:
    """Per method: units and sentences of one repeat, calls and concurrency, wall seconds per repeat
    (median, min, max), tokens per repeat (median), load average during its passes."""
    if passes.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    rows = []
    for m, g in passes.groupby("method", sort=False):
        per_rep = g.groupby("repeat").agg(**{k: (k, "sum") for k in (
            "units", "sentences", "chat_calls", "requests", "wall_s", "model_s", "prompt_tokens",
            "computed_prefill_tokens", "completion_tokens", "reasoning_tokens", "cache_hits")})
        med = per_rep.median()
        sents = float(med["sentences"])
        per_k = 1000.0 / sents if sents else float("nan")
        rows.append({
            "method": m, "model": g["model"].iloc[0], "units": int(med["units"]), "sentences": int(sents),
            "repeats": int(g["repeat"].nunique()), "blocks": int(g["block"].nunique()),
            "batch_units": int(batch_units or g["units"].max()), "chat_calls": int(med["chat_calls"]),
            "requests": int(med["requests"]),
            "mean_concurrency": float(med["requests"] / med["chat_calls"]) if med["chat_calls"] else 0.0,
            "max_concurrency": int(g["max_concurrency"].max()),
            "wall_s_median": float(med["wall_s"]), "wall_s_min": float(per_rep["wall_s"].min()),
            "wall_s_max": float(per_rep["wall_s"].max()), "wall_seconds_per_1k_sent": float(med["wall_s"]) * per_k,
            "model_s_median": float(med["model_s"]), "prompt_tokens": int(med["prompt_tokens"]),
            "computed_prefill_tokens": int(med["computed_prefill_tokens"]),
            "completion_tokens": int(med["completion_tokens"]), "reasoning_tokens": int(med["reasoning_tokens"]),
            "prompt_tokens_per_1k_sent": float(med["prompt_tokens"]) * per_k,
            "computed_prefill_tokens_per_1k_sent": float(med["computed_prefill_tokens"]) * per_k,
            "completion_tokens_per_1k_sent": float(med["completion_tokens"]) * per_k,
            "cache_hits": int(g["cache_hits"].sum()),
            "load_avg_mean": float(pd.concat([g["load_before"], g["load_after"]]).mean()),
            "prefix_cache_reset": bool(g["prefix_cache_reset"].all()),
        })
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


RATIO_METRICS = {"wall": "wall_s", "model_seconds": "model_s", "computed_prefill_tokens": "computed_prefill_tokens",
                 "prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens"}


def _quantile(xs: Sequence[float], q: float) -> float:
    s = pd.Series(list(xs), dtype=float).dropna()
    return float(s.quantile(q)) if len(s) else float("nan")


def paired_ratio_table(passes: pd.DataFrame) -> pd.DataFrame:
    """The paper's two ratios from the paired passes: per block (same units, same order position
    balanced) the numerator's total over the denominator's; median, min, max and IQR over blocks, the
    pooled ratio (sums over every block), and the same for model seconds and token counts; the
    concurrency of both sides and the load average during the blocks."""
    rows = []
    for name, (num, den, paper) in PAIRED_RATIOS.items():
        row: dict[str, Any] = {"ratio": name, "paper (end-to-end seconds)": paper}
        have = not passes.empty and {num, den} <= set(passes["method"])
        if have:
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
                    row[f"{label}_ratio_iqr"] = _quantile(per, 0.75) - _quantile(per, 0.25)
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


# ----------------------------------------------------------------------------------- the profile's methods
def paired_pairs(profile: str, units: set[tuple[str, str]], max_units: int = 0) -> list[tuple[Any, Any]]:
    """The §4.4 units as ``(book, unit)`` pairs of the profile's corpus, in (book, unit) order, the first
    ``max_units`` (0 = all). A unit not in the corpus is a :class:`PairedTimingError` naming it
    (:func:`~litseg_nb.evaluation.efficiency.timing_unit_pairs`)."""
    want = sorted(units)[:max_units or None]
    return timing_unit_pairs(LitSegConfig.for_profile(profile).corpus, want, profile, PairedTimingError)


def profile_methods(profile: str, pairs: Sequence[tuple[Any, Any]], seed: int = 0,
                    backend_factory: Callable[[Any], Any] | None = None,
                    lite_backend: Any = None) -> tuple[list[PairedMethod], dict[str, Any]]:
    """The three methods as their notebooks configure them (LitSeg: notebook 02's prompts, retries and
    length reference; Lite: notebook 03's trained student, retries and length reference; LumberChunker:
    notebook 04's budget, retries and caps), on one engine: the student's base model with
    ``LiteConfig.llm`` (``use_cache=False``) for LitSeg and LumberChunker, the trained student (SFT + GRPO
    adapters) for Lite. ``backend_factory(llm_cfg)`` and ``lite_backend`` replace the real backends
    (tests). Returns ``(methods, info)``; ``info`` names the engine and the backends to release."""
    # deferred: tests patch litseg_nb.llm.make_backend (read at call time)
    from ..llm import make_backend

    lite_cfg = LiteConfig.for_profile(profile, seed=seed)
    engine_cfg = lite_cfg.llm.replace(use_cache=False)
    make = backend_factory or (lambda c: make_backend(c))
    base = make(engine_cfg)
    if lite_backend is None:

        dirs = adapter_dirs(profile)
        lite_backend = student_backend(engine_cfg, [dirs["sft"], dirs["grpo"]], artifact_dir(profile, "lite", "merged"))[0]
    keys = {(b.book_id, u.unit_id) for b, u in pairs}
    recs = [r for r in load_annotations(profile, "eval") if (r["book_id"], r["unit_id"]) in keys]
    litseg_ref = annotation_length_reference(recs)  # notebook 02's value on these units
    lite_ref = student_length_reference(profile)
    lcfg = LitSegConfig.for_profile(profile, seed=seed).replace(llm=engine_cfg.to_dict())
    methods = build_methods(base, lite_backend, lcfg, lite_cfg, BaselinesConfig.for_profile(profile, seed=seed),
                            litseg_ref, lite_ref)
    info = {"engine": f"{engine_cfg.backend}:{engine_cfg.model} (LiteConfig.llm, use_cache=False)",
            "teacher": LitSegConfig.for_profile(profile).llm.model, "backends": [base, lite_backend],
            "litseg_length_reference": litseg_ref, "lite_length_reference": lite_ref}
    return methods, info


def build_methods(base: Any, lite_backend: Any, litseg_cfg: Any, lite_cfg: Any, baselines_cfg: Any,
                  litseg_ref: Any, lite_ref: Any) -> list[PairedMethod]:
    """LitSeg (``litseg_cfg``'s stages, retries and token caps; the batch is its unit group) and
    LumberChunker (``baselines_cfg``'s budget, retries and caps) on ``base``, Lite (``lite_cfg``'s
    retries and cap) on ``lite_backend``; every one sends one call per stage attempt / attempt /
    lockstep step over the whole batch (``batch_by_book=False``); nothing is written."""

    lcfg = litseg_cfg.replace(unit_group_size=0)  # the batch is the group
    bcfg = baselines_cfg

    def run_litseg(batch, be):
        annotate_units(batch, be, lcfg, length_reference=litseg_ref, method="litseg", progress=False,
                       batch_by_book=False)

    lite = LiteSegmenter(lite_backend, lite_cfg.infer_max_new_tokens, lite_cfg.infer_retries, seed=lite_cfg.seed,
                         length_reference=lite_ref, stage="paired", batch_by_book=False)

    def run_lite(batch, be):
        lite.backend = be
        lite.segment_units(batch)

    def run_lumber(batch, be):
        lumber_chunks_batch(batch, be, bcfg.lumber_budget_tokens, bcfg.lumber_max_retries,
                            bcfg.lumber_retry_temperature, bcfg.lumber_max_new_tokens, bcfg.lumber_reference_mode,
                            stage="paired", batch_by_book=False)

    base_id = getattr(base, "model_id", "?")
    return [PairedMethod("litseg", f"{base_id} (LitSeg's 3 stages on the student's base model)", base, run_litseg),
            PairedMethod("litseg-lite", f"{shown_path(getattr(lite_backend, 'model_id', '?'))} (trained student)", lite_backend,
                         run_lite),
            PairedMethod("lumber", str(base_id), base, run_lumber)]
