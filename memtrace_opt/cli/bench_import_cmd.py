"""`memtrace bench import RUN --labels RUN/labels.jsonl --out BENCH`: a run's human labels into a bench."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.cli.bench_cmd import bench_app
from memtrace_opt.cli.common import console


def bench_import_impl(run: Path, labels: Path | None, out: Path) -> Any:
    """Import the labels (default RUN/labels.jsonl) and print what the bench holds now. Returns the ImportSummary."""
    from memtrace_opt.benchmarks.memtracebench.human import import_labels
    from memtrace_opt.report.labels import LABELS_FILE

    summary = import_labels(run, labels or run / LABELS_FILE, out)
    counts = ", ".join(f"{system} {key} {n}" for system, rows in summary.counts.items() for key, n in rows.items())
    console().print(f"{summary.out}: {summary.added} cases added, {summary.replaced} relabelled, "
                    f"{summary.cases} in all ({counts})", soft_wrap=True)
    return summary


@bench_app.command("import")
def bench_import_command(
    run: Annotated[Path, typer.Argument(help="The run directory the labels are about.", file_okay=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Bench directory to add the cases to (created if absent).")],
    labels: Annotated[Optional[Path],  # noqa: UP045
        typer.Option("--labels", help="Labels file (default: RUN/labels.jsonl).",
                                                dir_okay=False)] = None,
) -> None:
    """Add a run's human-labelled failures (labels.jsonl from `memtrace serve` or the report's download) to a bench,
    with their graphs. A label naming an op its graph lacks refuses the import, naming the case."""
    bench_import_impl(run, labels, out)
