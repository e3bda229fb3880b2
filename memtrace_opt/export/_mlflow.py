"""Logs a run directory as one MLflow run: the configuration as params, accuracy and usage as metrics
(per-round validation accuracy of an optimize run with step = round, the baseline at step 0), and the
report, the compiled program, the manifest and the config as artifacts.

Needs the `mlflow` extra (mlflow-skinny is enough). A `file:` tracking URI (or a plain folder) uses MLflow's
file store, which recent MLflow versions only open with MLFLOW_ALLOW_FILE_STORE=true: the export sets it
for the duration of the call when the URI is a local folder.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.errors import MemtraceError
from memtrace_opt.report import RunArtifacts, load_run, write_report
from memtrace_opt.report._accuracy import accuracy_from_cases, normalize_accuracy

__all__ = ["MlflowExportResult", "export_mlflow", "run_params", "run_metrics"]

log = logging.getLogger(__name__)
_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")
_PARAM_VALUE_CAP = 500
_ARTIFACTS = ("report.html", "program.json", "manifest.json", "config.yaml")


@dataclass(frozen=True)
class MlflowExportResult:
    run_id: str
    experiment_id: str
    tracking_uri: str
    params: int
    metrics: int
    artifacts: tuple[str, ...]


def _key(*parts: Any) -> str:
    return _KEY_BAD.sub("_", ".".join(str(p) for p in parts if p != ""))[:250]


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(_key(prefix, k) if prefix else _key(k), v, out)
    else:
        text = "" if value is None else str(value)
        out[prefix] = text if len(text) <= _PARAM_VALUE_CAP else text[: _PARAM_VALUE_CAP - 1] + "…"


def run_params(run: RunArtifacts) -> dict[str, str]:
    """The run's configuration as flat MLflow params (`models.task.model`, `program.top_k`, ...)."""
    params: dict[str, str] = {}
    _flatten("", {k: v for k, v in run.config.items() if k != "schema_version"}, params)
    return {k: v for k, v in params.items() if k}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def run_metrics(run: RunArtifacts) -> list[tuple[str, float, int]]:
    """(key, value, step) triples: accuracy overall and by category, counts, LM usage by role, verdict counts,
    and for optimize runs `val_accuracy`, `round_lm_calls`, `round_accepted` by round (baseline at step 0)."""
    manifest = run.manifest
    metrics: list[tuple[str, float, int]] = []

    def add(key: str, value: Any, step: int = 0) -> None:
        number = _number(value)
        if number is not None:
            metrics.append((key, number, step))

    accuracy = normalize_accuracy(manifest.get("accuracy")) if manifest.get("accuracy") else accuracy_from_cases(run.cases)
    for name, value in accuracy["overall"].items():
        add(_key("accuracy", "overall", name), value)
    for category, block in accuracy["by_category"].items():
        for name, value in block.items():
            add(_key("accuracy", category, name), value)
    for name, value in (manifest.get("counts") or {}).items():
        add(_key("counts", name), value)
    for role, usage in (manifest.get("usage") or {}).items():
        for name, value in (usage or {}).items():
            add(_key("usage", role, name), value)
    add("seconds", manifest.get("seconds"))
    errors: dict[str, int] = {}
    for verdict in run.verdicts:
        label = str(verdict.get("error_type") or "unattributed")
        errors[label] = errors.get(label, 0) + 1
    for label, count in sorted(errors.items()):
        add(_key("verdicts", label), count)
    add("best_val_accuracy", (manifest.get("optimizer") or {}).get("best_val_accuracy"))
    baseline = (manifest.get("baseline") or {}).get("val_accuracy")
    add("val_accuracy", baseline, 0)
    for item in manifest.get("rounds") or []:
        if not isinstance(item, dict) or not isinstance(item.get("round"), int):
            continue
        step = item["round"]
        add("val_accuracy", item.get("val_accuracy"), step)
        add("round_lm_calls", item.get("lm_calls"), step)
        add("round_accepted", 1.0 if item.get("accepted") else 0.0, step)
        add("round_candidates", len(item.get("candidates") or []), step)
    return metrics


def _local_store(uri: str | None) -> bool:
    return uri is not None and (uri.startswith("file:") or "://" not in uri)


@contextmanager
def _allow_file_store(uri: str | None) -> Iterator[None]:
    if not _local_store(uri) or "MLFLOW_ALLOW_FILE_STORE" in os.environ:
        yield
        return
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def export_mlflow(run_dir: str | Path, *, tracking_uri: str | None = None, experiment: str = "memtrace-opt",
                  run_name: str | None = None) -> MlflowExportResult:
    """Logs the run at `run_dir` to MLflow (`tracking_uri`, else MLflow's own default) as a new MLflow run
    in `experiment`. Writes report.html first when the run has none. Returns the MLflow run's ids."""
    try:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError as error:
        raise MemtraceError("the MLflow export needs MLflow: pip install 'memtrace-opt[mlflow]'") from error
    run = load_run(run_dir)
    if not run.report_path.exists():
        write_report(run.root)
    if tracking_uri and "://" not in tracking_uri and not tracking_uri.startswith("file:"):
        tracking_uri = Path(tracking_uri).resolve().as_uri()
    params = run_params(run)
    metrics = run_metrics(run)
    with _allow_file_store(tracking_uri):
        try:
            client = MlflowClient(tracking_uri=tracking_uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else client.create_experiment(experiment)
            summary = run.config.get("system") or ""
            tags = {"mlflow.runName": run_name or run.name, "memtrace.run": run.name,
                    "memtrace.system": str(summary), "memtrace.dataset": str(run.config.get("dataset") or ""),
                    "memtrace.optimize": str(bool(run.manifest.get("rounds"))).lower()}
            created = client.create_run(experiment_id, run_name=run_name or run.name, tags=tags)
            run_id = created.info.run_id
            now = int(time.time() * 1000)
            items = [Param(k, v) for k, v in sorted(params.items())]
            for start in range(0, len(items), 100):
                client.log_batch(run_id, params=items[start:start + 100])
            points = [Metric(k, v, now, step) for k, v, step in metrics]
            for start in range(0, len(points), 500):
                client.log_batch(run_id, metrics=points[start:start + 500])
            client.log_batch(run_id, tags=[RunTag("memtrace.failed", str(sum(not c.get("correct") for c in run.cases)))])
            logged = []
            for name in _ARTIFACTS:
                path = run.root / name
                if path.exists():
                    client.log_artifact(run_id, str(path))
                    logged.append(name)
            client.set_terminated(run_id)
            uri = client.tracking_uri if hasattr(client, "tracking_uri") else str(tracking_uri)
        except MemtraceError:
            raise
        except Exception as error:  # mlflow raises its own exception types for store problems
            raise MemtraceError(f"MLflow export failed: {error}") from error
    log.info("logged run %s to MLflow experiment %s", run_id, experiment_id)
    return MlflowExportResult(run_id=run_id, experiment_id=str(experiment_id), tracking_uri=str(uri),
                              params=len(params), metrics=len(metrics), artifacts=tuple(logged))
