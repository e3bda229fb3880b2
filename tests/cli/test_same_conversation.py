"""One conversation: train, val and test split its questions and share its memory. The command says so in one
line, and the test's figure is labelled "same-conversation questions", not held-out, wherever it is written:
the closing lines, the manifest, compare.json and compare.md, and the report."""

from __future__ import annotations

import json

from runfixtures import write_conversations

from memtrace_opt.cli import run_cli
from memtrace_opt.optimizers.evaluation.splits import HELD_OUT, SAME_CONVERSATION
from memtrace_opt.report import build_payload, load_run

QUICK = ["--rounds", "1", "--candidates", "1", "--minibatch", "2", "--budget", "6", "--attribution", "lineage"]


def one_conversation(tmp_path) -> str:
    """A file of three conversations, one of them chosen, with questions enough to split three ways."""
    data = write_conversations(tmp_path / "three.json")
    records = json.loads(data.read_text())
    records[0]["qa"] = records[0]["qa"] * 3  # six questions: two a split
    data.write_text(json.dumps(records))
    return f"{data}:c-a"


def said_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "same-conversation questions, not held-out" in line]


def test_optimize_on_one_conversation_says_so_and_labels_the_test(tmp_path, capsys):
    out = tmp_path / "opt"
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", one_conversation(tmp_path), *QUICK,
            "--out", str(out)]
    assert run_cli(argv) == 0
    printed = capsys.readouterr()
    assert len(said_lines(printed.err)) == 1  # one line, even with no progress display
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["test"]["label"] == manifest["splits"]["test_label"] == SAME_CONVERSATION
    closing = [line for line in printed.out.splitlines() if line.startswith(SAME_CONVERSATION)]
    assert len(closing) == 1 and "not held out" in closing[0] and HELD_OUT not in printed.out
    assert build_payload(load_run(out))["optimize"]["test"]["label"] == SAME_CONVERSATION


def test_compare_on_one_conversation_labels_its_table_and_json(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--system", "rag", "--lm", "fake", "--data", one_conversation(tmp_path), "--optimizers",
            "bootstrap", "--budget", "6", "--out", str(out)]
    assert run_cli(argv) == 0
    printed = capsys.readouterr()
    assert len(said_lines(printed.err)) == 1
    written = json.loads((out / "compare.json").read_text())
    assert written["test_label"] == written["splits"]["test_label"] == SAME_CONVERSATION
    table = (out / "compare.md").read_text()
    assert "| same-conversation before | same-conversation after |" in table and "held-out" not in table
    assert "same-conversation questions (not held out" in " ".join(printed.out.split())


def test_conversations_apart_keep_the_held_out_label(tmp_path, capsys):
    data = write_conversations(tmp_path / "three.json")
    out = tmp_path / "opt"
    argv = ["optimize", "--system", "rag", "--lm", "fake", "--data", str(data), "--train", "c-a", "--val", "c-b",
            "--test", "c-c", *QUICK, "--out", str(out)]
    assert run_cli(argv) == 0
    assert json.loads((out / "manifest.json").read_text())["test"]["label"] == HELD_OUT
    assert any(line.startswith(f"{HELD_OUT} ") for line in capsys.readouterr().out.splitlines())
    assert build_payload(load_run(out))["optimize"]["test"]["label"] == HELD_OUT
