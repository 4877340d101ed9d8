"""LitSeg against a misbehaving OpenAI-compatible server: bounded retries, the paper's fallback,
no hang. The server is a local ``http.server`` that answers 5xx, times out, returns a broken body
or returns malformed model output, depending on its mode."""
from __future__ import annotations

import json
import time

import conftest
import pytest
from fakes import LoopbackServer, chat_reply, model_reply

from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, read_annotations, records_to_chunks
from litseg_nb.llm import BackendUnavailableError
from litseg_nb.llm.openai_backend import OpenAIBackend
from litseg_nb.core.schema import Book, check_coverage


def make_book(units=2, n=5) -> Book:
    return conftest.make_book("bk", units, n, sentence="Line {i} of part {u}.", unit_id="u{u}",
                              unit_title="Part {u}", title="Book", unit_sep="\n")


class FaultyServer(LoopbackServer):
    """LitSeg stage replies (:func:`fakes.model_reply`) or, by ``mode``, a server fault: ``5xx`` (HTTP
    503), ``timeout`` (answers after 1.5 s), ``broken_body`` (not JSON); ``malformed`` answers 200 with
    a reply that is no JSON object."""

    def __init__(self, mode: str):
        self.mode = mode
        super().__init__()

    def respond(self, handler, body):
        if self.mode == "5xx":
            return self.send(handler, 503, b'{"error": "overloaded"}')
        if self.mode == "timeout":
            time.sleep(1.5)
            return self.send(handler, 200, b"{}")
        if self.mode == "broken_body":
            return self.send(handler, 200, b"<html>not json")
        content = ("Sure! Here is the analysis: {'segments': [1, 2" if self.mode == "malformed"
                   else model_reply(body))
        self.send(handler, 200, chat_reply(content, prompt_tokens=10, completion_tokens=5))


@pytest.fixture
def server(request):
    s = FaultyServer(request.param)
    yield s
    s.close()


def backend(url):
    # constrained decoding as the test profile's LitSeg asks for it (response_format per request; the fake
    # server ignores it and answers as it would without)
    return OpenAIBackend("fake-model", base_urls=[url], timeout_s=0.5, max_retries=1,
                         max_concurrency=2, structured_output=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["5xx", "timeout", "broken_body"], indirect=True)
def test_server_faults_stop_the_run_after_bounded_retries(server, tmp_path):
    # a failing server used to end in "every unit the whole-unit fallback" (a silent result);
    # the paper's fallbacks are for invalid replies, a server fault stops the run naming the server
    cfg = LitSegConfig.for_profile("test", max_retries=1, unit_group_size=1)
    book = make_book()
    t0 = time.perf_counter()
    ann = tmp_path / "ann.jsonl"
    with pytest.raises(BackendUnavailableError) as err:
        annotate_units([(book, u) for u in book.units], backend(server.url), cfg, progress=False,
                       annotations_path=ann)
    assert time.perf_counter() - t0 < 45
    assert server.url in str(err.value) and "\n" not in str(err.value)
    # one request and its one HTTP retry, no LitSeg retry of a dead server, nothing written
    assert len(server.requests) == 2
    assert not ann.exists() or read_annotations(ann) == []


@pytest.mark.timeout(60)
def test_backend_error_in_a_later_group_keeps_the_finished_units(tmp_path):
    from fakes import ScriptedBackend

    good = iter(['{"step_1_events": "e"}', '{"step_2_threads": "t"}', json.dumps(
        {"chapter_title": "c", "step_3_turning_points": [],
         "segments": [{"subtitle": "s", "from_idx": 1, "to_idx": 5, "context_idx": []}]})])
    be = ScriptedBackend(reply_fn=lambda conv: next(good, None) or BackendUnavailableError("down"))
    cfg = LitSegConfig.for_profile("test", max_retries=1, unit_group_size=1)
    book = make_book()
    ann = tmp_path / "ann.jsonl"
    with pytest.raises(BackendUnavailableError):
        annotate_units([(book, u) for u in book.units], be, cfg, progress=False, annotations_path=ann)
    recs = read_annotations(ann)
    assert [r["unit_id"] for r in recs] == ["u0"] and recs[0]["fallback"] == "none"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["malformed"], indirect=True)
def test_malformed_model_output_retried_then_whole_unit(server):
    cfg = LitSegConfig.for_profile("test", max_retries=2)
    book = make_book()
    run = annotate_units([(book, u) for u in book.units], backend(server.url), cfg, progress=False)
    assert len(server.requests) == 3 * 3 * 2  # every stage: 1 try + 2 retries, both units
    for r in run.records:
        assert r["status"] == "done" and r["fallback"] == "whole_unit" and r["retries"] == 6
        assert r["stage_fallbacks"] == {"stage1": "raw_passthrough", "stage2": "raw_passthrough"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["ok"], indirect=True)
def test_well_behaved_server(server):
    cfg = LitSegConfig.for_profile("test")
    book = make_book()
    run = annotate_units([(book, u) for u in book.units], backend(server.url), cfg, progress=False)
    assert len(server.requests) == 3 * 2
    assert all(r["fallback"] == "none" and r["tokens"]["prompt"] == 30 for r in run.records)
