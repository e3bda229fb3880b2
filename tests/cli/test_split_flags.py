"""The split flags on the command line: a conversation named by two splits is a usage error (exit 2, one line
naming it, no run directory left behind), and a validation set the flags did not name is drawn from other
conversations and said in one line."""

from __future__ import annotations

import json
import logging
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


def test_optimize_without_val_validates_on_another_conversation_and_records_it(tmp_path, caplog):
    data = write_conversations(tmp_path / "three.json")
    out = tmp_path / "opt"
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", str(data), "--train", "c-a", "--test", "c-b",
            *QUICK, "--out", str(out)]
    with caplog.at_level(logging.WARNING):
        assert run_cli(argv) == 0
    splits = json.loads((out / "manifest.json").read_text())["splits"]
    assert [splits[name]["conversations"] for name in ("train", "val", "test")] == [["c-a"], ["c-c"], ["c-b"]]
    assert splits["note"].startswith("--val not given: validating on c-c") and splits["shared_conversations"] == {}
    assert splits["note"] in [record.getMessage() for record in caplog.records]


def test_the_note_reaches_the_terminal_as_one_line(tmp_path):
    """Outside pytest's log capture: the note is a line of its own on stderr, before the run's output."""
    data = write_conversations(tmp_path / "three.json")
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", str(data), "--train", "c-a", "--test", "c-b",
            *QUICK, "--out", str(tmp_path / "opt")]
    done = subprocess.run([sys.executable, "-c", "from memtrace_opt.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("--val not given")]
    assert lines == ["--val not given: validating on c-c, drawn with seed 0 from the 1 conversation(s) outside "
                     "--train and --test"]
