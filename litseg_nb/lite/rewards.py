"""GRPO rewards for LitSeg-Lite: a rule-based format reward and the narratological (E.3) reward.

The final reward is the weighted sum ``w_format * format_reward + w_judge * narratological_reward``
(Section 3.2); trl's ``GRPOTrainer`` applies the weights (``reward_weights``) and logs every
component separately (``rewards/format_reward/mean``, ``rewards/narratological_reward/mean``).

**Format reward** — partial credit by rule (:data:`FORMAT_RULES`, shown as a table in notebook 03).
Each rule scores in [0, 1]; the reward is the weighted sum (weights sum to 1). An unparsable reply
scores 0 on every rule. Overlapping main ranges are *allowed* by LitSeg (shared boundary sentences),
so they cost nothing.

**Narratological reward** — the Appendix E.3 rubric judge (:mod:`litseg_nb.litseg.rubric_judge`)
scores every predicted chunk on Event Validity, Unity of Action and Cut Point Logic (the latter with
the rubric's +/-0.5 overlap rule); scores are averaged over dimensions, then over chunks, and mapped
from the rubric's 1-5 scale to ``(mean - 1) / 4`` (so 0 = all ones, 1 = all fives; the overlap bonus
can reach 1.125). A reply without any usable segment cannot be judged and gets 0 (counted as
``unscorable``). Malformed judge output gets bounded retries, then the neutral 3.0 (reward 0.5),
counted as ``neutral``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..litseg.validate import (coverage_mask, nested_ranges, parse_json_reply, segmentation_object,
                               validate_segments)
from ..llm.base import LLMBackend, UsageTag
from ..llm.replies import read_reply
from ..litseg.rubric_judge import (pipeline_analysis, score_chunks_with_rubric, segment_pipeline_json,
                                   segment_texts_from_passage)


def completion_text(completion: Any) -> str:
    """The assistant text of a trl completion (plain string or conversational message list)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


# --------------------------------------------------------------------------- format reward
@dataclass(frozen=True)
class FormatRule:
    name: str
    weight: float
    credit: str  # how partial credit is given


FORMAT_RULES: tuple[FormatRule, ...] = (
    FormatRule("parses", 0.15, "1 if the reply contains a JSON object with a top-level step1/step2/"
               "step3/segments key, else 0 (and 0 for every rule; a truncated reply whose only "
               "complete object is a nested one does not count)"),
    FormatRule("schema", 0.15, "share of the 5 required fields present with the right type: "
               "step1.step_1_events (str), step2.step_2_threads (str), step3.chapter_title (str), "
               "step3.step_3_turning_points (list), step3.segments (non-empty list of objects)"),
    FormatRule("indices_valid", 0.20, "share of segment entries valid by the shared validator's "
               "per-segment checks: an object with a string subtitle, JSON integers "
               "1 <= from_idx <= to_idx <= n, context_idx absent/null or JSON integers in 1..n, "
               "main range not inside another entry's (no duplicates)"),
    FormatRule("full_coverage", 0.30, "share of the unit's n sentences inside some valid main range "
               "(overlaps allowed, context-only sentences do not count)"),
    FormatRule("first_last", 0.20, "0.5 if the first readable segment starts at 1, plus 0.5 if the "
               "last one ends at n"),
)
assert abs(sum(r.weight for r in FORMAT_RULES) - 1.0) < 1e-9
TOP_KEYS = {"step1", "step2", "step3", "segments"}


def format_rules_table():
    """The rule table as a DataFrame (for notebook 03)."""
    import pandas as pd

    return pd.DataFrame([{"rule": r.name, "weight": r.weight, "partial credit": r.credit}
                         for r in FORMAT_RULES])


def format_reward_breakdown(text: str, n_sentences: int, max_new_tokens: int | None = None) -> dict[str, float]:
    """Per-rule credit in [0, 1] for one reply, plus ``total`` (the weighted sum) and ``valid``.

    The reply is read by :mod:`litseg_nb.llm.replies` (reasoning blocks removed; with ``max_new_tokens``
    a reply longer than that budget allows scores 0) and its segments by the shared validator's
    per-segment checks (:func:`~litseg_nb.litseg.validate.read_segments`), so the reward and
    LitSeg-Lite's validation agree on what a valid segment is. ``valid`` (1.0/0.0, not weighted)
    is the shared validator's verdict on the whole segmentation. Never raises.
    """
    zero = {r.name: 0.0 for r in FORMAT_RULES}
    obj = parse_json_reply(text, max_new_tokens=max_new_tokens) if isinstance(text, str) and text else None
    if not isinstance(obj, dict) or not TOP_KEYS & set(obj):
        return {**zero, "total": 0.0, "valid": 0.0}
    credit = dict(zero, parses=1.0)
    s1, s2, s3 = obj.get("step1"), obj.get("step2"), obj.get("step3")
    s3 = s3 if isinstance(s3, dict) else {}
    holder = segmentation_object(obj)
    segs = holder.get("segments") if isinstance(holder, dict) else None
    segs_ok = isinstance(segs, list) and bool(segs) and all(isinstance(s, dict) for s in segs)
    checks = [
        isinstance(s1, dict) and isinstance(s1.get("step_1_events"), str),
        isinstance(s2, dict) and isinstance(s2.get("step_2_threads"), str),
        isinstance(s3.get("chapter_title"), str),
        isinstance(s3.get("step_3_turning_points"), list),
        segs_ok,
    ]
    credit["schema"] = sum(checks) / len(checks)
    n = int(n_sentences)
    res = validate_segments(holder, n) if n >= 1 else None
    if res is not None and isinstance(segs, list) and segs:
        credit["indices_valid"] = sum(res.item_ok) / len(segs)
        covered = coverage_mask([s for s in res.segments if 1 <= s.from_idx <= s.to_idx <= n], n)
        credit["full_coverage"] = sum(covered[1:n + 1]) / n
        if res.segments:
            credit["first_last"] = 0.5 * (res.segments[0].from_idx == 1) + 0.5 * (res.segments[-1].to_idx == n)
    credit["total"] = sum(r.weight * credit[r.name] for r in FORMAT_RULES)
    credit["valid"] = float(res is not None and res.ok)
    return credit


def format_reward(completions: Sequence[Any], n_sentences: Sequence[int], **_: Any) -> list[float]:
    """trl reward function: the rule-based format reward of every completion."""
    return [format_reward_breakdown(completion_text(c), int(n))["total"]
            for c, n in zip(completions, n_sentences)]


# --------------------------------------------------------------------------- narratological reward
def judgeable_segments(text: str, n_sentences: int, max_new_tokens: int | None = None) -> list[dict[str, Any]]:
    """The segments of a reply the judge scores, as the shared validator reads them.

    Every read segment with a valid main range inside ``1..n`` that is not inside another one's
    range (duplicates and nested ranges are judged once), context indices outside ``1..n``
    dropped (context inside its own range is kept: the rubric penalises it). For a reply the
    validator accepts this is exactly its segments. Never raises.
    """
    obj = parse_json_reply(text, max_new_tokens=max_new_tokens) if isinstance(text, str) and text else None
    if not isinstance(obj, dict) or n_sentences < 1:
        return []
    res = validate_segments(segmentation_object(obj), n_sentences)
    n = n_sentences
    keep = [i for i, s in enumerate(res.segments) if 1 <= s.from_idx <= s.to_idx <= n]
    nested = {i for i, _ in nested_ranges(res.segments, keep)}
    out = []
    for i in keep:
        if i in nested:
            continue
        s = res.segments[i]
        out.append({"subtitle": s.subtitle, "from_idx": s.from_idx, "to_idx": s.to_idx,
                    "context_idx": [c for c in s.context_idx if 1 <= c <= n]})
    return out


def rubric_to_reward(mean_score: float) -> float:
    """Map a rubric mean on the 1-5 scale to the reward scale (1 -> 0, 5 -> 1)."""
    return (mean_score - 1.0) / 4.0


@dataclass
class JudgeStats:
    completions: int = 0
    unscorable: int = 0  # no usable segment: reward 0, judge not called
    truncated_in_reasoning: int = 0  # of the unscorable: cut off inside a <think> block (no answer)
    judged: int = 0
    neutral: int = 0  # judge failed after bounded retries: neutral score used
    judge_calls: int = 0
    dimension_sums: dict[str, float] = field(default_factory=lambda: {
        "event_validity": 0.0, "unity_of_action": 0.0, "cut_point_logic": 0.0})

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "dimension_sums"}
        for k, v in self.dimension_sums.items():
            d[f"mean_{k}"] = v / self.judged if self.judged else float("nan")
        d["neutral_rate"] = self.neutral / self.judged if self.judged else float("nan")
        return d


class NarratologicalReward:
    """trl reward function backed by the E.3 rubric judge (any backend of the LLM layer).

    Reads the dataset columns ``passage`` (the sentence-indexed unit), ``system_prompt`` (the Lite
    prompt the student saw, given to the judge as the "Segment Pipeline Prompt") and ``n_sentences``.
    """

    __name__ = "narratological_reward"

    def __init__(self, judge: LLMBackend, retries: int = 2, max_new_tokens: int | None = None,
                 seed: int = 0):
        self.judge, self.retries, self.max_new_tokens, self.seed = judge, retries, max_new_tokens, seed
        self.stats = JudgeStats()
        self.log: list[dict[str, Any]] = []  # one row per completion

    def score_one(self, text: str, passage: str, system_prompt: str, n_sentences: int) -> float:
        self.stats.completions += 1
        segs = judgeable_segments(text, n_sentences)
        if not segs:
            self.stats.unscorable += 1
            self.stats.truncated_in_reasoning += int(read_reply(text).truncated_in_reasoning)
            self.log.append({"judged": False, "neutral": False, "reward": 0.0, "n_chunks": 0})
            return 0.0
        # E.3's Segment Pipeline: the student's output (its analysis and segments, each with its text)
        pipeline = segment_pipeline_json(segs, texts=segment_texts_from_passage(passage, segs),
                                         analysis=pipeline_analysis(parse_json_reply(text)))
        res = score_chunks_with_rubric(
            self.judge, passage, system_prompt, pipeline,
            n_chunks=len(segs), retries=self.retries, max_new_tokens=self.max_new_tokens,
            tag=UsageTag(method="litseg-lite", stage="grpo-judge"), seed=self.seed)
        self.stats.judged += 1
        self.stats.judge_calls += res.attempts
        self.stats.neutral += int(res.neutral)
        for k, v in res.dimension_means().items():
            self.stats.dimension_sums[k] += v
        reward = rubric_to_reward(res.mean)
        self.log.append({"judged": True, "neutral": res.neutral, "reward": reward,
                         "n_chunks": len(segs), "attempts": res.attempts, **res.dimension_means()})
        return reward

    def __call__(self, completions: Sequence[Any], passage: Sequence[str], system_prompt: Sequence[str],
                 n_sentences: Sequence[int], **_: Any) -> list[float]:
        return [self.score_one(completion_text(c), p, sp, int(n))
                for c, p, sp, n in zip(completions, passage, system_prompt, n_sentences)]


def build_reward_funcs(judge: LLMBackend, retries: int = 2, max_new_tokens: int | None = None,
                       seed: int = 0) -> tuple[list[Callable[..., list[float]]], NarratologicalReward]:
    """``[format_reward, narratological_reward]`` in the order of ``LiteConfig.reward_weights``."""
    narr = NarratologicalReward(judge, retries=retries, max_new_tokens=max_new_tokens, seed=seed)
    return [format_reward, narr], narr
