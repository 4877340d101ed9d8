"""Automatic segment-quality measures (LitSeg paper, Section 4.1 and Table 2) and chunk statistics.

* :func:`boundary_similarities` – for every predicted boundary *inside a unit* (between consecutive
  chunks' main ranges), the cosine similarity of the last sentence before and the first sentence
  after it, embedded with the profile's embedding model (lower = cleaner narrative transition).
  Unit ends are not boundaries a chunker chose, so they are excluded. Overlapping chunks (LitSeg's
  optional overlap) use the sentence pair at the next chunk's start (``from_idx - 1``, ``from_idx``).
  Chunks that are not source spans (propositions) have no sentence boundaries and are skipped.
* :func:`chunk_statistics` – per method: chunks, mean/median/std/min/max length in tokens (the
  LLM tokenizer or whitespace words) and characters, mean sentences per chunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..config import ConfigError, StageConfig


@dataclass(frozen=True)
class SegmentQualityConfig(StageConfig):
    """Notebook 06: which chunkers, how many units the E.3 judge scores, how many chunks to export."""

    chunkers: tuple[str, ...] = ()
    judge_max_units: int = 0  # per method; 0 = all units
    judge_max_chunks_per_unit: int = 12  # units with more chunks are skipped by the judge (reported)
    judge_max_passage_chars: int = 0  # units longer than this are skipped by the judge (0 = no cap)
    judge_retries: int = 2
    judge_methods: tuple[str, ...] = ()  # empty = all
    human_sheet_chunks: int = 100  # per method (Appendix A.1: n = 100)
    human_raters: tuple[str, ...] = ("rater1", "rater2")

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        if profile == "test":
            return {"judge_max_units": 1, "judge_max_chunks_per_unit": 6, "judge_retries": 1,
                    "judge_max_passage_chars": 3000, "human_sheet_chunks": 3, "llm": {"max_new_tokens": 48}}
        if profile == "smoke":
            # a judge call is a ~5.5k-token prompt (~1 min on 2 CPU cores), and SmolLM2 rarely
            # returns a parsable rubric: judge the two LitSeg methods only, without retries
            return {"judge_max_units": 1, "judge_max_chunks_per_unit": 8, "judge_retries": 0,
                    "judge_max_passage_chars": 6000, "human_sheet_chunks": 20,
                    "judge_methods": ("litseg", "litseg-lite"),
                    "corpus": {"datasets": ("gutenqa", "literaryqa"), "max_books": 2}}
        if profile == "full":
            return {}
        raise ConfigError(f"unknown profile {profile!r}")


def boundary_pairs(chunks: Sequence[Any], units: Mapping[tuple[str, str], Any], book_texts: Mapping[str, str]):
    """``(method, book_id, unit_id, left_sentence, right_sentence)`` for every inner boundary."""
    by_unit: dict[tuple[str, str, str], list[Any]] = {}
    for c in chunks:
        if c.is_source_span:
            by_unit.setdefault((c.method, c.book_id, c.unit_id), []).append(c)
    out = []
    for (m, bid, uid), cs in by_unit.items():
        unit = units.get((bid, uid))
        if unit is None:
            raise KeyError(f"{m}: chunk refers to unit {uid!r} of book {bid!r}, which the corpus does not have")
        text = book_texts[bid]
        starts = sorted({c.from_idx for c in cs})
        for s in starts:
            if s <= 1 or s > unit.n_sentences:
                continue
            out.append((m, bid, uid, unit.sentence_text(text, s - 1), unit.sentence_text(text, s)))
    return out


def boundary_similarities(pairs: Sequence[tuple], embedder: Any):
    """DataFrame of pairs with their cosine similarity (embeddings L2-normalised → dot product)."""
    import pandas as pd

    if not pairs:
        return pd.DataFrame(columns=["method", "book_id", "unit_id", "similarity"])
    left = embedder.encode([p[3] for p in pairs], kind="passage")
    right = embedder.encode([p[4] for p in pairs], kind="passage")
    ln = left / np.linalg.norm(left, axis=1, keepdims=True)
    rn = right / np.linalg.norm(right, axis=1, keepdims=True)
    sims = (ln * rn).sum(axis=1)
    return pd.DataFrame({"method": [p[0] for p in pairs], "book_id": [p[1] for p in pairs],
                         "unit_id": [p[2] for p in pairs], "similarity": sims.astype(float)})


def chunk_statistics(chunk_sets: Mapping[str, Sequence[Any]], count_tokens: Callable[[str], int] | None = None):
    """Per-method length statistics of chunk texts (see module docstring)."""
    import pandas as pd

    count = count_tokens or (lambda t: len(t.split()))
    rows = []
    for m, cs in chunk_sets.items():
        toks = np.array([count(c.text) for c in cs], dtype=float)
        chars = np.array([len(c.text) for c in cs], dtype=float)
        sents = np.array([c.to_idx - c.from_idx + 1 for c in cs], dtype=float)
        rows.append({"method": m, "n_chunks": len(cs), "n_books": len({c.book_id for c in cs}),
                     "n_units": len({(c.book_id, c.unit_id) for c in cs}),
                     "tokens_mean": toks.mean(), "tokens_median": float(np.median(toks)), "tokens_std": toks.std(),
                     "tokens_min": toks.min(), "tokens_max": toks.max(), "chars_mean": chars.mean(),
                     "sentences_mean": sents.mean(),
                     "with_context_idx": int(sum(1 for c in cs if c.context_idx))})
    return pd.DataFrame(rows)


def boundary_similarity_table(chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], embedder: Any):
    """Paper Table 2: per dataset and method, mean/sd/count of boundary similarities."""
    units = {(b.book_id, u.unit_id): u for b in books for u in b.units}
    dataset = {b.book_id: b.dataset for b in books}
    pairs = [p for cs in chunk_sets.values() for p in boundary_pairs(cs, units, {b.book_id: b.text for b in books})]
    sims = boundary_similarities(pairs, embedder)
    sims["dataset"] = sims.book_id.map(dataset)
    t2 = sims.groupby(["dataset", "method"]).similarity.agg(["mean", "std", "count"]).reset_index()
    return t2.rename(columns={"mean": "boundary_similarity", "std": "sd", "count": "n_boundaries"})


def judge_chunk_sets(chunk_sets: Mapping[str, Sequence[Any]], books: Sequence[Any], backend: Any,
                     cfg: SegmentQualityConfig, seed: int = 0):
    """The Appendix E.3 rubric judge over each method's units, within the config's caps.

    Returns ``(per_unit, per_method)`` frames; units skipped for size are counted per method.
    """
    import pandas as pd

    from . import rubric_judge

    book_by_id = {b.book_id: b for b in books}
    units = {(b.book_id, u.unit_id): u for b in books for u in b.units}
    rows, skipped = [], {}
    for m, cs in chunk_sets.items():
        if cfg.judge_methods and m not in cfg.judge_methods:
            continue
        by_unit: dict[tuple[str, str], list[Any]] = {}
        for c in cs:
            by_unit.setdefault((c.book_id, c.unit_id), []).append(c)
        done = 0
        for (bid, uid), ucs in sorted(by_unit.items()):
            if cfg.judge_max_units and done >= cfg.judge_max_units:
                break
            passage = units[(bid, uid)].indexed_text(book_by_id[bid].text)
            if len(ucs) > cfg.judge_max_chunks_per_unit or (
                    cfg.judge_max_passage_chars and len(passage) > cfg.judge_max_passage_chars):
                skipped[m] = skipped.get(m, 0) + 1
                continue
            seg_prompt = f"Chunker '{m}' (see the project's notebooks 02-04 for its prompt or algorithm)"
            r = rubric_judge.score_chunks_with_rubric(backend, passage, seg_prompt,
                                                      rubric_judge.segments_json_for_chunks(ucs), len(ucs),
                                                      retries=cfg.judge_retries, seed=seed)
            done += 1
            rows.append({"dataset": book_by_id[bid].dataset, "method": m, "book_id": bid, "unit_id": uid,
                         "n_chunks": len(ucs), **r.dimension_means(), "overall": r.mean, "neutral": r.neutral,
                         "attempts": r.attempts, "improper_overlap": sum(r.improper_overlap)})
    per_unit = pd.DataFrame(rows)
    if per_unit.empty:
        return per_unit, pd.DataFrame(columns=["dataset", "method", "n_units", "overall", "n_neutral", "n_skipped"])
    per_method = per_unit.groupby(["dataset", "method"]).agg(
        n_units=("unit_id", "count"), event_validity=("event_validity", "mean"),
        unity_of_action=("unity_of_action", "mean"), cut_point_logic=("cut_point_logic", "mean"),
        overall=("overall", "mean"), n_neutral=("neutral", "sum"), mean_attempts=("attempts", "mean")).reset_index()
    per_method["n_skipped"] = per_method["method"].map(skipped).fillna(0).astype(int)
    return per_unit, per_method
