"""RAGAS Context Relevance and Answer Accuracy (NVIDIA metrics of ragas 0.4.3) with a local judge LLM.

ragas is driven through :class:`BackendRagasLLM`, a ``BaseRagasLLM`` around our own
:class:`~litseg_nb.llm.base.LLMBackend` (no OpenAI client, no network). Telemetry is switched off
(``RAGAS_DO_NOT_TRACK=true``) before ragas is imported. ragas' metrics retry a reply without a rating
up to 5 times and return NaN when none is found; :func:`ragas_scores` counts those NaNs.
"""
from __future__ import annotations

import logging
import math
import os
from typing import Any, Sequence

from ..llm.base import SamplingParams, UsageTag


def _import_ragas():
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    from langchain_core.outputs import Generation as LCGeneration
    from langchain_core.outputs import LLMResult
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms.base import BaseRagasLLM
    from ragas.metrics._nv_metrics import AnswerAccuracy, ContextRelevance
    from ragas.run_config import RunConfig

    return LCGeneration, LLMResult, SingleTurnSample, BaseRagasLLM, AnswerAccuracy, ContextRelevance, RunConfig


def make_ragas_llm(backend: Any, max_new_tokens: int = 8, tag: UsageTag = UsageTag("rag-ragas-judge", stage="ragas")):
    """A ragas ``BaseRagasLLM`` that sends every prompt as one user turn to ``backend.chat``."""
    LCGeneration, LLMResult, _, BaseRagasLLM, _, _, RunConfig = _import_ragas()

    class BackendRagasLLM(BaseRagasLLM):
        def __init__(self):
            self.run_config = RunConfig(max_retries=1)
            self.multiple_completion_supported = False
            self.cache = None
            self.backend, self.max_new_tokens, self.tag = backend, max_new_tokens, tag

        def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            conv = [{"role": "user", "content": prompt.to_string()}]
            temp = 0.0 if temperature is None or temperature <= 0.05 else float(temperature)
            gens = self.backend.chat([conv] * n, SamplingParams(max_new_tokens=self.max_new_tokens,
                                                                temperature=temp), self.tag)
            return LLMResult(generations=[[LCGeneration(text=g.text) for g in gens]])

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            return self.generate_text(prompt, n, temperature, stop, callbacks)

        def is_finished(self, response):
            return True

        def __repr__(self):
            return f"BackendRagasLLM({getattr(backend, 'model_id', '?')})"

    return BackendRagasLLM()


def ragas_scores(backend: Any, samples: Sequence[dict[str, Any]], max_new_tokens: int = 8,
                 retries: int = 5) -> list[dict[str, float]]:
    """Per sample ``{"context_relevance", "answer_accuracy"}`` (NaN when the judge gave no rating).

    ``samples``: dicts with ``question``, ``contexts`` (list of str), ``answer``, ``reference``.
    """
    _, _, SingleTurnSample, _, AnswerAccuracy, ContextRelevance, _ = _import_ragas()
    llm = make_ragas_llm(backend, max_new_tokens)
    cr, aa = ContextRelevance(llm=llm), AnswerAccuracy(llm=llm)
    cr.retry = aa.retry = max(1, int(retries))  # attempts per judge template
    out = []
    # ragas logs a warning per retry of a reply without a rating; only the outcome matters (NaN after
    # the last retry, in the returned scores; nan_count() counts them), so the per-retry lines are noise
    nv_log = logging.getLogger("ragas.metrics._nv_metrics")
    level = nv_log.level
    nv_log.setLevel(logging.ERROR)
    try:
        for s in samples:
            sample = SingleTurnSample(user_input=s["question"], retrieved_contexts=list(s["contexts"]),
                                      response=s["answer"] or " ", reference=s["reference"])
            out.append({"context_relevance": float(cr.single_turn_score(sample)),
                        "answer_accuracy": float(aa.single_turn_score(sample))})
    finally:
        nv_log.setLevel(level)
    return out


def nan_count(values: Sequence[float]) -> int:
    return sum(1 for v in values if isinstance(v, float) and math.isnan(v))
