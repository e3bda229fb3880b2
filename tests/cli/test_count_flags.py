"""Count flags (threads, limits, call budgets, ...) refuse a value below their least meaningful one: a usage error,
one line on stderr and exit 2, before any work starts."""

from __future__ import annotations

import pytest
import typer

from memtrace_opt.cli import app, run_cli

ANY_VALUE = {"--seed"}  # the seeds take any integer


def _numeric_options(command=None, path=()):
    """(command path, option) for every int or float option of every command."""
    command = command or typer.main.get_command(app)
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _numeric_options(sub, (*path, name))
        return
    for param in command.params:
        if param.type_descriptor.annotation in (int, float):
            yield " ".join(path), param


def test_every_count_flag_has_a_least_value():
    options = {(path, param.opts[0]): param for path, param in _numeric_options() if param.opts[0] not in ANY_VALUE}
    assert {("run", "--threads"), ("attribute", "--limit"), ("bench eval", "--max-calls"), ("optimize", "--rounds"),
            ("optimize", "--per-split"), ("compare", "--budget"), ("compare", "--min-val-gain")} <= set(options)
    assert [key for key, param in options.items() if param.min is None] == []


@pytest.mark.parametrize("argv", [
    ["run", "--system", "rag", "--lm", "fake", "--threads", "-1"],
    ["run", "--system", "rag", "--lm", "fake", "--threads", "0"],
    ["run", "--system", "rag", "--lm", "fake", "--limit", "0"],
    ["attribute", ".", "--method", "lineage", "--threads", "0"],
    ["attribute", ".", "--method", "lineage", "--limit", "-1"],
    ["attribute", ".", "--max-calls", "0"],
    ["bench", "build", "--out", "unused", "--per-kind", "-1"],
    ["bench", "build", "--out", "unused", "--limit", "0"],
    ["bench", "eval", "unused", "--threads", "-2"],
    ["bench", "eval", "unused", "--max-calls", "-1"],
    ["bench", "eval", "unused", "--limit", "0"],
    ["data", "fetch", "locomo", "--timeout", "0"],
    ["serve", ".", "--port", "-1"],
    ["optimize", "--system", "rag", "--lm", "fake", "--threads", "-1"],
    ["optimize", "--system", "rag", "--lm", "fake", "--budget", "-1"],
    ["optimize", "--system", "rag", "--lm", "fake", "--time-budget", "-5"],
    ["optimize", "--system", "rag", "--lm", "fake", "--time-budget", "0"],
    ["optimize", "--system", "rag", "--lm", "fake", "--per-split", "-1"],
    ["optimize", "--system", "rag", "--lm", "fake", "--limit", "0"],
    ["optimize", "--system", "rag", "--lm", "fake", "--rounds", "0"],
    ["optimize", "--system", "rag", "--lm", "fake", "--demos", "-1"],
    ["optimize", "--system", "rag", "--lm", "fake", "--min-val-gain", "1"],
    ["compare", "--system", "rag", "--lm", "fake", "--budget", "-1"],
    ["compare", "--system", "rag", "--lm", "fake", "--budget", "0"],
    ["compare", "--system", "rag", "--lm", "fake", "--time-budget", "-3"],
    ["compare", "--system", "rag", "--lm", "fake", "--threads", "-1"],
    ["compare", "--system", "rag", "--lm", "fake", "--per-split", "-2"],
    ["compare", "--system", "rag", "--lm", "fake", "--patience", "0"],
])
def test_a_count_below_its_least_value_is_a_usage_error(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # nothing may be written, and nothing is there to run on
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: Invalid value for '--") and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, key", [
    ("threads: 0\n", "threads"),
    ("limit: -3\n", "limit"),
    ("optimize: {rounds: 0}\n", "optimize.rounds"),
    ("optimize: {budget: 0}\n", "optimize.budget"),
    ("optimize: {time_budget: 0}\n", "optimize.time_budget"),
    ("optimize: {min_val_gain: 1.0}\n", "optimize.min_val_gain"),
])
def test_a_config_count_below_its_least_value_names_the_key(text, key, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    assert run_cli(["run", "--system", "rag", "--lm", "fake", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: config file {config}: {key}: expected a number"), err


@pytest.mark.parametrize("command", ["optimize", "compare"])
def test_the_loop_flags_take_their_bounds_from_the_config_schema(command):
    """One declaration: each loop flag of `optimize` and `compare` is bounded as the `optimize:` key of its name."""
    from memtrace_opt.config_schema import key_bounds

    params = {param.opts[0]: param for path, param in _numeric_options() if path == command}
    for flag in ("--rounds", "--threads", "--demos", "--min-val-gain", "--time-budget"):
        bounds = key_bounds("optimize." + flag.lstrip("-").replace("-", "_"))
        assert bounds.low is not None and (params[flag].min, params[flag].max) == (bounds.low, bounds.high), flag


@pytest.mark.parametrize("argv", [
    ["optimize", "--time-budget", "0.5", "--min-val-gain", "0", "--demos", "0", "--repairs", "0"],
    ["compare", "--time-budget", "0.5", "--min-val-gain", "0.99", "--budget", "1"],
])
def test_the_least_values_themselves_are_accepted(argv, tmp_path, monkeypatch, capsys):
    """The bounds refuse only what is below them: the parse passes, and the command goes on to need a --system."""
    monkeypatch.chdir(tmp_path)
    assert run_cli(argv) == 2
    assert "give --system" in capsys.readouterr().err
