"""Which methods replay on a bench: counterfactual always, graphtrace to confirm unless `--no-confirm`; and the
judge's gold-evidence test, only with `--judge-evidence`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memtrace_opt.attribution import AttributionConfig
from memtrace_opt.benchmarks.memtracebench import evaluate
from memtrace_opt.cli import app


def test_graphtrace_replays_unless_confirmation_is_off() -> None:
    off = AttributionConfig(confirm=False)
    assert evaluate.replays("graphtrace") and not evaluate.replays("graphtrace", off)
    assert evaluate.replays("counterfactual", off) and not evaluate.replays("lineage")


@pytest.mark.parametrize(("flags", "confirm"), [([], True), (["--no-confirm"], False)])
def test_bench_eval_gives_graphtrace_the_task_model_unless_no_confirm(tmp_path, monkeypatch, flags, confirm) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(evaluate, "eval_bench", lambda bench, methods, **kwargs: calls.append(kwargs) or [])
    result = CliRunner().invoke(app, ["bench", "eval", str(tmp_path), "-m", "graphtrace", "--lm", "fake", "-q", *flags])
    assert result.exit_code == 0, result.output
    [call] = calls
    assert call["config"].confirm is confirm and (call["task_lm"] is not None) is confirm
    assert call["judge"] is None


@pytest.mark.parametrize(("flags", "asked"), [([], False), (["--judge-evidence"], True)])
def test_bench_eval_asks_the_judge_about_the_gold_evidence_only_when_told(tmp_path, monkeypatch, flags, asked) -> None:
    calls: list[dict] = []
    monkeypatch.setattr(evaluate, "eval_bench", lambda bench, methods, **kwargs: calls.append(kwargs) or [])
    result = CliRunner().invoke(app, ["bench", "eval", str(tmp_path), "-m", "lineage", "--judge-lm", "fake", "-q",
                                      *flags])
    assert result.exit_code == 0, result.output
    [call] = calls
    assert call["config"].judge_evidence is asked and call["judge"] is not None
