"""The split flags on the command line: a conversation named by two splits is a usage error (exit 2, one line
naming it, no run directory left behind), and a validation set the flags did not name is drawn from other
conversations and said in one line on stderr, however logging is set up."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import pytest
from runfixtures import write_conversations

from memtrace_opt.cli import run_cli

QUICK = ["--rounds", "1", "--candidates", "1", "--minibatch", "2", "--budget", "6", "--attribution", "lineage"]


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(("command", "flags", "named"), [
    ("optimize", ["--train", "c-a", "--val", "c-b", "--test", "c-a"], "'c-a' is named by --train and --test"),
    ("optimize", ["--train", "c-a", "--test", "c-b,c-a"], "'c-a' is named by --train and --test"),
    ("compare", ["--train", "c-a", "--val", "c-b", "--test", "c-b"], "'c-b' is named by --val and --test"),
])
def test_a_conversation_in_two_splits_exits_2_naming_it(command, flags, named, tmp_path, capsys):
    data = write_conversations(tmp_path / "three.json")
    argv = [command, "--system", "rag", "--lm", "fake", "--data", str(data), *flags, "--out", str(tmp_path / "out")]
    assert run_cli(argv) == 2
    assert named in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()  # checked before the run directory is made


NOTE = "--val not given: validating on c-c, drawn with seed 0 from the 1 conversation(s) outside --train and --test"


def note_lines(err: str) -> list[str]:
    """The lines of stderr saying the note (the progress lines start with the time)."""
    return [line for line in err.splitlines() if "--val not given" in line]


def test_optimize_without_val_validates_on_another_conversation_and_records_it(tmp_path, caplog, capsys):
    """With logging set up (here pytest's handler, at INFO), the note is still one line on stderr, from the
    progress reporter, and no record that a handler for warnings or information would show besides."""
    data = write_conversations(tmp_path / "three.json")
    out = tmp_path / "opt"
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", str(data), "--train", "c-a", "--test", "c-b",
            *QUICK, "--out", str(out)]
    with caplog.at_level(logging.INFO):
        assert run_cli(argv) == 0
    splits = json.loads((out / "manifest.json").read_text())["splits"]
    assert [splits[name]["conversations"] for name in ("train", "val", "test")] == [["c-a"], ["c-c"], ["c-b"]]
    assert splits["note"] == NOTE and splits["shared_conversations"] == {}
    assert [line.split(" ", 1)[1] for line in note_lines(capsys.readouterr().err)] == [NOTE]
    assert [r.levelname for r in caplog.records if r.getMessage() == NOTE] == []


@pytest.mark.parametrize(("setup", "quiet", "said"), [
    ("", [], rf"\d\d:\d\d:\d\d {re.escape(NOTE)}"),  # the progress lines' note
    ("import logging; logging.basicConfig(level=logging.INFO); ", [], rf"\d\d:\d\d:\d\d {re.escape(NOTE)}"),
    ("import logging; logging.basicConfig(level=logging.ERROR); ", [], rf"\d\d:\d\d:\d\d {re.escape(NOTE)}"),
    ("", ["--quiet"], re.escape(NOTE)),  # no progress shown: a logged warning, which Python prints as it is
], ids=["no logging", "info on stderr", "errors only", "quiet"])
def test_the_note_reaches_the_terminal_as_one_line(setup, quiet, said, tmp_path):
    """Outside pytest's capture, with no logging set up, with logging set up (all but debug on stderr, or errors only),
    and with --quiet: the note is one line of its own on stderr, before the run's output."""
    data = write_conversations(tmp_path / "three.json")
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", str(data), "--train", "c-a", "--test", "c-b",
            *QUICK, *quiet, "--out", str(tmp_path / "opt")]
    done = subprocess.run([sys.executable, "-c", setup + "from memtrace_opt.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = note_lines(done.stderr)
    assert len(lines) == 1 and re.fullmatch(said, lines[0]), done.stderr[-2000:]


@pytest.mark.parametrize("command", ["optimize", "compare"])
def test_a_configs_split_keys_are_read_as_the_flags_are(command, tmp_path):
    """`train`, `val`, `test` (a string or a YAML list), `seed` and `out` from --config, in both commands."""
    data = write_conversations(tmp_path / "three.json", ("c-a", "c-b", "c-c", "c-d"))
    out = tmp_path / "out"
    config = tmp_path / "splits.yaml"
    config.write_text(f"system: rag\ndata: {data}\ntrain: [c-a, c-d]\nval: c-b\ntest: [c-c]\nseed: 3\nout: {out}\n"
                      "optimize: {attribution: lineage}\n")
    own = {"optimize": QUICK, "compare": ["--optimizers", "bootstrap", "--budget", "6"]}[command]
    assert run_cli([command, "--lm", "fake", "--config", str(config), *own]) == 0
    written = json.loads((out / ("manifest.json" if command == "optimize" else "compare.json")).read_text())
    splits = written["splits"]
    assert [splits[name]["conversations"] for name in ("train", "val", "test")] == [["c-a", "c-d"], ["c-b"], ["c-c"]]
    if command == "compare":
        assert written["loop"]["seed"] == 3
    else:
        config_written = (out / "config.yaml").read_text()
        assert "seed: 3" in config_written and "attribution: lineage" in config_written
