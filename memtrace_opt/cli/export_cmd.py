"""`memtrace export RUN --otlp URL | --mlflow`: send a run to a tracing backend or to MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memtrace_opt.cli import app
from memtrace_opt.errors import ConfigError
from memtrace_opt.export import MlflowExportResult, OtlpExportResult, export_mlflow, export_otlp


def export(run: Path, *, otlp: str | None = None, mlflow: bool = False, tracking_uri: str | None = None,
           experiment: str = "memtrace-opt") -> list[OtlpExportResult | MlflowExportResult]:
    """What the command does, for tests: run the chosen exports in order (OTLP, then MLflow)."""
    if not otlp and not mlflow:
        raise ConfigError("choose a destination: --otlp URL and/or --mlflow")
    if tracking_uri and not mlflow:
        raise ConfigError("--tracking-uri goes with --mlflow")
    results: list[OtlpExportResult | MlflowExportResult] = []
    if otlp:
        results.append(export_otlp(run, otlp))
    if mlflow:
        results.append(export_mlflow(run, tracking_uri=tracking_uri, experiment=experiment))
    return results


@app.command("export")
def export_command(
    run: Annotated[Path, typer.Argument(help="A run directory (holds cases.jsonl).", file_okay=False)],
    otlp: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--otlp", metavar="URL",
                     help="Send the run as OpenTelemetry spans to this OTLP/HTTP endpoint "
                          "(Phoenix: http://localhost:6006/v1/traces). Needs memtrace-opt[otlp]."),
    ] = None,
    mlflow: Annotated[bool, typer.Option("--mlflow", help="Log the run to MLflow. Needs memtrace-opt[mlflow].")] = False,
    tracking_uri: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--tracking-uri", help="MLflow tracking URI, e.g. file:./mlruns (default: MLflow's own)."),
    ] = None,
    experiment: Annotated[str, typer.Option("--experiment", help="MLflow experiment name.")] = "memtrace-opt",
) -> None:
    """Export a run: replay its evolution graphs as OpenTelemetry spans (OpenInference and GenAI attributes,
    verdicts as evaluations) and/or log it to MLflow (params, metrics by round, report and program)."""
    console = Console(stderr=True, soft_wrap=True)
    for result in export(run, otlp=otlp, mlflow=mlflow, tracking_uri=tracking_uri, experiment=experiment):
        if isinstance(result, OtlpExportResult):
            console.print(f"sent {result.spans:,} spans in {result.traces} traces to {result.endpoint}")
        else:
            console.print(f"logged MLflow run {result.run_id} (experiment {result.experiment_id}) at "
                          f"{result.tracking_uri}: {result.params} params, {result.metrics} metrics, "
                          f"artifacts {', '.join(result.artifacts)}")
