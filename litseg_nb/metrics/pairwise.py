"""Pairwise preference between two systems' answers by an LLM judge applying Appendix B.2.

The judge sees the B.2 guideline as system prompt and our ``judge/pairwise_user`` template (context,
question, reference answer, responses A and B, a fixed ``Verdict: A|B|Tie`` line). To cancel
position bias, which system is shown as A alternates with a seeded coin per question. Unparseable
verdicts are retried a bounded number of times, then counted as ``invalid`` and left out of the win
rate (reported). :func:`pairwise_win_rate` follows the paper (B.2): win 1, tie 0.5, loss 0, averaged
over annotators per instance, then over instances — for LLM and human verdicts alike.
"""
from __future__ import annotations

import random
import re
from typing import Any, Sequence

from ..llm.base import SamplingParams, UsageTag
from ..replies import answer_text

_VERDICT = re.compile(r"verdict\s*+[:\-]?\s*+\**+\s*+(tie|a|b)\b", re.I)  # possessive: linear


def parse_verdict(text: str) -> str | None:
    """``"A"``, ``"B"``, ``"Tie"`` from the last ``Verdict:`` line of the reply's answer (reasoning
    blocks removed by :func:`litseg_nb.replies.answer_text`), else None."""
    found = _VERDICT.findall(answer_text(text))
    if not found:
        return None
    v = found[-1].lower()
    return "Tie" if v == "tie" else v.upper()


def pairwise_conversation(context: str, question: str, reference: str, answer_a: str, answer_b: str):
    from ..prompts import load_prompt, render_prompt

    return [{"role": "system", "content": load_prompt("judge/pairwise_b2_guideline")},
            {"role": "user", "content": render_prompt("judge/pairwise_user", context=context, question=question,
                                                      reference=reference, answer_a=answer_a or "(empty)",
                                                      answer_b=answer_b or "(empty)")}]


def judge_pairs(backend: Any, items: Sequence[dict[str, Any]], max_new_tokens: int = 96, retries: int = 1,
                seed: int = 0, tag: UsageTag = UsageTag(stage="pairwise-judge")) -> list[dict[str, Any]]:
    """``items``: dicts with context, question, reference, target_answer, other_answer, qid.

    Returns per item ``{"qid", "verdict": win|tie|loss|invalid, "target_shown_as", "raw"}`` (for the
    target system).
    """
    rng = random.Random(seed)
    shown = ["A" if rng.random() < 0.5 else "B" for _ in items]
    convs = []
    for it, pos in zip(items, shown):
        a, b = (it["target_answer"], it["other_answer"]) if pos == "A" else (it["other_answer"], it["target_answer"])
        convs.append(pairwise_conversation(it["context"], it["question"], it["reference"], a, b))
    results: list[dict[str, Any]] = [{"qid": it.get("qid"), "verdict": "invalid", "target_shown_as": pos, "raw": ""}
                                     for it, pos in zip(items, shown)]
    todo = list(range(len(items)))
    for attempt in range(retries + 1):
        if not todo:
            break
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0 if attempt == 0 else 0.7,
                                seed=seed + attempt)
        gens = backend.chat([convs[i] for i in todo], params, tag)
        left = []
        for i, g in zip(todo, gens):
            v = parse_verdict(g.text)
            results[i]["raw"] = g.text
            if v is None:
                left.append(i)
            elif v == "Tie":
                results[i]["verdict"] = "tie"
            else:
                results[i]["verdict"] = "win" if v == shown[i] else "loss"
        todo = left
    return results


VERDICT_POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def pairwise_win_rate(verdicts: Sequence[Sequence[str]]) -> dict[str, float]:
    """Win rate of system X over Y from per-instance, per-annotator verdicts ``win``/``tie``/``loss``.

    B.2: a win gives 1 point, a tie 0.5 to each side; B.1: per instance the annotators' points are
    averaged, then instances are averaged. Also returns the win/tie/loss frequencies.
    """
    if not verdicts:
        raise ValueError("no verdicts")
    per_instance, counts = [], {"win": 0, "tie": 0, "loss": 0}
    for i, inst in enumerate(verdicts):
        inst = [inst] if isinstance(inst, str) else list(inst)
        if not inst:
            raise ValueError(f"instance {i} has no verdicts")
        pts = []
        for v in inst:
            key = str(v).strip().lower()
            if key not in VERDICT_POINTS:
                raise ValueError(f"instance {i}: verdict {v!r} is not win/tie/loss")
            counts[key] += 1
            pts.append(VERDICT_POINTS[key])
        per_instance.append(sum(pts) / len(pts))
    total = sum(counts.values())
    return {"win_rate": sum(per_instance) / len(per_instance), "n_instances": float(len(verdicts)),
            **{f"{k}_frac": v / total for k, v in counts.items()}}
