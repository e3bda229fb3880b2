from __future__ import annotations

import pytest

from memtrace_opt.errors import MemtraceError
from memtrace_opt.rundir import CaseRecord, RunDir, read_jsonl


def _case(i: int) -> CaseRecord:
    return CaseRecord(
        case_id=f"mem0:s:q{i}", system="mem0", dataset="sample", sample_id="s", question_id=f"s:q{i}",
        question="Where does Maya live?", gold="Denver", prediction="Boston", category="single-hop",
        evidence=["D3:2"], abstention=False, scores={"f1": 0.0, "bleu1": 0.0, "judge": 0.0}, correct=False,
        graph="graphs/s.json",
    )


def test_cases_append_and_read_back_identically(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.append_case(_case(0))
    run.append_case(_case(1))
    back = run.read_cases()
    assert [c.to_dict() for c in back] == [_case(0).to_dict(), _case(1).to_dict()]
    assert back[0].to_dict()["schema_version"] == 1


def test_a_truncated_last_line_is_skipped_but_a_bad_middle_line_is_an_error(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.append_case(_case(0))
    with run.cases_path.open("a") as handle:
        handle.write('{"case_id": "cut')
    assert len(run.read_cases()) == 1
    with run.cases_path.open("a") as handle:
        handle.write("\n" + _case(1).to_dict().__repr__() + "\n")
    with pytest.raises(MemtraceError, match="line 2"):
        read_jsonl(run.cases_path)


def test_manifest_and_config_round_trip_byte_for_byte(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.write_manifest({"usage": {"task": {"calls": 3}}, "counts": {"questions": 2}})
    first = run.manifest_path.read_bytes()
    manifest = run.read_manifest()
    manifest.pop("schema_version")
    run.write_manifest(manifest)
    assert run.manifest_path.read_bytes() == first
    run.write_config({"system": "rag", "models": {"task": {"model": "embedded"}}})
    assert run.read_config() == {"schema_version": 1, "system": "rag", "models": {"task": {"model": "embedded"}}}


def test_a_run_directory_is_never_overwritten(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.append_case(_case(0))
    with pytest.raises(MemtraceError, match="already holds a run"):
        RunDir(tmp_path / "run").create()
    with pytest.raises(MemtraceError, match="not a run directory"):
        RunDir(tmp_path / "elsewhere").require()
