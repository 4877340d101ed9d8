"""An LLM rater with the paper's HUMAN rubric (Appendix A.2), standing in for the experts of Tables 1, 5, 9.

The human study rates chunks on Content Completeness, Topical Coherence and Boundary Placement, 1-5
(A.1, A.2). Where no human has rated (``test``, ``smoke``, or ``full`` before the experts' sheets come
back), :func:`litseg_nb.evaluation.human_eval.llm_fill_rating_sheets` fills a copy of the sheets with LLM raters
that read exactly what a human reads — the chunk between its surrounding text, no method name — and
are given the A.2 text verbatim (template ``judge/a2_rubric_system``) with our own user turn asking for
the three integers as JSON (``judge/a2_rubric_user``). It is NOT the E.3 rubric: E.3 is LitSeg-Lite's GRPO
reward, and a judge that rates with the reward it was trained on would favour Lite.

Who rates (``SegmentQualityConfig.rater_llm`` and ``rater2_llm``): two DIFFERENT models, so that ICC and
κ measure agreement between raters and not one model's self-consistency, and neither Lite's base model
nor the reward judge where the profile allows (``full``: two other model families served by their own
OpenAI-compatible servers). Where the profile has only one usable local model (``test``, ``smoke``) both
raters are that model — the second samples (T=0.7) — and the tables say "same model".

A reply is valid when it holds the three dimensions as integers 1-5 (a JSON object; reasoning blocks
removed). An invalid reply is retried (sampled, new seed) up to ``retries`` times; an item still
unscored keeps the neutral 3 on every dimension and is counted (``n_neutral``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..llm.base import LLMError, SamplingParams, UsageTag
from ..core.prompts import load_prompt, render_prompt
from ..litseg.validate import extract_json

A2_DIMENSIONS = ("content_completeness", "topical_coherence", "boundary_placement")
NEUTRAL = 3


@dataclass
class A2Rating:
    scores: dict[str, int]
    neutral: bool  # no valid reply after the retries: the neutral 3 everywhere
    attempts: int
    raw: str = ""


def a2_conversation(text_before: str, chunk_text: str, text_after: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": load_prompt("judge/a2_rubric_system")},
            {"role": "user", "content": render_prompt("judge/a2_rubric_user", text_before=text_before or "(start of the unit)",
                                                      chunk_text=chunk_text, text_after=text_after or "(end of the unit)")}]


def parse_a2_scores(text: str) -> dict[str, int] | None:
    """The three A.2 scores of a reply (integers 1-5), or None when any is missing or out of range."""
    got = extract_json(text)
    obj = got.obj
    if not isinstance(obj, Mapping):
        return None
    out: dict[str, int] = {}
    for d in A2_DIMENSIONS:
        v = obj.get(d)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            return None
        try:
            f = float(v)
        except ValueError:
            return None
        if f != int(f) or not 1 <= f <= 5:
            return None
        out[d] = int(f)
    return out


def rate_chunks(backend: Any, items: Sequence[Mapping[str, str]], *, retries: int = 1, seed: int = 0,
                first_temperature: float = 0.0, max_new_tokens: int = 64,
                tag: UsageTag = UsageTag("llm-rater", stage="a2-rating")) -> list[A2Rating]:
    """Rate every item (``text_before``, ``chunk_text``, ``text_after``) with the A.2 rubric on
    ``backend``; attempts are batched over the items still unscored. A backend error is not a reply:
    it propagates (never a neutral score)."""
    convs = [a2_conversation(it.get("text_before", ""), it["chunk_text"], it.get("text_after", "")) for it in items]
    out: list[A2Rating | None] = [None] * len(items)
    attempts = [0] * len(items)
    raw = [""] * len(items)
    todo = list(range(len(items)))
    for attempt in range(retries + 1):
        if not todo:
            break
        params = SamplingParams(max_new_tokens=max_new_tokens,
                                temperature=first_temperature if attempt == 0 else max(0.7, first_temperature),
                                seed=seed + 1000 * attempt)
        gens = backend.chat([convs[i] for i in todo], params, tag)
        if len(gens) != len(todo):
            raise LLMError(f"A.2 rater: backend answered {len(gens)} of {len(todo)} requests")
        left = []
        for i, g in zip(todo, gens):
            attempts[i] += 1
            raw[i] = g.text
            scores = parse_a2_scores(g.text)
            if scores is None:
                left.append(i)
            else:
                out[i] = A2Rating(scores, False, attempts[i], g.text)
        todo = left
    for i in todo:
        out[i] = A2Rating({d: NEUTRAL for d in A2_DIMENSIONS}, True, attempts[i], raw[i])
    return [r for r in out if r is not None]


def rater_label(models: Sequence[str]) -> str:
    """``"2 raters: A, B"`` or, when they are one model, says so."""
    distinct = list(dict.fromkeys(models))
    if len(distinct) == 1 and len(models) > 1:
        return (f"{len(models)} raters, the SAME model {distinct[0]} (rater 1 greedy, the others sampled at T=0.7): "
                "agreement here is one model's self-consistency, not agreement between raters")
    if len(distinct) == len(models):
        return f"{len(models)} raters, different models: {', '.join(models)}"
    return (f"{len(models)} raters on {len(distinct)} different models ({', '.join(models)}): a model's later raters "
            "sample at T=0.7")


def build_rater_backends(cfgs: Sequence[Any], reuse: tuple[Any, Any] | None = None,
                         ledger: Any = None) -> tuple[list[Any], list[Any]]:
    """One backend per rater config (``SegmentQualityConfig.rater_llms()``): ``reuse = (llm_cfg, backend)``
    serves every rater of that model on that backend (the notebook's own, already loaded), the others are
    built once per distinct model and server. Returns ``(backend per rater, the backends built here)``."""
    # deferred: tests patch litseg_nb.llm.make_backend (read at call time)
    from ..llm import make_backend

    out, built = [], {}
    for c in cfgs:
        if reuse is not None and (reuse[0].backend, reuse[0].model, tuple(reuse[0].base_urls)) == \
                (c.backend, c.model, tuple(c.base_urls)):
            out.append(reuse[1])
            continue
        key = (c.backend, c.model, tuple(c.base_urls), c.max_model_len, c.dtype, c.device)
        if key not in built:
            built[key] = make_backend(c, ledger)
        out.append(built[key])
    return out, list(built.values())
