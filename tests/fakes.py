"""Fake OpenAI-compatible servers on 127.0.0.1 for the openai-backend tests (routing, faults, keys).

:class:`LoopbackServer` runs an HTTP server in a daemon thread and records every POST it gets (path,
headers, JSON body) and how many were in flight at once; a subclass answers through
:meth:`LoopbackServer.respond`. Use one as a context manager or call :meth:`close`.

:class:`FakeOpenAI` is one with switchable ``mode`` (healthy, failing, hanging, broken bodies,
``content: null``, a 401 that echoes the key) and a ``/tokenize`` route; its default replies are
valid LitSeg stage replies and LumberChunker answers. :func:`free_port` gives a loopback port
nobody listens on (a DOWN server), which a :class:`FakeOpenAI` can later be started on.

:class:`ScriptedBackend` is a deterministic stand-in LLM backend that replays scripted replies.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from litseg_nb.config import PROFILES_TABLE
from litseg_nb.core.prompts import HEADER_PREFIX, prompt_path
from litseg_nb.llm.base import BackendBase, Generation, LLMError, SamplingParams, UsageLedger, UsageTag

TEST_PRESETS: tuple[str, ...] = PROFILES_TABLE["test"]["LibraryConfig"]["presets"]  # notebook 04 in the test profile


def chat_reply(content: str, prompt_tokens: int = 5, completion_tokens: int = 1,
               finish_reason: str = "stop", **usage: Any) -> dict:
    """A ``/chat/completions`` response body with one choice and a usage record."""
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, **usage}}


class LoopbackServer:
    """An HTTP server on a free loopback port; ``url`` is its ``.../v1`` base URL."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict] = []  # {"path", "_headers", **body} in arrival order
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.requests.append({"path": self.path, "_headers": dict(self.headers), **body})
                    outer.active += 1
                    outer.max_active = max(outer.max_active, outer.active)
                try:
                    outer.respond(self, body)
                finally:
                    with outer._lock:
                        outer.active -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        """Answer one request (subclasses); the default echoes the last message."""
        self.send(handler, 200, chat_reply("echo: " + body["messages"][-1]["content"]))

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, payload: dict | bytes) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        try:
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            pass

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def free_port() -> int:
    """A loopback port with nobody listening (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_INDEX = re.compile(r"(?m)^\[(\d+)\] ")
_LUMBER_IDS = re.compile(r"(?m)^ID (\d+): ")


def model_reply(body: dict) -> str:
    """A valid reply for the package's prompts: LitSeg stage 1/2/3 and LitSeg-Lite's single pass (the whole
    unit as one segment), LumberChunker (the window's second ID), else an echo of the last message."""
    user = body["messages"][-1]["content"]
    if "ONLY Step 1" in user:
        return '{"step_1_events": "events"}'
    if "ONLY Step 2" in user:
        return '{"step_2_threads": "threads"}'
    n = max((int(m) for m in _INDEX.findall(user)), default=1)
    step3 = {"chapter_title": "c", "step_3_turning_points": [],
             "segments": [{"subtitle": "s", "from_idx": 1, "to_idx": n, "context_idx": []}]}
    if "ONLY Step 3" in user:
        return json.dumps(step3)
    if user.startswith("[Chapter Text Content]\n"):  # LitSeg-Lite's user prompt
        return json.dumps({"step1": {"step_1_events": "events"}, "step2": {"step_2_threads": "threads"},
                           "step3": step3})
    ids = [int(m) for m in _LUMBER_IDS.findall(user)]
    if len(ids) >= 2:
        return f"Answer: ID {ids[1]}"
    return "echo: " + user


class FakeOpenAI(LoopbackServer):
    """An OpenAI-compatible server whose behaviour is ``mode`` (switchable while it runs):

    ``ok`` (:func:`model_reply`), ``500`` (HTTP 500), ``hang`` (answers after ``hang_s``),
    ``malformed`` (a body that is not JSON), ``null_content`` (``"content": null``), ``401_echo``
    (HTTP 401 whose body repeats the Authorization header it got). ``/tokenize`` counts words
    (HTTP 404 when ``tokenize=False``). ``max_words``: a chat request whose messages hold more words is
    refused with HTTP 400, as vLLM refuses a prompt over ``max_model_len``; ``reply``: the reply text of
    a request body (default :func:`model_reply`)."""

    def __init__(self, mode: str = "ok", port: int = 0, hang_s: float = 3.0, tokenize: bool = True,
                 max_words: int = 0, reply: Any = None) -> None:
        self.mode, self.hang_s, self.tokenize = mode, hang_s, tokenize
        self.max_words, self.reply = max_words, reply or model_reply
        super().__init__(port)

    def respond(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        if handler.path.split("?")[0].endswith("/tokenize"):  # a signed base URL keeps its query
            if not self.tokenize:
                return self.send(handler, 404, {"detail": "Not Found"})
            return self.send(handler, 200, {"count": len(str(body.get("prompt", "")).split())})
        mode = self.mode
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        if self.max_words and words > self.max_words:
            return self.send(handler, 400, {"error": {"message": f"This model's maximum context length is "
                                                                 f"{self.max_words} tokens; the messages have {words}"}})
        if mode == "500":
            return self.send(handler, 500, {"error": {"message": "internal server error"}})
        if mode == "hang":
            time.sleep(self.hang_s)
        if mode == "malformed":
            return self.send(handler, 200, b'{"choices": [{"message": ')
        if mode == "401_echo":
            got = handler.headers.get("Authorization", "")
            return self.send(handler, 401, {"error": f"invalid API key: {got}"})
        if mode == "null_content":
            return self.send(handler, 200, {"choices": [{"message": {"role": "assistant", "content": None},
                                                         "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 5, "completion_tokens": 0}})
        self.send(handler, 200, chat_reply(self.reply(body), completion_tokens=4))

    @property
    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].split("?")[0].endswith("/chat/completions")]


def stderr_lines(err: str) -> list[str]:
    """The non-empty lines of a command's stderr, tqdm progress bars aside (they redraw with ``\\r``)."""
    return [ln for ln in err.replace("\r", "\n").splitlines()
            if ln.strip() and not re.search(r"\||unit/s|book/s|it/s", ln)]


# ------------------------------------------------------------------ boundary-benchmark window books
def window_books(n_books: int = 6, per_book: int = 5, n: int = 40, seed: int = 0, gold_per_window: int = 2):
    """Books of boundary-benchmark windows (``n`` sentences each, paragraphs of 4 sentences) whose gold
    breaks (``gold_per_window`` per window, seeded) sit at paragraph starts away from the edges."""
    import random

    from litseg_nb.core.schema import Book, Sentence, Unit

    rng = random.Random(seed)
    books = []
    for b in range(n_books):
        units, gold, pos, text = [], {}, 0, []
        for w in range(per_book):
            sents, paras, start = [], [], pos
            for p in range(n // 4):
                pa = pos
                for i in range(4):
                    s = f"S{p}.{i}."
                    text.append(s + " ")
                    sents.append(Sentence(len(sents) + 1, pos, pos + len(s)))
                    pos += len(s) + 1
                paras.append((pa, pos - 1))
            pstarts = [4 * p + 1 for p in range(n // 4)]
            uid = f"c{w:04d}"
            units.append(Unit(f"windows:b{b}", uid, w, uid, start, pos - 1, tuple(sents), tuple(paras), "window"))
            gold[uid] = {"kind": "chapter", "gold": sorted(rng.sample(pstarts[2:-2], gold_per_window)),
                         "paragraph_starts": pstarts}
        books.append(Book(f"windows:b{b}", "b", "windows", "".join(text), units=units,
                          meta={"boundary_gold": gold, "source_book": f"b{b}"}))
    return books


def chunks_at(book, unit, starts, method):
    """Sentence chunks of ``unit`` starting at sentence numbers ``starts`` (1 always a start)."""
    from litseg_nb.core.schema import make_sentence_chunk

    starts = [1] + sorted(set(starts) - {1})
    ends = [s - 1 for s in starts[1:]] + [unit.n_sentences]
    return [make_sentence_chunk(book, unit, method, k, a, e) for k, (a, e) in enumerate(zip(starts, ends))]


# ------------------------------------------------------------------ toy books from plain text
_TOY_SENT = re.compile(r"\S.*?(?:[.!?]+[\"'’”)]*(?=\s|$)|$)", re.S)


def toy_book(text: str, book_id: str = "toy", title: str = "Toy Book"):
    """A :class:`~litseg_nb.core.schema.Book` from plain text: units split at lines of ``###``,
    paragraphs at blank lines, sentences at end punctuation followed by whitespace."""
    from litseg_nb.core.schema import Book, Sentence, Unit

    units, paragraphs = [], []
    parts = re.split(r"(\n###\n)", text)
    chunks, offset = [], 0
    for p in parts:
        if p != "\n###\n":
            chunks.append((offset, offset + len(p)))
        offset += len(p)
    for k, (a, b) in enumerate(chunks):
        sents, paras = [], []
        for pm in re.finditer(r"(?:[^\n]|\n(?![ \t]*\n))+", text[a:b]):
            pa, pb = a + pm.start(), a + pm.end()
            if not text[pa:pb].strip():
                continue
            paras.append((pa, pb))
            for sm in _TOY_SENT.finditer(text, pa, pb):
                s_end = sm.end()
                while s_end > sm.start() and text[s_end - 1].isspace():
                    s_end -= 1
                if s_end > sm.start():
                    sents.append(Sentence(len(sents) + 1, sm.start(), s_end))
        paragraphs.extend(paras)
        units.append(Unit(book_id, f"u{k:04d}", k, f"Unit {k}", a, b, tuple(sents), tuple(paras)))
    return Book(book_id, title, "toy", text, paragraphs, units)


def cached(cache, compute):
    """The stored value, else ``compute()`` stored."""
    if cache.exists():
        return cache.load()
    value = compute()
    cache.save(value)
    return value


def prompt_source(name: str) -> str:
    """The source a prompt template's header line names (``# source: ...``)."""
    return prompt_path(name).read_text(encoding="utf-8").partition("\n")[0].removeprefix(HEADER_PREFIX).strip()


@dataclass
class ScriptedBackend(BackendBase):
    """A deterministic stand-in backend for tests: ``chat`` consumes ``replies`` (or calls ``reply_fn``)."""

    replies: list[Any] = field(default_factory=list)
    reply_fn: Any = None
    logprob_fn: Any = None
    name: str = "scripted"
    model_id: str = "scripted"
    ledger: UsageLedger = field(default_factory=UsageLedger)
    calls: list[Conversation] = field(default_factory=list)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    tokenizer = None  # no tokenizer: tokens are words

    def chat(self, conversations, params=SamplingParams(), tag=UsageTag()):
        out = []
        for conv in conversations:
            self.calls.append(list(conv))
            if self.reply_fn is not None:
                reply = self.reply_fn(conv)
            elif self.replies:
                reply = self.replies.pop(0)
            else:
                raise LLMError("ScriptedBackend: script exhausted")
            if isinstance(reply, BaseException):
                raise reply
            prompt = " ".join(m["content"] for m in conv)
            gen = Generation(text=reply, prompt_tokens=self.count_tokens(prompt),
                             completion_tokens=self.count_tokens(reply), latency_s=0.0)
            self.ledger.record(tag, gen)
            out.append(gen)
        return out

    def next_token_logprobs_ex(self, conversations, candidates, tag=UsageTag()):
        if self.logprob_fn is None:
            raise LLMError("ScriptedBackend: no logprob_fn scripted")
        out = []
        for conv in conversations:
            self.calls.append(list(conv))
            prompt = " ".join(m["content"] for m in conv)
            gen = Generation("", self.count_tokens(prompt), 1, 0.0)
            self.ledger.record(tag, gen)
            out.append((self.logprob_fn(conv, list(candidates)), gen))
        return out
