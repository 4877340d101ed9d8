"""The A.2 LLM rater (litseg_nb.evaluation.human_eval): verbatim rubric, strict parsing, retries, backends per rater."""
from __future__ import annotations

from pathlib import Path

import pytest

from litseg_nb.evaluation import human_eval
from litseg_nb.llm.base import LLMError
from fakes import ScriptedBackend
from litseg_nb.core.prompts import load_prompt
from fakes import prompt_source

SEED = Path("/work/shared/seeds/000_52d52c48502729e3.txt")


def test_a2_template_is_the_papers_text_verbatim():
    text = load_prompt("judge/a2_rubric_system")
    assert "Appendix A.1" in prompt_source("judge/a2_rubric_system") and "A.2" in prompt_source("judge/a2_rubric_system")
    if not SEED.is_file():
        pytest.skip("paper seed text not available")
    seed = SEED.read_text(encoding="utf-8")
    for para in text.split("\n\n"):  # every paragraph of the template occurs in the paper as written
        assert para.strip() in seed, para[:60]
    for name in ("Content Completeness.", "Topical Coherence.", "Boundary Placement."):
        assert name in text


@pytest.mark.parametrize("reply,ok", [
    ('{"content_completeness": 4, "topical_coherence": 5, "boundary_placement": 1}', True),
    ('<think>hm</think>{"content_completeness": "4", "topical_coherence": 5.0, "boundary_placement": 2}', True),
    ('{"content_completeness": 6, "topical_coherence": 5, "boundary_placement": 1}', False),  # out of range
    ('{"content_completeness": 4.5, "topical_coherence": 5, "boundary_placement": 1}', False),  # not an integer
    ('{"content_completeness": 4, "topical_coherence": 5}', False),  # a dimension missing
    ('{"content_completeness": true, "topical_coherence": 5, "boundary_placement": 1}', False),
    ("4, 5, 1", False), ("", False),
])
def test_parse_a2_scores(reply, ok):
    assert (human_eval.parse_a2_scores(reply) is not None) == ok


def test_retry_then_neutral_and_backend_errors_propagate():
    replies = iter(["junk", '{"content_completeness": 2, "topical_coherence": 3, "boundary_placement": 4}'])
    be = ScriptedBackend(reply_fn=lambda c: next(replies))
    [r] = human_eval.rate_chunks(be, [{"chunk_text": "x"}], retries=1)
    assert r.scores == {"content_completeness": 2, "topical_coherence": 3, "boundary_placement": 4}
    assert r.attempts == 2 and not r.neutral
    [n] = human_eval.rate_chunks(ScriptedBackend(reply_fn=lambda c: "junk"), [{"chunk_text": "x"}], retries=2)
    assert n.neutral and n.attempts == 3 and set(n.scores.values()) == {3}
    with pytest.raises(LLMError):
        human_eval.rate_chunks(ScriptedBackend(reply_fn=lambda c: LLMError("server down")), [{"chunk_text": "x"}])


def test_rater_backends_reuse_and_build_once(monkeypatch):
    from litseg_nb.config import LLMConfig

    built = []
    monkeypatch.setattr("litseg_nb.llm.make_backend", lambda c, ledger=None: built.append(c.model) or f"be:{c.model}")
    main = LLMConfig(model="m0")
    cfgs = [LLMConfig(model="m0", max_new_tokens=9), LLMConfig(model="m1"), LLMConfig(model="m1")]
    out, new = human_eval.build_rater_backends(cfgs, reuse=(main, "main-backend"))
    assert out == ["main-backend", "be:m1", "be:m1"] and built == ["m1"] and new == ["be:m1"]


def test_rater_backends_mapping_errors():
    from litseg_nb.errors import UsageError
    from litseg_nb.evaluation.human_eval import rater_backends

    assert rater_backends({"r1": 0, "r2": 0}, ["a", "b", "c"]) == {"r1": "a", "r2": "b"}
    assert rater_backends({"r1": 0, "r2": 0, "r3": 0}, ["a", "b"]) == {"r1": "a", "r2": "b", "r3": "b"}
    with pytest.raises(UsageError, match="empty"):
        rater_backends({"r1": 0}, [])


def test_full_raters_are_two_other_models():
    from litseg_nb.evaluation.segment_quality import SegmentQualityConfig
    from litseg_nb.lite.config import LiteConfig

    sq = SegmentQualityConfig.for_profile("full")
    lite = LiteConfig.for_profile("full")
    models = [c.model for c in sq.rater_llms()]
    assert len(set(models)) == 2  # ICC / kappa between two raters, not one model twice
    assert not {lite.llm.model, lite.judge_llm.model} & set(models)  # neither Lite's base nor the reward judge
    for p in ("test", "smoke"):  # the one local model for both (labelled "same model" in the tables)
        assert len({c.model for c in SegmentQualityConfig.for_profile(p).rater_llms()}) == 1


def test_pairwise_llm_annotators_cycle_over_the_two_rater_models(tmp_path, monkeypatch):
    from litseg_nb.evaluation.human_eval import export_pairwise_sheets, llm_fill_pairwise_sheets

    items = [{"dataset": "gutenqa", "qid": f"q{i}", "target": "T", "opponent": "O", "context": "ctx",
              "question": "q?", "reference": "r", "target_answer": "good", "other_answer": "bad"} for i in range(3)]
    paths = export_pairwise_sheets(items, tmp_path / "sheets")
    temps: dict[str, list[float]] = {"m-a": [], "m-b": []}

    def backend(model):
        be = ScriptedBackend(reply_fn=lambda c: "Verdict: A", model_id=model)
        orig = be.chat
        be.chat = lambda convs, params, tag: temps[model].append(params.temperature) or orig(convs, params, tag)
        return be

    _, _, info = llm_fill_pairwise_sheets(paths["sheets"], paths["key"], tmp_path / "out", [backend("m-a"), backend("m-b")])
    assert info["models"] == {"A1": "m-a", "A2": "m-b", "A3": "m-a", "A4": "m-b", "A5": "m-a"}
    assert info["raters_label"].startswith("5 raters on 2 different models (m-a, m-b, m-a, m-b, m-a)")
    # each model's first annotator greedy, its later annotators sampled
    assert temps["m-a"] == [0.0, 0.7, 0.7] and temps["m-b"] == [0.0, 0.7]
