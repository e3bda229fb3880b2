"""The shell contract of every command (docs/cli.md): 0 success, 1 the job ran and reported failures, 2 bad
input or usage (one line on stderr, no traceback), 130 interrupted (the manifest says so)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from runfixtures import failing_models, stopping_models, write_conversations

from memtrace_opt.cli import app, run_cli
from memtrace_opt.cli.doctor import Check, DoctorReport


def leaf_commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every command that runs something: a group's subcommands, never the group itself."""
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        return [path]
    return [leaf for name, sub in sorted(subcommands.items()) for leaf in leaf_commands(sub, (*path, name))]


LEAVES = leaf_commands(typer.main.get_command(app))
# every command and subcommand by name: renaming, adding or dropping one is a change these tests must see
EXPECTED_LEAVES = {("run",), ("optimize",), ("compare",), ("doctor",), ("attribute",), ("report",), ("export",),
                   ("serve",), ("serve-model",), ("data", "stats"), ("data", "fetch"), ("graph", "show"),
                   ("graph", "export"), ("bench", "build"), ("bench", "eval"), ("bench", "import")}


def one_line_error(err: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err


def test_every_command_is_covered():
    """A renamed, added or dropped command or subcommand fails here: the tests below call them by name, and
    every one of them is tested for a mistyped flag."""
    assert set(LEAVES) == EXPECTED_LEAVES


@pytest.mark.parametrize("path", sorted(EXPECTED_LEAVES), ids=" ".join)
def test_a_mistyped_flag_is_one_line_and_exit_2(path, capsys):
    assert run_cli([*path, "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "No such option: --no-such-flag" in err and f"memtrace {' '.join(path)} --help" in err  # that command's


@pytest.mark.parametrize("argv", [
    ["run", "--system", "rag", "--limit", "abc"],
    ["run"],  # no --system
    ["attribute"],  # a missing argument
    ["no-such-command"],
    ["run", "--system", "rag", "--lm", "fake", "--resume"],  # --resume needs --out
])
def test_usage_mistakes_exit_2_without_a_traceback(argv, capsys):
    assert run_cli(argv) == 2
    one_line_error(capsys.readouterr().err)


def test_bare_memtrace_shows_the_help_and_exits_2(capsys):
    assert run_cli([]) == 2
    assert "Usage" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["attribute", "report", "export", "graph"])
def test_a_missing_run_directory_is_bad_input(command, tmp_path, capsys):
    argv = {"export": ["export", str(tmp_path / "nope"), "--otlp", "http://127.0.0.1:9"],
            "graph": ["graph", "show", str(tmp_path / "nope.json")]}.get(command, [command, str(tmp_path / "nope")])
    code = run_cli(argv)
    err = capsys.readouterr().err
    assert "No such command" not in err, err  # a renamed command is a failure, not a usage error that passes
    assert code == 2
    one_line_error(err)


def test_doctor_with_a_failed_check_exits_1(monkeypatch, capsys):
    report = DoctorReport("foo/bar", (Check("generation (dspy.Predict)", "FAILED", "no answer"),))
    monkeypatch.setattr("memtrace_opt.cli.doctor.run_doctor", lambda *a, **k: report)
    assert run_cli(["doctor"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_help_exits_0(capsys):
    assert run_cli(["run", "--help"]) == 0


def _run_argv(tmp_path) -> list[str]:
    data = write_conversations(tmp_path / "three.json")
    return ["run", "--system", "rag", "--data", str(data), "--lm", "fake", "--no-judge", "-q",
            "--out", str(tmp_path / "run")]


def _settings(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("settings: {embedder: hash}\n")
    return ["--config", str(config)]


def test_ctrl_c_during_run_exits_130_with_the_manifest_marked(tmp_path, monkeypatch, capsys):
    models, _ = stopping_models(allow=3)
    monkeypatch.setattr("memtrace_opt.runner.Models.from_roles", lambda roles, **kw: models)
    assert run_cli(_run_argv(tmp_path) + _settings(tmp_path)) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted: ") and "--resume" in err and "Traceback" not in err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    monkeypatch.undo()
    assert run_cli(_run_argv(tmp_path) + _settings(tmp_path)) == 2  # the same command without --resume says so
    assert "--resume" in capsys.readouterr().err
    assert run_cli(_run_argv(tmp_path) + _settings(tmp_path) + ["--resume"]) == 0


def test_a_run_whose_calls_keep_failing_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("memtrace_opt.runner.Models.from_roles", lambda roles, **kw: failing_models())
    assert run_cli(_run_argv(tmp_path) + _settings(tmp_path)) == 1
    assert "in a row" in capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "failed"


def test_ctrl_c_in_any_other_command_exits_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("memtrace_opt.cli.report_cmd.report", interrupted)
    assert run_cli(["report", str(tmp_path)]) == 130
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("sesions: 1-2\n", "sesions: unknown key; did you mean 'sessions'?"),
    ("limit: lots\n", "limit: expected an integer, got str 'lots'"),
    ("settings: {top_k: eight}\n", "settings.top_k: expected an integer, got str 'eight'"),
    ("settings: {topk: 8}\n", "settings.topk: unknown setting of rag; did you mean 'top_k'?"),
    ("optimize: {rouns: 2}\n", "optimize.rouns: unknown key; did you mean 'rounds'?"),
])
def test_a_bad_config_is_one_line_naming_the_key(text, message, tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("system: rag\n" + text)
    assert run_cli(["run", "--config", str(config), "--lm", "fake", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert message in err
    assert not (tmp_path / "r").exists()


def test_an_empty_slice_exits_2(tmp_path, capsys):
    assert run_cli(["run", "--system", "rag", "--lm", "fake", "--sessions", "7", "--out", str(tmp_path / "r")]) == 2
    assert "selects no questions" in capsys.readouterr().err


# every command that uses a model role checks each role it will use (one short call) before its job; RUN is a
# directory, OUT one that must not be written
ROLE_CHECKS = {
    "run": (["run", "--system", "rag", "--lm", "fake", "--judge", "--out", "OUT"], "judge"),
    "optimize": (["optimize", "--system", "rag", "--lm", "fake", "--out", "RUN"], "reflection"),
    "compare": (["compare", "--system", "rag", "--lm", "fake", "--optimizers", "mipro", "--out", "OUT"], "attributor"),
    "attribute": (["attribute", "RUN", "--method", "graphtrace", "--lm", "fake"], "attributor"),
    "attribute counterfactual": (["attribute", "RUN", "--method", "counterfactual", "--attributor-lm", "fake"],
                                 "task"),
    "bench build": (["bench", "build", "-s", "rag", "--out", "OUT"], "task"),
    "bench eval": (["bench", "eval", "RUN", "-m", "lineage", "-m", "all_at_once", "--lm", "fake"], "attributor"),
}
ROLE_FLAGS = {"task": ("--lm", "--lm-api-base"), "judge": ("--judge-lm", "--judge-api-base"),
              "reflection": ("--reflection-lm", "--reflection-api-base"),
              "attributor": ("--attributor-lm", "--attributor-api-base")}


@pytest.mark.parametrize("name", ROLE_CHECKS)
def test_a_model_that_cannot_answer_exits_2_naming_the_role(name, tmp_path, closed_api_base, capsys):
    argv, role = ROLE_CHECKS[name]
    out = tmp_path / "out"
    argv = [{"RUN": str(tmp_path), "OUT": str(out)}.get(a, a) for a in argv]
    model_flag, base_flag = ROLE_FLAGS[role]
    assert run_cli([*argv, model_flag, "openai/x", base_flag, closed_api_base]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert f"error: {role} model openai/x at {closed_api_base} did not answer a test call" in err
    assert not out.exists()  # nothing written: the check comes before the job


def test_ctrl_c_during_optimize_exits_130_with_the_manifest_marked(tmp_path, monkeypatch, capsys):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("memtrace_opt.optimizers.loop.teleprompter.MemTraceOptimizer.compile", interrupted)
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--out", str(tmp_path / "opt")] + _settings(tmp_path)
    assert run_cli(argv) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("interrupted: ") and "Traceback" not in err  # after the progress lines
    assert json.loads((tmp_path / "opt" / "manifest.json").read_text())["status"] == "interrupted"
