"""Bad dataset files give one-line DatasetErrors naming the file and record; the CLI exits 2 with no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.data import SAMPLE_PATH, load_dataset, load_locomo, load_longmemeval
from memtrace_opt.errors import DatasetError

REPO_ROOT = Path(__file__).resolve().parents[2]


def error_of(path: Path, loader=load_dataset) -> str:
    with pytest.raises(DatasetError) as info:
        loader(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes(SAMPLE_PATH.read_bytes()[:700])
    message = error_of(path)
    assert message.startswith("cut.json: not valid JSON") and "truncated" in message


def test_wrong_top_level_type(write_json) -> None:
    message = error_of(write_json("obj.json", {"sample_id": "x"}))
    assert message == "obj.json: expected a JSON list of dataset records at the top level, got an object"
    assert error_of(write_json("empty.json", [])) == "empty.json: contains no records"


def test_unknown_format(write_json) -> None:
    assert error_of(write_json("u.json", [{"foo": 1}])).startswith("u.json: record 0: unknown dataset format")


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in error_of(tmp_path / "absent.json")
    assert "is a directory" in error_of(tmp_path)


def test_locomo_record_problems(write_json, make_locomo_record) -> None:
    good = make_locomo_record("conv-a")

    def broken(change) -> str:
        record = make_locomo_record("conv-b")
        change(record)
        return error_of(write_json("locomo10.json", [good, record]), load_locomo)

    assert broken(lambda r: r["conversation"].__setitem__("session_2", {"x": 1})) == (
        "locomo10.json: record 1 (conv-b): session_2 is not a list"
    )
    assert broken(lambda r: r.pop("qa")) == "locomo10.json: record 1 (conv-b): missing key 'qa'"
    assert broken(lambda r: r.pop("sample_id")) == "locomo10.json: record 1: missing key 'sample_id'"
    assert broken(lambda r: r["conversation"]["session_1"][1].pop("text")) == (
        "locomo10.json: record 1 (conv-b): session_1 turn 1 is missing 'text'"
    )
    assert (
        broken(lambda r: r["qa"][0].pop("answer"))
        == "locomo10.json: record 1 (conv-b): qa 0 is missing 'answer'"
    )
    assert broken(lambda r: r["qa"][0].__setitem__("evidence", "D1:1")) == (
        "locomo10.json: record 1 (conv-b): qa 0 evidence is a string, not a list"
    )
    assert broken(lambda r: r["qa"][0].__setitem__("category", "4")) == (
        "locomo10.json: record 1 (conv-b): qa 0 is missing an integer 'category'"
    )
    assert broken(lambda r: r.__setitem__("sample_id", "conv-a")) == (
        "locomo10.json: record 1 (conv-a): duplicate sample_id"
    )
    assert (
        error_of(write_json("l.json", [good, "oops"]), load_locomo)
        == "l.json: record 1: expected an object, got a string"
    )


def test_longmemeval_record_problems(write_json, make_longmemeval_record) -> None:
    record = make_longmemeval_record("q9")
    record["haystack_sessions"][1] = "not a session"
    assert error_of(write_json("lme.json", [make_longmemeval_record("q1"), record]), load_longmemeval) == (
        "lme.json: record 1 (q9): haystack session 1 (earlier) is not a list"
    )
    record = make_longmemeval_record("q9")
    del record["haystack_sessions"]
    assert error_of(write_json("lme.json", [record]), load_longmemeval) == (
        "lme.json: record 0 (q9): missing key 'haystack_sessions'"
    )
    record = make_longmemeval_record("q9")
    record["haystack_dates"].pop()
    assert "differ in length (1, 2, 2)" in error_of(write_json("lme.json", [record]), load_longmemeval)
    record = make_longmemeval_record("q9")
    record["haystack_sessions"][0][1] = {"role": "assistant"}
    assert error_of(write_json("lme.json", [record]), load_longmemeval) == (
        "lme.json: record 0 (q9): haystack session 0 (later) turn 1 is missing 'content'"
    )


def test_cli_reports_a_bad_file_in_one_line(write_json, make_locomo_record, capsys) -> None:
    record = make_locomo_record("conv-30")
    record["conversation"]["session_2"] = "nope"
    path = write_json("bad.json", [make_locomo_record("conv-26"), record])
    with pytest.raises(SystemExit) as info:
        main(["data", "stats", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == "error: bad.json: record 1 (conv-30): session_2 is not a list\n"


def test_cli_subprocess_has_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "truncated.json"
    path.write_bytes(SAMPLE_PATH.read_bytes()[:300])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", "from memtrace_opt.cli import main; main()", "data", "stats", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: truncated.json: not valid JSON")
