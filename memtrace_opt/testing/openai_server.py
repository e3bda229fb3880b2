"""An OpenAI-compatible chat server on loopback, answered by an engine (a FakeEngine by default): offline tests
of everything that talks to a served model over HTTP (LiteLLM, DSPy's cache, parallel conversations).

    with FakeOpenAIServer(FakeEngine(skills=default_skills()), latency=0.05) as server:
        lm = dspy.LM("openai/fake", api_base=server.api_base, api_key="unused")

It serves `POST /v1/chat/completions` (plain or streamed) and `GET /v1/models`, one thread per request, and
counts what it saw: `requests` (each request body, in arrival order) and `max_in_flight` (the most requests
it was answering at once). `latency` seconds are slept inside each request, a stand-in for a remote model.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dspy.lm15 import request_from_openai_chat

__all__ = ["FakeOpenAIServer"]


class FakeOpenAIServer:
    """A loopback OpenAI-compatible server answering from `engine.complete(Request)`; a context manager."""

    def __init__(self, engine: Any = None, *, model: str = "fake", latency: float = 0.0) -> None:
        if engine is None:
            from memtrace_opt.testing.fake_lm import FakeEngine
            from memtrace_opt.testing.skills import default_skills

            engine = FakeEngine(skills=default_skills())
        self.engine = engine
        self.model = model
        self.latency = latency
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def api_base(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat.completion object for one request body (counted in `requests` and `max_in_flight`)."""
        with self._lock:
            self.requests.append(body)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.latency:
                time.sleep(self.latency)
            request = request_from_openai_chat({k: v for k, v in body.items() if k in _REQUEST_KEYS})
            response = self.engine.complete(request)
        finally:
            with self._lock:
                self._in_flight -= 1
        usage = response.usage
        prompt, completion = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "finish_reason": response.finish_reason or "stop",
                         "message": {"role": "assistant", "content": response.text or ""}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }


# the parts of a request body the engine reads; the rest (stream, user, n, ...) is the transport's
_REQUEST_KEYS = ("model", "messages", "temperature", "max_tokens", "max_completion_tokens", "top_p", "stop", "seed")


def _handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return None

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as error:
                self._send(400, {"error": {"message": f"bad JSON: {error}"}})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                completion = server.answer(body)
            except Exception as error:  # noqa: BLE001 - a failed request answers 500, the server goes on
                self._send(500, {"error": {"message": f"{type(error).__name__}: {error}"}})
                return
            if body.get("stream"):
                self._stream(completion)
            else:
                self._send(200, completion)

        def _stream(self, completion: dict[str, Any]) -> None:
            choice = completion["choices"][0]
            base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            chunks = [
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": choice["message"]["content"]},
                                      "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
                 "usage": completion["usage"]},
            ]
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            encoded = data.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

    return Handler
