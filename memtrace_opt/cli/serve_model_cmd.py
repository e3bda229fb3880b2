"""`memtrace serve-model`: the embedded GGUF served over HTTP (OpenAI-compatible), for `--lm openai/NAME`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memtrace_opt.cli import app
from memtrace_opt.cli.common import console
from memtrace_opt.lm.serve import LOOPBACK, ServeOptions


def ready_line(options: ServeOptions) -> str:
    """What the command prints once the model is loaded: where it listens and the flags that use it."""
    name = options.served_name()
    return (f"serving {options.model} as {name!r} at {options.api_base}; point a role at it with "
            f"--lm openai/{name} --lm-api-base {options.api_base} (Ctrl-C stops)")


def serve_model_command_impl(options: ServeOptions) -> None:
    """What the command does: load the model, print the address, serve until Ctrl-C or SIGTERM."""
    from memtrace_opt.lm.serve import serve_model

    out = console(stderr=True)
    if options.host not in (LOOPBACK, "localhost", "::1"):
        out.print(f"warning: serving on {options.host}, not loopback: anyone who reaches it can use the model")
    out.print(f"loading {options.model} ...")
    serve_model(options, on_ready=lambda served: out.print(ready_line(served), soft_wrap=True))
    out.print("stopped")


@app.command("serve-model")
def serve_model_command(
    model: Annotated[str, typer.Option("--model", "-m", help="embedded[:1.5b|0.5b|smollm2|/path.gguf].")] = "embedded",
    host: Annotated[str, typer.Option(help="Listen address (default: loopback only).")] = LOOPBACK,
    port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="Listen port.")] = 8000,
    name: Annotated[Optional[str], typer.Option(help="Model id clients send (default: the GGUF's tag).")] = None,  # noqa: UP045
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=256, help="Context size, as the in-process engine's n_ctx.")] = 8192,
    n_threads: Annotated[Optional[int], typer.Option("--n-threads", min=1, help="Decode threads (default: every core).")] = None,  # noqa: UP045
) -> None:
    """Serve the embedded model over HTTP with llama-cpp-python's OpenAI-compatible server (the serve extra).

    Loaded and sampled as the in-process engine (without its prefix cache and grammar levers); every command
    then runs against it with --lm openai/NAME --lm-api-base http://HOST:PORT/v1. It answers one request at a
    time: --threads overlaps conversations only on a server that batches (vLLM, llama-server --parallel)."""
    serve_model_command_impl(ServeOptions(model=model, host=host, port=port, name=name, n_ctx=n_ctx,
                                          n_threads=n_threads))
