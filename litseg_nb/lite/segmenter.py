"""The LitSeg-Lite chunker and its evaluation (notebook 03).

ONE model call per unit with the Appendix E.2 prompt, then LitSeg's validation, retries, fallbacks and
reconstruction. A segmenter on a trained model refuses that model's training units."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

from ..core import text_overlap
from ..core.artifacts import artifact_path
from ..core.progress import bar
from ..config import Options
from ..corpus import load_corpus
from ..litseg.prompting import reference_for, single_pass_json_schema
from ..litseg.pipeline import assert_units_covered, reconstruct_unit
from ..litseg.validate import (ECHO, ValidationResult, echo_error, extract_json, finalize_segments,
                               segmentation_object, validate_segments)
from ..llm.base import LLMBackend, SamplingParams, UsageTag
from ..llm.replies import read_reply
from ..llm.request_cache import reject_replies
from ..core.schema import Book, Chunk, Unit, save_chunks
from .config import LiteConfig
from .data import (LITE_SYSTEM_TEMPLATE, PAPER_LENGTH_REFERENCE, TrainedUnits, assert_not_trained, lite_conversation,
                   model_record, refuse_trained_chunks, single_pass_target, target_text, view_annotation)
from .train import NarratologicalReward, format_reward_breakdown

METHOD = "litseg-lite"


@dataclass(frozen=True)
class LiteOptions(Options):
    """LitSeg-Lite's options as a registered method: reply cap, retries and seed, from a :class:`LiteConfig`."""

    max_new_tokens: int = 4096
    retries: int = 3
    seed: int = 0

    @classmethod
    def of(cls, cfg: Any) -> "LiteOptions":  # noqa: D102
        return cls(max_new_tokens=cfg.infer_max_new_tokens, retries=cfg.infer_retries, seed=cfg.seed)

    def segmenter(self, backend: LLMBackend) -> "LiteSegmenter":
        return LiteSegmenter(backend, max_new_tokens=self.max_new_tokens, retries=self.retries, seed=self.seed)


def validate_single_pass(text: str, n_sentences: int, max_new_tokens: int | None = None) -> ValidationResult:
    """Validate a single-pass (E.2 or E.4) reply with the shared validator; an over-budget reply is not parsed."""
    got = extract_json(text, max_new_tokens=max_new_tokens)
    holder = segmentation_object(got.obj)
    res = validate_segments(holder, n_sentences)
    if got.obj is None and got.error:  # say why: cut inside reasoning, oversize, empty, not JSON
        res.errors = [got.error]
    elif isinstance(got.obj, dict):  # the earlier steps' text: a copied placeholder answers nothing
        for step, sub in got.obj.items():
            for key, value in (sub.items() if isinstance(sub, dict) and sub is not holder else ()):
                echo = echo_error(f"{step}.{key}", value)
                if echo:
                    res.errors.append(echo)
                    res.schema_fixes.append(f"{step}.{key}: ignored ({ECHO})")
                    res.semantic_ok = False
    return res


@dataclass
class LiteUnitResult:
    """Per-unit record of one Lite run (validation/retry history and the fallback used)."""

    book_id: str
    unit_id: str
    n_sentences: int
    replies: list[str] = field(default_factory=list)
    errors: list[list[str]] = field(default_factory=list)
    first_try_valid: bool = False
    attempts: int = 0
    fallback: str = "none"
    fallback_types: list[str] = field(default_factory=list)
    n_segments: int = 0
    format_reward_first: float = 0.0
    completion_tokens: int = 0
    seconds: float = 0.0  # wall-clock share of this run (a request-cache hit takes ~0 s)
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0  # completion tokens spent in a <think> block
    model_seconds: float = 0.0  # model latency recorded when each reply was computed
    cache_hits: int = 0  # replies served from the persistent request cache
    truncated_in_reasoning: int = 0  # replies cut off inside their <think> block (no answer)
    structured_output: bool = False  # decoding constrained to the E.2 JSON schema

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class LiteSegmenter:
    """Single-pass Lite segmentation with LitSeg's validation, retry, fallback and reconstruction."""

    def __init__(self, backend: LLMBackend, max_new_tokens: int = 4096, retries: int = 3,
                 retry_temperature: float = 0.7, seed: int = 0, method: str = METHOD,
                 system_template: str = LITE_SYSTEM_TEMPLATE,
                 length_reference: int | Mapping[str, int] = PAPER_LENGTH_REFERENCE, trained: TrainedUnits | None = None,
                 stage: str = "single-pass", batch_by_book: bool = True, structured: bool | None = None):
        self.backend, self.max_new_tokens, self.retries = backend, max_new_tokens, retries
        # constrained decoding of the E.2 reply (None = as the backend was built); E.4 prompts never are
        so = getattr(backend, "structured_output", False) if structured is None else bool(structured)
        if so and structured and getattr(backend, "structured_output", True) is False:
            raise ValueError(f"structured output requested but backend {getattr(backend, 'name', '?')} was "
                             "built without it; build it with make_backend(cfg.llm.replace(structured_output=True))")
        self.structured = bool(so) and system_template == LITE_SYSTEM_TEMPLATE
        self.retry_temperature, self.seed, self.method = retry_temperature, seed, method
        self.system_template = system_template  # E.2 by default; the E.4 prompts for ablations
        self.length_reference = (dict(length_reference) if isinstance(length_reference, Mapping)
                                 else int(length_reference))  # one value, or dataset -> value
        self.stage = stage  # usage-ledger stage: "single-pass" is what §4.4 times
        self.batch_by_book = batch_by_book  # False: one chat call per attempt over every book (paired §4.4)
        self.trained = (model_record(getattr(backend, "model_id", "")) or TrainedUnits()).union(trained)

    def segment_units(self, pairs: Sequence[tuple[Book, Unit]], progress: bool = False
                      ) -> tuple[list[Chunk], list[LiteUnitResult]]:
        """Segment every ``(book, unit)``; attempts are batched across the units still invalid."""
        assert_not_trained(pairs, self.trained, f"{self.method} on {getattr(self.backend, 'model_id', '?')}")
        for book, unit in pairs:  # every unit's dataset has a length reference (else: an error naming it)
            reference_for(self.length_reference, book, unit)
        results = [LiteUnitResult(b.book_id, u.unit_id, u.n_sentences) for b, u in pairs]
        last: list[ValidationResult | None] = [None] * len(pairs)
        todo = list(range(len(pairs)))
        for attempt in bar(range(self.retries + 1), progress=progress, desc="litseg-lite attempts"):
            if not todo:
                break
            params = SamplingParams(max_new_tokens=self.max_new_tokens,
                                    temperature=0.0 if attempt == 0 else self.retry_temperature,
                                    seed=self.seed + attempt)
            schemas = {i: single_pass_json_schema(self.max_new_tokens, pairs[i][1].n_sentences) for i in todo} \
                if self.structured else {}
            t0 = time.perf_counter()
            by_book: dict[str, list[int]] = {}
            for i in todo:  # one call per unit, batched per book (usage tags carry the book)
                by_book.setdefault(pairs[i][0].book_id if self.batch_by_book else "", []).append(i)
            got: dict[int, Any] = {}
            convs_of: dict[int, Any] = {}
            for book_id, idx in by_book.items():
                tag = UsageTag(method=self.method, book=book_id, stage=self.stage)
                convs = [lite_conversation(*pairs[i], self.system_template, self.length_reference) for i in idx]
                call = replace(params, json_schemas=tuple(schemas[i] for i in idx)) if schemas else params
                got.update(zip(idx, self.backend.chat(convs, call, tag)))
                convs_of.update(zip(idx, convs))
            dt = (time.perf_counter() - t0) / max(1, len(todo))
            still = []
            for i, gen in ((i, got[i]) for i in todo):
                r = results[i]
                res = validate_single_pass(gen.text, r.n_sentences, self.max_new_tokens)
                r.replies.append(gen.text)
                r.errors.append(list(res.errors))
                r.attempts += 1
                r.completion_tokens += gen.completion_tokens
                r.prompt_tokens += gen.prompt_tokens
                r.cached_prompt_tokens += gen.cached_prompt_tokens or 0
                r.reasoning_tokens += gen.reasoning_tokens
                r.model_seconds += gen.latency_s
                r.cache_hits += int(gen.cache_hit)
                r.truncated_in_reasoning += int(read_reply(gen.text).truncated_in_reasoning)
                r.seconds += dt
                if attempt == 0:
                    r.first_try_valid = res.ok
                    r.format_reward_first = format_reward_breakdown(gen.text, r.n_sentences,
                                                                    self.max_new_tokens)["total"]
                if last[i] is None or res.syntax_ok or not last[i].syntax_ok:
                    last[i] = res
                if not res.ok:
                    still.append(i)
            # invalid replies leave the request cache (a rerun asks again); this run keeps them
            reject_replies(self.backend, [convs_of[i] for i in still],
                           replace(params, json_schemas=tuple(schemas[i] for i in still)) if schemas else params)
            todo = still
        chunks: list[Chunk] = []
        for (book, unit), r, res in zip(pairs, results, last):
            final = finalize_segments(res, unit.n_sentences)
            r.fallback, r.fallback_types, r.n_segments = final.fallback, list(final.fallback_types), len(final.segments)
            r.structured_output = self.structured
            chunks.extend(reconstruct_unit(book, unit, final.segments, self.method,
                                           {"fallback": final.fallback, "attempts": r.attempts,
                                            "structured_output": self.structured}))
        return chunks, results


def check_and_save_chunks(profile: str, books: Sequence[Book], chunks: Sequence[Chunk],
                          name: str = METHOD):
    """Coverage proof, then ``artifacts/chunks/<name>.jsonl``; refuses units any student of ``profile`` saw."""
    refuse_trained_chunks(name, chunks, profile, books)
    assert_units_covered(books, chunks, name)
    path = artifact_path(profile, "chunks", f"{name}.jsonl")
    save_chunks(path, list(chunks))
    return path


def results_frame(results: Sequence[LiteUnitResult]):
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in r.to_json().items() if k not in ("replies", "errors")}
                         for r in results])


# --------------------------------------------------------------------------- evaluation (notebook 03)
def _book_names(b: Book) -> set[str]:
    return {b.book_id, b.book_id.split(":", 1)[-1].lower(), b.title.strip().lower(),
            str(b.meta.get("gutenqa_name") or b.title).strip().lower()}


def load_lite_books(cfg: LiteConfig) -> tuple[list[Book], list[Book]]:
    """``(evaluation_books, training_books)`` as notebook 02 indexed them; a shared book is an error."""
    lit = cfg.teacher()
    evaluated = load_corpus(lit.corpus)
    training = load_corpus(lit.train_corpus)
    check_books_disjoint(training, evaluated)
    return evaluated, training


def check_books_disjoint(training: Sequence[Book], evaluated: Sequence[Book]) -> None:
    """A training book that is an evaluated one, by name or by most of its text (another name, another edition:
    :mod:`~litseg_nb.core.text_overlap`), is an error naming both."""
    names = set().union(*(_book_names(b) for b in evaluated)) if evaluated else set()
    shared = [b.book_id for b in training if _book_names(b) & names]
    if not shared:
        same = text_overlap.overlapping({b.book_id: text_overlap.fingerprint(b.text) for b in training},
                                        {b.book_id: text_overlap.fingerprint(b.text) for b in evaluated})
        shared = [f"{a} (shares {x:.0%} of its text with {b})" for a, b, x in same]
    if shared:
        raise ValueError(f"Lite training book(s) {shared} are also evaluated (LitSegConfig.corpus); "
                         "the training corpus must hold other books")


def evaluation_pairs(records: Sequence[Mapping[str, Any]], books: Sequence[Book],
                     max_units: int = 0) -> list[tuple[Book, Unit]]:
    """The annotated (``annotations.jsonl``) units, in record order, first ``max_units`` (0 = all)."""
    by_id = {b.book_id: b for b in books}
    pairs = []
    for r in records:
        if r["book_id"] not in by_id:
            raise ValueError(f"annotation of unknown book {r['book_id']!r} (corpus settings changed since notebook 02?)")
        pairs.append((by_id[r["book_id"]], by_id[r["book_id"]].unit(r["unit_id"])))
    return pairs[:max_units] if max_units else pairs


def score_reply(text: str, book: Book, unit: Unit, judge: NarratologicalReward | None, weights: Sequence[float],
                length_reference: int | Mapping[str, int]) -> dict[str, float]:
    conv = lite_conversation(book, unit, length_reference=length_reference)
    n, passage, system_prompt = unit.n_sentences, conv[1]["content"].split("\n", 1)[-1], conv[0]["content"]
    fmt = format_reward_breakdown(text, n)["total"]
    narr = judge.score_one(text, passage, system_prompt, n) if judge is not None else float("nan")
    return {"format_reward": fmt, "narratological_reward": narr,
            "reward": weights[0] * fmt + weights[1] * narr if judge is not None else float("nan")}


def rows_from_results(system: str, pairs: Sequence[tuple[Book, Unit]], results: Sequence[LiteUnitResult],
                      judge: NarratologicalReward | None, weights: Sequence[float],
                      length_reference: int | Mapping[str, int] = 100) -> list[dict[str, Any]]:
    """Per-unit rows of a finished Lite run; the FIRST reply is scored with the GRPO reward."""
    rows = []
    for (book, unit), r in zip(pairs, results):
        sc = score_reply(r.replies[0], book, unit, judge, weights, length_reference)
        rows.append({"system": system, "book_id": book.book_id, "unit_id": unit.unit_id,
                     "first_try_valid": r.first_try_valid, "fallback": r.fallback,
                     "segments": r.n_segments, "attempts": r.attempts,
                     "completion_tokens": r.completion_tokens, **sc})
    return rows


def teacher_rows(records: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[Book, Unit]],
                 judge: NarratologicalReward | None, weights: Sequence[float],
                 length_reference: int | Mapping[str, int] = 100) -> list[dict[str, Any]]:
    """The teacher (LitSeg) on the same units (``pairs`` of :func:`evaluation_pairs`), from its records, scored in
    the single-pass schema."""
    by_key = {(r["book_id"], r["unit_id"]): r for r in records}
    rows = []
    for book, unit in pairs:
        rec = by_key[(book.book_id, unit.unit_id)]
        view = view_annotation(rec)
        text = target_text(single_pass_target(view, unit.title))
        sc = score_reply(text, book, unit, judge, weights, length_reference)
        ftv = rec.get("first_try_valid") or {}
        rows.append({"system": "teacher (LitSeg)", "book_id": book.book_id, "unit_id": unit.unit_id,
                     "first_try_valid": bool(ftv) and all(ftv.values()), "fallback": rec.get("fallback"),
                     "segments": len(rec["segments"]), "attempts": (rec.get("tokens") or {}).get("calls"),
                     "completion_tokens": (rec.get("tokens") or {}).get("completion"), **sc})
    return rows


def before_after_table(rows: Sequence[Mapping[str, Any]]):
    """One row per system: units, first-try validity, fallback rate, rewards, segments/unit."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        return df
    g = df.groupby("system", sort=False)
    return pd.DataFrame({
        "units": g.size(),
        "first-try validity": g["first_try_valid"].mean(),
        "fallback rate": g["fallback"].apply(lambda s: float((s != "none").mean())),
        "format reward": g["format_reward"].mean(),
        "narratological reward": g["narratological_reward"].mean(),
        "mean reward": g["reward"].mean(),
        "segments/unit": g["segments"].mean(),
        "completion tokens/unit": g["completion_tokens"].mean(),
    }).reset_index()


def segmentation_view(book: Book, unit: Unit, segments: Sequence[Mapping[str, Any]], who: str,
                      max_chars: int = 160):
    import pandas as pd

    rows = []
    for s in segments:
        lo, hi = int(s["from_idx"]), int(s["to_idx"])
        start, end = unit.sentences[lo - 1].start, unit.sentences[hi - 1].end
        txt = book.text[start:end].replace("\n", " ")
        rows.append({"by": who, "subtitle": s.get("subtitle") or "", "from_idx": lo, "to_idx": hi,
                     "context_idx": list(s.get("context_idx") or []),
                     "main text": txt[:max_chars] + ("…" if len(txt) > max_chars else "")})
    return pd.DataFrame(rows)


def plot_training_curves(sft_log, grpo_log):
    """Figure: a panel per logged quantity (SFT loss, GRPO loss, GRPO reward components, GRPO KL), per step;
    a quantity that was not logged (KL with beta = 0, or every step skipped) gets no panel, and a run of one
    step shows its values written next to the points."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    def series(log, cols):
        if log is None or "step" not in log:
            return {}
        return {label: log[["step", col]].dropna() for col, label in cols
                if col in log and log[col].notna().any()}

    panels = [(title, s) for title, s in (
        ("SFT loss (completion tokens)", series(sft_log, [("loss", "SFT loss")])),
        ("GRPO (DAPO) loss", series(grpo_log, [("loss", "GRPO loss")])),
        ("GRPO rewards (mean over rollouts)", series(grpo_log, [
            ("rewards/format_reward/mean", "format"), ("rewards/narratological_reward/mean", "narratological"),
            ("reward", "weighted sum")])),
        ("GRPO KL to the SFT policy", series(grpo_log, [("kl", "KL")]))) if s]
    if not panels:
        raise ValueError("plot_training_curves: neither log has a value to draw")
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels):
        for label, frame in lines.items():
            x, y = frame.iloc[:, 0], frame.iloc[:, 1]
            ax.plot(x, y, marker="o", label=label)
            if len(frame) == 1:  # one step: the value itself is what there is to read
                ax.annotate(f"{label}: {y.iloc[0]:.3g}", (x.iloc[0], y.iloc[0]), textcoords="offset points",
                            xytext=(6, 6 + 12 * list(lines).index(label)), fontsize=8)
        if len(lines) > 1 and max(len(f) for f in lines.values()) > 1:
            ax.legend(fontsize=8)
        steps = sorted({int(v) for f in lines.values() for v in f.iloc[:, 0]})
        if len(steps) <= 10:
            ax.set_xticks(steps)
            ax.set_xlim(steps[0] - 0.5, steps[-1] + 0.5)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(title=title, xlabel="step")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
