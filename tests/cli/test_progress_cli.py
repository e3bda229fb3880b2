"""Progress and the time estimate on the command line: stderr shows them (log lines when not a terminal),
stdout keeps the results only, and --quiet keeps stderr silent."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from memtrace_opt.cli import run_cli


def test_run_reports_progress_and_its_estimate_on_stderr(tmp_path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "run"
    assert run_cli(["run", "--system", "long_context", "--lm", "fake", "--no-judge", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "run long_context on sample: 1 conversation, 3 sessions, 13 questions" in captured.err
    assert "estimate: about 0:00" in captured.err and "answer: done, 13/13" in captured.err
    assert "done in " in captured.err.splitlines()[-1]
    assert "estimate" not in captured.out and "13 questions" not in captured.out  # stdout: the results
    assert "correct" in captured.out
    assert json.loads((out / "manifest.json").read_text())["estimate"]["rates"]["source"] == "known"


def test_run_quiet_is_silent_on_stderr(tmp_path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "run"
    assert run_cli(["run", "--system", "long_context", "--lm", "fake", "--no-judge", "--quiet",
                    "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "correct" in captured.out
    assert "estimate" not in json.loads((out / "manifest.json").read_text())  # none made


@pytest.mark.parametrize("quiet", [False, True])
def test_optimize_quick_shows_its_phases_unless_quiet(tmp_path, capsys: pytest.CaptureFixture[str], quiet: bool):
    argv = ["optimize", "--system", "rag", "--preset", "quick", "--lm", "fake", "--out", str(tmp_path / "opt")]
    assert run_cli(argv + (["--quiet"] if quiet else [])) == 0
    captured = capsys.readouterr()
    assert "same-conversation questions 0." in captured.out  # the closing lines (the sample: one conversation)
    if quiet:
        assert captured.err == ""
        return
    for line in ("optimize rag on sample: train ", "estimate: about", "baseline: valset: done",
                 "round 1: plan", "round 1: candidates", "same-conversation questions: done"):
        assert line in captured.err, line
    assert "baseline: valset" not in captured.out and "estimate" not in captured.out


def test_attribute_reports_its_cases(tmp_path, capsys: pytest.CaptureFixture[str]):
    from memtrace_opt import progress
    from memtrace_opt.cli.attribute_cmd import attribute_command_impl

    out = tmp_path / "run"
    assert run_cli(["run", "--system", "long_context", "--lm", "fake", "--no-judge", "-q", "--out", str(out)]) == 0
    for copy in ("quiet", "plain"):
        shutil.copytree(out, tmp_path / copy)
    stream = io.StringIO()
    with progress.reporting(progress.LogReporter(stream, thread=False)):
        failed = attribute_command_impl(out, "lineage", embedder="hash").new
    assert failed > 0
    assert f"attributing (lineage) (0/{failed})" in stream.getvalue()
    assert f"attributing (lineage): done, {failed}/{failed}" in stream.getvalue()
    capsys.readouterr()
    attribute_command_impl(tmp_path / "quiet", "lineage", embedder="hash", progress=False)
    assert "attributing" not in capsys.readouterr().err
    attribute_command_impl(tmp_path / "plain", "lineage", embedder="hash")  # no reporter installed: stderr's
    assert f"attributing (lineage): done, {failed}/{failed}" in capsys.readouterr().err
