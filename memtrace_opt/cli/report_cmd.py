"""`memtrace report RUN`: write the run's self-contained HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memtrace_opt.cli import app
from memtrace_opt.report import ReportResult, write_report


def report(run: Path, out: Path | None = None, max_nodes: int = 150) -> ReportResult:
    """What the command does, for tests: write the report and return what was written."""
    return write_report(run, out, max_nodes=max_nodes)


@app.command("report")
def report_command(
    run: Annotated[Path, typer.Argument(help="A run directory (holds cases.jsonl).", file_okay=False)],
    out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--out", help="Where to write the page (default: RUN/report.html).", dir_okay=False),
    ] = None,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", min=10, help="Cap on the nodes drawn for one question.")
    ] = 150,
) -> None:
    """Write RUN/report.html: the run summary, the failed questions with their verdicts and evolution
    graphs, and the optimization rounds. One file that opens offline in any browser."""
    result = report(run, out, max_nodes)
    Console(stderr=True, soft_wrap=True).print(
        f"wrote [bold]{result.path}[/] ({result.bytes / 1024:,.0f} KiB): {result.failed} failed questions, "
        f"{result.views} with a graph"
    )
