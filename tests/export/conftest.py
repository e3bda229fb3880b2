"""Export tests need the optional extras; the dev extra installs them, so CI always runs these tests."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from required import need_module

from memtrace_opt.report.demo_run import write_demo_run


def need(module: str) -> ModuleType:
    """Imports `module`; skips the test without it, except in CI where it must be installed."""
    return need_module(module, "pip install -e '.[dev]' installs it")


@pytest.fixture
def demo_run(tmp_path: Path) -> Path:
    return write_demo_run(tmp_path / "run")


@pytest.fixture
def memory_exporter():
    """An InMemorySpanExporter (the OpenTelemetry SDK is in the dev extra)."""
    need("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    return InMemorySpanExporter()


@pytest.fixture
def mlflow_client_for():
    """A function tracking_uri -> MlflowClient (mlflow-skinny is in the dev extra)."""
    need("mlflow")
    from mlflow.tracking import MlflowClient

    def make(uri: str) -> MlflowClient:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        return MlflowClient(tracking_uri=uri)

    return make
