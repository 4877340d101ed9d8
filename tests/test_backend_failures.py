"""A dead, failing or hung OpenAI-compatible server is an
error naming the server, never "every unit the fallback, rc 0"; the request cache never stores a
failure and is keyed by the answering endpoint; served models never send us to the hub; secrets
are redacted. Every server here is a loopback fake (:class:`fakes.FakeOpenAI`) on 127.0.0.1."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import conftest
import pytest

from litseg_nb.core.cache import CacheWarning
from litseg_nb.config import LLMConfig
from litseg_nb.llm import BackendUnavailableError, LLMError, SamplingParams, cache_report, make_backend
from litseg_nb.llm.openai_backend import OpenAIBackend
from litseg_nb.llm.request_cache import CachedBackend, RequestCache

from fakes import FakeOpenAI, free_port

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[1]
CONV = [{"role": "user", "content": "hello"}]


def client(url: str, **kw) -> OpenAIBackend:
    opts = dict(timeout_s=1.0, max_retries=1, max_concurrency=2,
                tokenizer=False)
    opts.update(kw)
    return OpenAIBackend("fake-model", base_urls=[url], **opts)


def cached(url: str, path: Path, **kw) -> CachedBackend:
    return CachedBackend(client(url, **kw), RequestCache(path))


# ------------------------------------------------------------------ item 2: the request cache
def test_failures_and_empty_replies_are_never_cached(tmp_path):
    db = tmp_path / "r.sqlite"
    with FakeOpenAI("500") as srv:
        b = cached(srv.url, db)
        with pytest.raises(BackendUnavailableError):
            b.chat([CONV])
        srv.mode = "null_content"  # a reply without content: returned as "", never stored
        assert b.chat([CONV])[0].text == ""
        assert len(b.cache) == 0
        srv.mode = "ok"
        n = len(srv.chat_requests)
        assert b.chat([CONV])[0].text == "echo: hello"
        assert len(srv.chat_requests) == n + 1  # the fixed server is asked, nothing stale served
        assert b.chat([CONV])[0].cache_hit and len(srv.chat_requests) == n + 1
        # the request the dead server never answered is not "computed" (the empty reply and the real one are)
        assert b.hits == 1 and b.misses == 2
        assert cache_report(b) == f"LLM request cache: 1 of 3 replies from the cache, 2 computed ({db})"


def test_an_older_cache_holding_an_empty_reply_is_not_served(tmp_path):
    db = tmp_path / "r.sqlite"
    with FakeOpenAI("ok") as srv:
        b = cached(srv.url, db)
        key = RequestCache.make_key({**b._base_payload("chat"), "messages": CONV,
                                     "params": __import__("dataclasses").asdict(SamplingParams())})
        b.cache.put_many([(key, "chat", "x", {"value": "", "usage": {
            "text": "", "prompt_tokens": 1, "completion_tokens": 0, "latency_s": 0.0}})])
        assert b.chat([CONV])[0].text == "echo: hello" and len(srv.chat_requests) == 1


def test_key_names_the_endpoint_another_server_with_the_same_model_is_asked(tmp_path):
    db = tmp_path / "r.sqlite"
    with FakeOpenAI("ok") as one, FakeOpenAI("ok") as two:
        cached(one.url, db).chat([CONV])
        b2 = cached(two.url, db)
        assert not b2.chat([CONV])[0].cache_hit
        assert len(one.chat_requests) == 1 and len(two.chat_requests) == 1
        assert cached(one.url, db).chat([CONV])[0].cache_hit and len(one.chat_requests) == 1
    assert cache_report(None) == "" and "off" in cache_report(client("http://127.0.0.1:9/v1"))


def test_hf_revision_of_a_local_folder_changes_with_its_files(tmp_path):
    from litseg_nb.llm.models import model_revision

    (tmp_path / "config.json").write_text("{}")
    before = model_revision(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    assert model_revision(str(tmp_path)) != before and str(tmp_path) in before
    assert model_revision("tiny-random") == "tiny-random@v1"


# ------------------------------------------------------------------ item 1: errors reach the caller
@pytest.mark.parametrize("method", ["lumber", "proposition", "litseg-lite", "margin"])
def test_dead_server_stops_every_llm_method(method, tmp_path, fresh_dirs):
    from litseg_nb.segmenters.registry import chunk_units, get_method

    port = free_port()  # nobody listening
    spec = get_method(method)
    cfg = spec.config.for_profile("test", llm={"backend": "openai", "model": "fake-model",
                                                       "base_urls": (f"http://127.0.0.1:{port}/v1",),
                                                       "max_retries": 0, "use_cache": False})
    book = conftest.make_book("bk", 1, 4, unit_id="u{u}")
    backend = make_backend(cfg.llm)
    backend._tokenizer = False  # count tokens on the (dead) server
    with pytest.raises(LLMError, match=rf"127\.0\.0\.1:{port}"):
        chunk_units(method, [(book, u) for u in book.units], cfg, backend=backend)


# ------------------------------------------------------------------ item 11: LumberChunker and server faults
@pytest.mark.parametrize("mode", ["500", "hang", "malformed"])
def test_lumber_server_fault_is_one_line_naming_the_server(mode):
    from litseg_nb.chunkers.llm_chunkers import lumber_chunks_batch

    book = conftest.make_book("bk", 1, 6, unit_id="u{u}")
    with FakeOpenAI(mode, hang_s=1.5) as srv:
        with pytest.raises(BackendUnavailableError) as err:
            lumber_chunks_batch([(book, book.units[0])], client(srv.url, timeout_s=0.5), budget=5)
    msg = str(err.value)
    assert srv.url in msg and "\n" not in msg and len(srv.chat_requests) == 2  # 1 try + 1 retry


def test_lumber_null_content_is_an_invalid_reply_retried_and_counted():
    from litseg_nb.chunkers.llm_chunkers import lumber_chunks_batch

    book = conftest.make_book("bk", 1, 4, unit_id="u{u}")
    with FakeOpenAI("null_content") as srv:
        chunks, stats = lumber_chunks_batch([(book, book.units[0])], client(srv.url), budget=5, max_retries=1)
    assert stats[0].fallbacks >= 1 and stats[0].invalid.get("no_answer", 0) >= 2
    assert any(c.metadata["fallback"] for c in chunks[0])


def test_served_model_counts_tokens_on_the_server_or_fails_fast():
    with FakeOpenAI("ok") as srv:
        b = client(srv.url, tokenizer=None)
        assert b.count_tokens("three words here") == 3 and b.tokenizer is None
        srv.tokenize = False
        b2 = client(srv.url, tokenizer=None)
        with pytest.raises(LLMError, match="cannot count tokens for served model 'fake-model'.*tokenize"):
            b2.count_tokens("x")


# ------------------------------------------------------------------ item 14: never the hub
HUB_PROBE = """
import sys, time
from litseg_nb.llm.openai_backend import OpenAIBackend
b = OpenAIBackend("served-model", base_urls=[sys.argv[1]], max_retries=0)
t0 = time.perf_counter()
tok = b.tokenizer
print("TOKENIZER", tok is None, round(time.perf_counter() - t0, 1))
"""


class _Hub(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *a):
        pass

    def _deny(self):
        _Hub.hits.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_POST = _deny


@pytest.mark.slow
def test_served_model_never_contacts_the_hub(tmp_path):
    hub = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{hub.server_address[1]}", HF_HOME=str(tmp_path / "hf"),
               PYTHONPATH=str(REPO))
    try:
        out = subprocess.run([sys.executable, "-c", HUB_PROBE, "http://127.0.0.1:9/v1"], env=env,
                             capture_output=True, text=True, timeout=90)
    finally:
        hub.shutdown()
        hub.server_close()
    assert "TOKENIZER True" in out.stdout, out.stderr[-2000:]
    assert _Hub.hits == []  # before the fix: HEAD/GET .../served-model/resolve/main/tokenizer_config.json


# ------------------------------------------------------------------ item 13: a hung server
def test_hung_server_is_reported_while_waiting_and_bounded_by_max_wait(capfd):
    with FakeOpenAI("hang", hang_s=2.5) as srv:
        b = client(srv.url, timeout_s=10.0, max_retries=3, max_wait_s=1.2, wait_report_s=0.4)
        t0 = time.perf_counter()
        with pytest.raises(BackendUnavailableError, match=r"max_wait_s=1\.2s|no answer within"):
            b.chat([CONV, CONV])
        assert time.perf_counter() - t0 < 5  # 1.2 s in all (slack for a loaded CI), not 4 x 10 s
    err = capfd.readouterr().err
    assert f"waiting for {srv.url} (fake-model): 2 request(s) unanswered, oldest" in err
    cfg = LLMConfig()
    assert cfg.wait_report_s <= 60 and cfg.max_wait_s == 300.0
    assert make_backend(LLMConfig(backend="openai", base_urls=(srv.url,), max_wait_s=7, use_cache=False)
                        ).max_wait_s == 7


# ------------------------------------------------------------------ item 11: the embeddings cache
def test_corrupt_embeddings_cache_is_moved_aside(tmp_path):
    from litseg_nb.llm.embeddings import EmbeddingCache

    db = tmp_path / "emb.sqlite"
    db.write_bytes(b"not a database at all" * 200)
    with pytest.warns(CacheWarning) as rec:
        cache = EmbeddingCache(db)
    msg = str(rec[0].message)
    assert "embeddings cache" in msg and str(db) in msg and str(cache.moved_aside) in msg and "\n" not in msg
    assert cache.moved_aside.read_bytes().startswith(b"not a database")
    import numpy as np

    cache.put_many([("k", np.ones(3))])
    assert list(cache.get_many(["k"])) == ["k"]


def test_full_embeddings_cache_is_reported_and_the_run_continues(tmp_path):
    import numpy as np

    from litseg_nb.llm.embeddings import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    cache._conn.execute("PRAGMA max_page_count = 3")  # the database is full after a few rows
    with pytest.warns(CacheWarning, match="cannot store vectors .*full"):
        for i in range(50):
            cache.put_many([(f"k{i}", np.ones(512))])
    assert cache.full


# ------------------------------------------------------------------ the black box: down, failing, healthy
BOOK = ("A Small Book\n\nCHAPTER I.\n\n" + " ".join(f"Sentence {i} of the first chapter is here." for i in range(1, 6))
        + "\n\nCHAPTER II.\n\n" + " ".join(f"Another sentence {i} in the second chapter." for i in range(1, 5)) + "\n")


def _segment(book: Path, url: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "litseg_nb", "segment", str(book), "--method", "litseg", "--profile", "test",
           "--llm-backend", "openai", "--base-url", url, "--llm-model", "fake-model",
           "--set", "llm.max_retries=1", "-o", str(out)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=str(out.parent))


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """``segment`` three times with one cache: the server DOWN, then answering 500, then healthy."""
    tmp_path = tmp_path_factory.mktemp("three_runs")
    book = tmp_path / "small_book.txt"
    book.write_text(BOOK)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITSEG_CACHE_DIR": str(tmp_path / "cache"),
           "LITSEG_OUTPUTS_DIR": str(tmp_path / "outputs")}
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    runs, seen = [], []
    runs.append(_segment(book, url, tmp_path / "down.jsonl", env))
    seen.append(0)
    with FakeOpenAI("500", port=port) as srv:
        runs.append(_segment(book, url, tmp_path / "failing.jsonl", env))
        seen.append(len(srv.chat_requests))
        srv.mode = "ok"
        runs.append(_segment(book, url, tmp_path / "healthy.jsonl", env))
        seen.append(len(srv.chat_requests) - seen[1])
    return tmp_path, url, runs, seen


@pytest.mark.slow
def test_down_failing_healthy_exit_codes_and_cache(three_runs):
    tmp, url, (down, failing, healthy), (_, n_failing, n_healthy) = three_runs
    assert down.returncode != 0 and url in down.stderr and "Connection refused" in down.stderr
    assert failing.returncode != 0 and url in failing.stderr and "HTTP 500" in failing.stderr
    assert n_failing == 2  # one request and its one retry: LitSeg's reply retries never see a dead server
    assert not (tmp / "down.jsonl").exists() and not (tmp / "failing.jsonl").exists()
    assert healthy.returncode == 0, healthy.stderr[-3000:]
    # calibration (3 stages x 1 unit) + 3 stages x 2 units: every request reached the server, so
    # nothing of the two failed runs was cached
    assert n_healthy == 9
    rows = [json.loads(line) for line in (tmp / "healthy.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["unit_id"] != "outside"]  # the text outside the units: no method ran on it
    assert rows and all(r["metadata"]["fallback"] == "none" for r in rows)
    assert "[litseg_nb] litseg (test):" in healthy.stdout


@pytest.mark.slow
def test_down_failing_healthy_summaries(three_runs):
    _, url, (down, failing, healthy), _ = three_runs
    for failed in (down, failing):  # one line naming the server, no traceback
        assert "Traceback" not in failed.stderr and url in failed.stderr
    assert "fell back" not in healthy.stdout  # every unit's fallback is "none"
    assert "LLM request cache: 0 of 9 replies from the cache" in healthy.stdout + healthy.stderr


def test_a_dead_server_is_reported_after_one_round_not_one_per_queued_request():
    with FakeOpenAI("500") as srv:
        b = client(srv.url, max_concurrency=2, max_retries=1)
        with pytest.raises(BackendUnavailableError):
            b.chat([[{"role": "user", "content": f"q{i}"}] for i in range(40)])
    assert len(srv.chat_requests) <= 2 * 2 * 2  # at most the two in flight (and the next two), x 2 attempts


def test_healthy_litseg_run_reports_no_fallbacks():
    # the run's fallback count tested the fallback *string* ("none" is truthy), so a healthy
    # run and a dead one reported the same count
    from litseg_nb.segmenters.registry import chunk_units
    from litseg_nb.litseg.config import LitSegConfig
    from fakes import ScriptedBackend

    from fakes import model_reply

    book = conftest.make_book("bk", 2, 4, unit_id="u{u}")
    be = ScriptedBackend(reply_fn=lambda conv: model_reply({"messages": conv}))
    chunks, extra = chunk_units("litseg", [(book, u) for u in book.units], LitSegConfig.for_profile("test"),
                                backend=be)
    assert extra["fallbacks"] == 0 and {c.metadata["fallback"] for c in chunks} == {"none"}


@pytest.mark.parametrize("what", ["perplexity", "completion", "pairwise"])
def test_dead_server_stops_perplexity_completion_and_the_pairwise_judge(what, fresh_dirs):
    from litseg_nb.chunkers.splitters import paragraph_chunks

    port = free_port()
    b = OpenAIBackend("tiny-random", base_urls=[f"http://127.0.0.1:{port}/v1"], max_retries=0)  # local tokenizer
    book = conftest.make_book("bk", 1, 4, unit_id="u{u}")
    with pytest.raises(BackendUnavailableError, match=rf"127\.0\.0\.1:{port}"):
        if what == "perplexity":
            from litseg_nb.chunkers.perplexity import sentence_perplexities

            sentence_perplexities(book, book.units[0], b, max_context=256, block_tokens=64)
        elif what == "completion":
            from litseg_nb.chunkers.llm_chunkers import complete_book_chunks

            complete_book_chunks(book, paragraph_chunks(book, book.units[0]), b, "paragraph+completion")
        else:
            from litseg_nb.metrics.pairwise import judge_pairs

            judge_pairs(b, [{"context": "c", "question": "q", "reference": "r", "target_answer": "a",
                             "other_answer": "b", "qid": "q1"}])
