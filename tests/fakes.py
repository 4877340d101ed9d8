"""Fake OpenAI-compatible servers on 127.0.0.1 for the openai-backend tests (routing, faults, keys).

:class:`LoopbackServer` runs an HTTP server in a daemon thread and records every POST it gets (path,
headers, JSON body) and how many were in flight at once; a subclass answers through
:meth:`LoopbackServer.respond`. Use one as a context manager or call :meth:`close`.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat_reply(content: str, prompt_tokens: int = 5, completion_tokens: int = 1,
               finish_reason: str = "stop", **usage: Any) -> dict:
    """A ``/chat/completions`` response body with one choice and a usage record."""
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, **usage}}


class LoopbackServer:
    """An HTTP server on a free loopback port; ``url`` is its ``.../v1`` base URL."""

    def __init__(self) -> None:
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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
