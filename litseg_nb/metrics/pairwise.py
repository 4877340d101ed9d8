"""Pairwise preference between two systems' answers by an LLM judge applying Appendix B.2."""
from __future__ import annotations

import random
import re
from itertools import zip_longest
from typing import Any, Sequence

from ..llm.base import SamplingParams, UsageTag
from ..llm.replies import answer_text
from ..core.prompts import load_prompt, render_prompt

_VERDICT = re.compile(r"verdict\s*+[:\-]?\s*+\**+\s*+(tie|a|b)\b", re.I)  # possessive: linear


def parse_verdict(text: str) -> str | None:
    """``"A"``, ``"B"``, ``"Tie"`` from the last ``Verdict:`` line of the reply's answer (reasoning
    blocks removed by :func:`litseg_nb.llm.replies.answer_text`), else None."""
    found = _VERDICT.findall(answer_text(text))
    if not found:
        return None
    v = found[-1].lower()
    return "Tie" if v == "tie" else v.upper()


def pairwise_conversation(context: str, question: str, reference: str, answer_a: str, answer_b: str):
    return [{"role": "system", "content": load_prompt("judge/pairwise_b2_guideline")},
            {"role": "user", "content": render_prompt("judge/pairwise_user", context=context, question=question,
                                                      reference=reference, answer_a=answer_a or "(empty)",
                                                      answer_b=answer_b or "(empty)")}]


def judge_pairs(backend: Any, items: Sequence[dict[str, Any]], max_new_tokens: int = 96, retries: int = 1,
                seed: int = 0, tag: UsageTag = UsageTag(stage="pairwise-judge")) -> list[dict[str, Any]]:
    """Per item (context, question, reference, target_answer, other_answer, qid): ``{"qid", "verdict":
    win|tie|loss|invalid, "target_shown_as", "raw"}`` for the target system."""
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
        for i, g in zip(todo, gens):
            v = parse_verdict(g.text)
            results[i]["raw"] = g.text
            if v is not None:
                results[i]["verdict"] = "tie" if v == "Tie" else "win" if v == shown[i] else "loss"
        todo = [i for i in todo if results[i]["verdict"] == "invalid"]
    return results


VERDICT_POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def pairwise_win_rate(verdicts: Sequence[Sequence[str]]) -> dict[str, float]:
    """Win rate of X over Y from per-instance, per-annotator verdicts (B.2: win 1, tie 0.5, loss 0; B.1:
    averaged over annotators, then instances), with the win/tie/loss frequencies."""
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


BOOK_POLICIES = ("whole book", "chapters holding either system's chunks", "either system's chunks")
CHAT_MARGIN_TOKENS = 64  # chat-template tokens around the two messages (upper bound)


def judge_context_budget(count_tokens: Any, max_model_len: int, max_new_tokens: int, question: str,
                         reference: str, answer_a: str, answer_b: str) -> int:
    """Tokens left for the Original Context: the judge's context length minus the guideline, the
    question, the reference, both answers, the reply and a chat-template margin."""
    conv = pairwise_conversation("", question, reference, answer_a, answer_b)
    used = sum(count_tokens(m["content"]) for m in conv) + CHAT_MARGIN_TOKENS + max_new_tokens
    return max(0, int(max_model_len) - used)


def book_judge_context(book: Any, units_a: Sequence[str], units_b: Sequence[str], chunks_a: Sequence[str],
                       chunks_b: Sequence[str], count_tokens: Any, budget: int) -> tuple[str, str]:
    """The Original Context of a LiteraryQA pair (§4.2, B.1) and its policy: the ``whole book`` when it fits
    ``budget`` tokens, else the ``chapters holding either system's chunks`` (ranking order interleaved while they fit,
    printed in book order), else ``either system's chunks``."""
    if count_tokens(book.text) <= budget:
        return book.text, BOOK_POLICIES[0]
    order = dict.fromkeys(u for pair in zip_longest(units_a, units_b) for u in pair if u)
    by_id = {u.unit_id: u for u in book.units}
    keep, used = [], 0
    for u in (by_id[uid] for uid in order if uid in by_id):
        n = count_tokens(f"[{u.title}]\n{u.text(book.text)}\n\n")
        if used + n > budget:
            continue  # a later (shorter) chapter may still fit; the order stays deterministic
        keep.append(u)
        used += n
    if keep:
        keep.sort(key=lambda u: u.start)
        return "".join(f"[{u.title}]\n{u.text(book.text)}\n\n" for u in keep).rstrip(), BOOK_POLICIES[1]
    return "\n".join(dict.fromkeys([*chunks_a, *chunks_b])), BOOK_POLICIES[2]
