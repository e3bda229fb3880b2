"""Exports of a run directory to the tools people already use: OpenTelemetry backends (Phoenix, Langfuse,
any OTLP collector) and MLflow. Both are optional extras (`memtrace-opt[otlp]`, `memtrace-opt[mlflow]`);
importing this package needs neither, and each export raises MemtraceError with the install line when
its extra is missing.

    from memtrace_opt.export import export_otlp, export_mlflow
    export_otlp("runs/mem0-locomo", "http://localhost:6006/v1/traces")
    export_mlflow("runs/mem0-locomo", tracking_uri="file:./mlruns")
"""

from __future__ import annotations

from typing import Protocol

from memtrace_opt.export._mlflow import MlflowExportResult, export_mlflow, run_metrics, run_params
from memtrace_opt.export._otlp import OtlpExportResult, export_otlp, traces_url

__all__ = [
    "RunExporter",
    "export_otlp",
    "export_mlflow",
    "OtlpExportResult",
    "MlflowExportResult",
    "run_params",
    "run_metrics",
    "traces_url",
]


class RunExporter(Protocol):
    """Sends one run directory to an external tool.

    Contract: reads the run's artifacts (config, manifest, cases, graphs, verdicts) and never changes them,
    except writing the run's own report.html when an exporter ships it and it is missing; a missing optional
    dependency or a destination that refuses the data raises MemtraceError with a one-line fix; returns a
    frozen result saying what was sent. Both `export_otlp` and `export_mlflow` follow it.
    """

    def __call__(self, run_dir: str, /) -> object: ...
