"""The settings tree: one name per knob from the flag to the consumer; the study name stays what it was."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from memtrace_opt.cli import app
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import LoopSettings
from memtrace_opt.optimizers.core.knobs import knobs

FLAGS = ["--rounds", "--patience", "--minibatch", "--budget", "--time-budget", "--local-check", "--threads", "--repairs",
         "--scoped-replay", "--candidates",
         "--pattern-rules", "--demos", "--demo-pool", "--demo-budget", "--compact-demos", "--validate-ties",
         "--min-val-gain", "--min-val-questions", "--local-objective", "--local-margin", "--local-calls",
         "--validate-top", "--settings", "--settings-trials", "--cost-limit"]


def test_each_knob_is_named_as_its_flag():
    assert [k.flag.split("/")[0] for k in knobs(LoopSettings)] == FLAGS
    assert all(k.flag.split("/")[0] == "--" + k.name.replace("_", "-") for k in knobs(LoopSettings))


def test_the_tree_is_built_from_knob_names_and_written_flat():
    settings = LoopSettings.of(rounds=4, candidates=2, demos=0, demo_budget=9000, min_val_questions=1)
    assert (settings.rounds, settings.proposal.candidates, settings.demo.demos, settings.demo.demo_budget,
            settings.acceptance.min_val_questions) == (4, 2, 0, 9000, 1)
    assert LoopSettings.from_dict(settings.to_dict()) == settings
    assert {"rounds", "demos", "demo_budget", "min_val_questions"} <= set(settings.to_dict())


def test_a_name_an_earlier_release_used_is_an_unknown_setting():
    with pytest.raises(ConfigError, match="unknown setting 'max_rounds'"):
        LoopSettings.of(max_rounds=4)


def test_an_unknown_or_bad_setting_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown setting 'rouds'"):
        LoopSettings.of(rouds=3)
    with pytest.raises(ConfigError, match="demo_budget"):
        LoopSettings.of(demo_budget=0)


@pytest.mark.parametrize("command", ["optimize", "compare"])
def test_the_commands_flags_are_generated_from_the_knobs(command):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "240", "NO_COLOR": "1"})
    assert result.exit_code == 0
    shown = set(re.findall(r"--[a-z][a-z-]+", result.output))
    own = {"--budget", "--time-budget"} if command == "compare" else set()  # compare's budget is per optimizer
    assert set(FLAGS) - own <= shown and "--full-demos" in shown and "--no-local-check" in shown


def test_the_config_files_optimize_section_knows_every_loop_knob():
    from memtrace_opt.config_schema import OptimizeSection

    assert {k.name for k in knobs(LoopSettings)} <= set(OptimizeSection.model_fields)
