"""Serve an embedded GGUF over HTTP with llama-cpp-python's own OpenAI-compatible server (its [server] extra).

The served model is loaded with the settings the in-process engine loads it with (`model_settings`: context size,
threads, batch, seed, the GGUF's own chat template) and answers a request that leaves a sampling parameter out as
the in-process engine would (`EngineDefaults`: the server's own defaults, repeat_penalty 1.1 and temperature 0.8,
change greedy replies). What the server cannot have are the engine's levers (prefix state cache, grammar-bound
replies): compare a served model with the in-process engine under `EngineLevers.off()`.

    memtrace serve-model --model embedded:1.5b --port 8000 --name qwen
    memtrace run -s mem0 --lm openai/qwen --lm-api-base http://127.0.0.1:8000/v1 --threads 4

llama-cpp-python's server answers one request at a time; a server that batches (vLLM, llama.cpp's own
llama-server with --parallel) is what turns `--threads` into throughput.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.errors import ConfigError, ModelUnavailable
from memtrace_opt.lm.embedded import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_N_CTX,
    LLAMA_CMAKE_ARGS,
    SEED,
    EmbeddedEngine,
    EngineLevers,
    is_embedded,
)

__all__ = ["ENGINE_REQUEST_DEFAULTS", "SERVE_INSTALL", "EngineDefaults", "ServeOptions", "build_app", "http_server",
           "model_settings", "serve_model"]

logger = logging.getLogger(__name__)

SERVE_INSTALL = f"CMAKE_ARGS=\"{LLAMA_CMAKE_ARGS}\" pip install 'memtrace-opt[serve]'"
LOOPBACK = "127.0.0.1"
# What the in-process engine asks llama.cpp for when a call leaves it out (EmbeddedEngine.complete, and
# llama_cpp.Llama.create_chat_completion's own defaults for the rest).
ENGINE_REQUEST_DEFAULTS: Mapping[str, Any] = {
    "temperature": 0.0,
    "max_tokens": DEFAULT_MAX_TOKENS,
    "seed": SEED,
    "repeat_penalty": 1.0,
}
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class ServeOptions:
    """What `memtrace serve-model` serves and where. `name` is the model id clients send (`--lm openai/NAME`);
    by default the GGUF's tag. The context levers are the embedded engine's (`EngineLevers`)."""

    model: str = "embedded"
    host: str = LOOPBACK
    port: int = 8000
    name: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int = EngineLevers.n_batch
    flash_attn: bool = False

    def __post_init__(self) -> None:
        if not is_embedded(self.model):
            raise ConfigError(f"serve-model serves an embedded model (embedded[:1.5b|0.5b|smollm2|/path.gguf]), "
                              f"got {self.model!r}")
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"serve-model: --port must be 1-65535, got {self.port}")
        if self.n_ctx < 256:
            raise ConfigError(f"serve-model: --n-ctx must be >= 256, got {self.n_ctx}")
        if self.name is not None and not self.name.strip():
            raise ConfigError("serve-model: --name must not be empty")

    def engine(self) -> EmbeddedEngine:
        """The in-process engine these options describe (its weights resolve the same way)."""
        from memtrace_opt.lm.embedded import EngineLevers

        levers = EngineLevers(n_threads=self.n_threads, n_threads_batch=self.n_threads_batch, n_batch=self.n_batch,
                              flash_attn=self.flash_attn)
        return EmbeddedEngine(self.model, n_ctx=self.n_ctx, levers=levers)

    def served_name(self) -> str:
        return self.name or self.engine().model_tag

    @property
    def api_base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"


def require_server() -> None:
    """Import llama-cpp-python's server (and uvicorn), or raise ModelUnavailable naming the install command.

    llama_cpp itself comes in through `require_llama_cpp` first, so its OpenMP threads wait passively while the
    server is idle, as in-process."""
    from memtrace_opt.lm.embedded import require_llama_cpp

    require_llama_cpp()
    try:
        import llama_cpp.server.app  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ModelUnavailable(
            f"serve-model needs llama-cpp-python's server extra ({exc.name or exc}); install it with: {SERVE_INSTALL}"
        ) from None


def model_settings(options: ServeOptions, path: Path) -> Any:
    """llama-cpp-python's `ModelSettings` for `path`, loading it as `embedded.load_model` loads it in-process.

    The server's own defaults differ where the in-process engine keeps llama_cpp.Llama's: half the cores for
    decoding, a 2048-token context, logits for every token, mlock, a random seed."""
    from llama_cpp.server.settings import ModelSettings

    cores = os.cpu_count() or 1
    return ModelSettings(
        model=str(path),
        model_alias=options.served_name(),
        n_ctx=options.n_ctx,
        n_threads=options.n_threads or cores,
        n_threads_batch=options.n_threads_batch or cores,
        n_batch=options.n_batch,
        flash_attn=options.flash_attn,
        seed=SEED,
        logits_all=False,
        use_mlock=False,
        chat_format=None,  # the chat template the GGUF carries, as in-process
        cache=False,
        verbose=False,
    )


def with_defaults(body: bytes, defaults: Mapping[str, Any]) -> bytes:
    """A request body with each of `defaults` filled in where the body leaves it out (or null), and OpenAI's
    newer `max_completion_tokens` (what DSPy sends) read as the `max_tokens` llama-cpp-python's server knows.
    A body that is not a JSON object comes back as it was: the server answers it with its own error."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return body
    if not isinstance(data, dict):
        return body
    filled = dict(data)
    if filled.get("max_tokens") is None and filled.get("max_completion_tokens") is not None:
        filled["max_tokens"] = filled["max_completion_tokens"]
    filled.update({key: value for key, value in defaults.items() if filled.get(key) is None})
    return json.dumps(filled).encode() if filled != data else body


class EngineDefaults:
    """ASGI middleware: a completion request that leaves a sampling parameter out gets the in-process engine's
    value (`ENGINE_REQUEST_DEFAULTS`), not the server's, and its `max_completion_tokens` is honoured (the server
    reads only `max_tokens`, and would otherwise decode to the end of the context). Every other request passes
    through untouched."""

    def __init__(self, app: ASGIApp, defaults: Mapping[str, Any] = ENGINE_REQUEST_DEFAULTS) -> None:
        self.app = app
        self.defaults = dict(defaults)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")).rstrip("/")
        if scope.get("type") != "http" or scope.get("method") != "POST" or path not in COMPLETION_PATHS:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before its body arrived
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = with_defaults(b"".join(chunks), self.defaults)
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        request = {"type": "http.request", "body": body, "more_body": False}
        await self.app({**scope, "headers": headers}, _replay([request], receive), send)


def _replay(first: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives `first` and then whatever the client sends next."""
    pending = list(first)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def build_app(options: ServeOptions, path: Path) -> ASGIApp:
    """llama-cpp-python's server app for `path` (the model loads now), under `EngineDefaults`."""
    require_server()
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ServerSettings

    server = ServerSettings(host=options.host, port=options.port)
    return EngineDefaults(create_app(server_settings=server, model_settings=[model_settings(options, path)]))


def http_server(options: ServeOptions, app: ASGIApp) -> Any:
    """The uvicorn server of `app` at the options' address; `.run()` serves until SIGINT or SIGTERM (in the main
    thread) or until `.should_exit` is set."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, host=options.host, port=options.port, log_level="warning"))


def serve_model(options: ServeOptions, *, on_ready: Callable[[ServeOptions], None] | None = None) -> None:
    """Resolve the weights, load the model, call `on_ready(options)` and serve until SIGINT or SIGTERM."""
    require_server()
    path = options.engine().prepare()
    logger.info("serving %s as %r at %s", path, options.served_name(), options.api_base)
    app = build_app(options, path)
    if on_ready is not None:
        on_ready(options)
    http_server(options, app).run()
