"""Pairwise B.2 judge (scripted) and RAGAS with the tiny model and no network."""
import socket

import pytest

from fakes import ScriptedBackend
from litseg_nb.metrics.pairwise import judge_pairs, parse_verdict


def test_parse_verdict():
    assert parse_verdict("A is better.\nVerdict: A") == "A"
    assert parse_verdict("Verdict: B ... final Verdict: **Tie**") == "Tie"
    assert parse_verdict("I prefer the first") is None


def test_pairwise_maps_positions_to_target_and_retries():
    items = [dict(qid=f"q{i}", context="c", question="q", reference="r", target_answer="GOOD", other_answer="bad")
             for i in range(6)]

    def reply(conv):  # always prefers the response that says GOOD
        user = conv[1]["content"]
        return "Verdict: A" if "Response A: GOOD" in user else "Verdict: B"

    res = judge_pairs(ScriptedBackend(reply_fn=reply), items, seed=3)
    assert [r["verdict"] for r in res] == ["win"] * 6
    assert {r["target_shown_as"] for r in res} == {"A", "B"}  # both positions used
    be = ScriptedBackend(replies=["no idea", "still none", "Verdict: Tie"])
    res = judge_pairs(be, items[:1], retries=1)
    assert res[0]["verdict"] == "invalid" and len(be.calls) == 2
    assert be.calls[0][0]["content"].startswith("Thank you for participating in this evaluation.")


@pytest.mark.slow
def test_ragas_runs_with_tiny_model_without_network(monkeypatch, tmp_path):
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path))
    from litseg_nb.config import LLMConfig
    from litseg_nb.llm import make_backend
    from litseg_nb.metrics.generation import ragas_scores

    backend = make_backend(LLMConfig(model="tiny-random", max_new_tokens=8, max_model_len=1024))
    attempts = []

    def no_network(self, address, *a, **k):
        attempts.append(address)
        raise OSError(f"network blocked in test: {address}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: no_network(None, a[0] if a else None))
    samples = [{"question": "Who is Emma?", "contexts": ["Emma Woodhouse, handsome, clever, and rich."],
                "answer": "A rich young woman.", "reference": "Emma Woodhouse"}]
    out = ragas_scores(backend, samples, max_new_tokens=4)
    assert attempts == []
    assert set(out[0]) == {"context_relevance", "answer_accuracy"}
    for v in out[0].values():  # a random model may give no rating (NaN) but never an out-of-range value
        assert v != v or 0.0 <= v <= 1.0
    assert backend.ledger.to_frame()["calls"].sum() >= 4  # two prompts per metric at least
