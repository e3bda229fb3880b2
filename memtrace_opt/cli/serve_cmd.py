"""`memtrace serve RUN`: the run's report on 127.0.0.1 with the labelling form (labels go to RUN/labels.jsonl)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from memtrace_opt.cli import app
from memtrace_opt.cli.common import console


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(run: Path, port: int = 0, max_nodes: int = 150, by: str | None = None) -> None:
    """What the command does: serve until Ctrl-C (or SIGTERM), printing the address first."""
    from memtrace_opt.report.serve import LabelServer

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)  # a service manager's stop: the same clean stop as Ctrl-C
    with LabelServer(run, port=port, max_nodes=max_nodes, by=by) as server:
        out = console(stderr=True)
        out.print(f"serving the report of {server.run.root} at {server.url} (labels go to {server.labels_path}); "
                  "Ctrl-C stops", soft_wrap=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            out.print("stopped")


@app.command("serve")
def serve_command(
    run: Annotated[Path, typer.Argument(help="A run directory (holds cases.jsonl).", file_okay=False)],
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")] = 0,
    max_nodes: Annotated[int, typer.Option("--max-nodes", min=10, help="Cap on the nodes drawn for one question.")] = 150,
    by: Annotated[Optional[str],  # noqa: UP045
        typer.Option("--by", help="Labeller's name the form starts with (default: the OS user).")] = None,
) -> None:
    """Serve RUN's report on 127.0.0.1 (loopback only) with a labelling form on each failed question: pick the
    root-cause op(s), the error type and a one-line rationale; each label is written to RUN/labels.jsonl at once
    (source human, who and when). Opened as a plain file instead, report.html offers the same form and downloads
    labels.jsonl."""
    serve(run, port, max_nodes, by)
