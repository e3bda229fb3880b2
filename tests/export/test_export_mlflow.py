"""`memtrace export --mlflow`: params, metrics by round and artifacts, in a local file store."""

from __future__ import annotations

import os
from pathlib import Path

from memtrace_opt.cli import main
from memtrace_opt.export import export_mlflow, run_metrics, run_params
from memtrace_opt.report import load_run


def test_export_to_a_local_store(demo_run: Path, tmp_path: Path, mlflow_client_for) -> None:
    assert not (demo_run / "report.html").exists()
    uri = (tmp_path / "mlruns").as_uri()
    result = export_mlflow(demo_run, tracking_uri=uri, experiment="tests")
    client = mlflow_client_for(uri)
    run = client.get_run(result.run_id)
    assert run.data.params["system"] == "mem0"
    assert run.data.params["models.task.model"].startswith("embedded/")
    assert run.data.params["program.top_k"] == "10"
    history = sorted((m.step, m.value) for m in client.get_metric_history(result.run_id, "val_accuracy"))
    assert history == [(0, 0.30), (1, 0.36), (2, 0.36)]
    accepted = sorted((m.step, m.value) for m in client.get_metric_history(result.run_id, "round_accepted"))
    assert accepted == [(1, 1.0), (2, 0.0)]
    assert run.data.metrics["accuracy.overall.f1"] == 0.143
    assert run.data.metrics["verdicts.DeletionError"] == 1
    artifacts = {a.path for a in client.list_artifacts(result.run_id)}
    assert {"report.html", "program.json", "manifest.json", "config.yaml"} <= artifacts
    assert (demo_run / "report.html").exists()  # written because the run had none
    assert run.info.run_name == "run" and run.data.tags["memtrace.optimize"] == "true"


def test_a_plain_folder_works_and_the_file_store_switch_is_restored(demo_run: Path, tmp_path: Path,
                                                                   mlflow_client_for) -> None:
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
    try:
        result = export_mlflow(demo_run, tracking_uri=str(tmp_path / "store"))
        assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
        assert result.tracking_uri.startswith("file:") and result.params > 5
    finally:
        if before is not None:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before
    assert mlflow_client_for(result.tracking_uri).get_run(result.run_id).info.status == "FINISHED"


def test_params_and_metrics_without_mlflow(demo_run: Path) -> None:
    run = load_run(demo_run)
    params = run_params(run)
    assert params["data.conversations"] == "['demo']" and "schema_version" not in params
    metrics = run_metrics(run)
    assert ("round_lm_calls", 96.0, 1) in metrics and ("accuracy.single_hop.f1", 0.25, 0) in metrics


def test_export_command(demo_run: Path, tmp_path: Path, capsys, mlflow_client_for) -> None:
    main(["export", str(demo_run), "--mlflow", "--tracking-uri", (tmp_path / "m").as_uri(), "--experiment", "cli"])
    err = capsys.readouterr().err
    assert "logged MLflow run" in err and "report.html" in err
