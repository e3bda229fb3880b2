"""`memtrace attribute RUN --method M` on a tiny run directory built by hand."""

from __future__ import annotations

import json

import pytest
from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build
from typer.testing import CliRunner

from memtrace_opt.attribution.runs import read_verdicts
from memtrace_opt.cli import app
from memtrace_opt.cli.attribute_cmd import attribute_command_impl
from memtrace_opt.tracing import save_graph


def case_line(case_id: str, system: str, graph: str, correct: bool = False) -> dict:
    return {"schema_version": 1, "case_id": case_id, "system": system, "dataset": "test", "sample_id": "s1",
            "question_id": QID, "question": QUESTION, "gold": GOLD, "prediction": "Max", "category": "single-hop",
            "evidence": list(EVIDENCE), "abstention": False, "scores": {"f1": 0.0}, "correct": correct,
            "graph": graph, "error": None, "extra": {}}


@pytest.fixture
def run_dir(tmp_path):
    root = tmp_path / "run"
    save_graph(build("mem0", "deletion").graph, root / "graphs" / "mem0.json")
    save_graph(build("rag", "retrieval").graph, root / "graphs" / "rag.json")
    (root / "graphs" / "broken.json").write_text("{")
    lines = [
        case_line("mem0:q1", "mem0", "graphs/mem0.json"),
        case_line("rag:q1", "rag", "graphs/rag.json"),
        case_line("rag:ok", "rag", "graphs/rag.json", correct=True),
        case_line("rag:broken", "rag", "graphs/broken.json"),
        case_line("rag:missing", "rag", "graphs/missing.json"),
    ]
    (root / "cases.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def test_attribute_writes_verdicts_and_resumes(run_dir) -> None:
    result = attribute_command_impl(run_dir, "lineage", embedder="hash", progress=False)
    assert (result.new, result.skipped) == (4, 0)
    verdicts = {v.case_id: v for v in read_verdicts(run_dir / "verdicts.jsonl")}
    assert set(verdicts) == {"mem0:q1", "rag:q1", "rag:broken", "rag:missing"}  # correct cases are skipped
    assert (verdicts["mem0:q1"].op, verdicts["mem0:q1"].error_type) == ("mem0.update_decision", "DeletionError")
    assert (verdicts["rag:q1"].op, verdicts["rag:q1"].error_type) == ("rag.retrieve", "RetrievalError")
    assert "not a readable evolution graph" in verdicts["rag:broken"].error
    assert "no such graph file" in verdicts["rag:missing"].error
    line = json.loads((run_dir / "verdicts.jsonl").read_text().splitlines()[0])
    assert line["schema_version"] == 1 and line["method"] == "lineage"

    again = attribute_command_impl(run_dir, "lineage", embedder="hash", progress=False)
    assert (again.new, again.skipped) == (2, 2)  # the two error verdicts are retried, the others kept
    assert len((run_dir / "verdicts.jsonl").read_text().splitlines()) == 6
    assert {v.case_id for v in again.verdicts} == set(verdicts)


def test_attribute_command_prints_the_distribution(run_dir) -> None:
    result = CliRunner().invoke(app, ["attribute", str(run_dir), "--method", "lineage", "--embedder", "hash", "-q"])
    assert result.exit_code == 0, result.output
    assert "DeletionError" in result.output and "RetrievalError" in result.output
    assert "mem0.update_decision" in result.output and "rag.retrieve" in result.output
    assert "2 could not be attributed" in result.output


def test_attribute_command_with_a_fake_attributor_lm(run_dir) -> None:
    result = CliRunner().invoke(
        app, ["attribute", str(run_dir), "--method", "graphtrace", "--embedder", "hash", "--lm", "fake", "-q"]
    )
    assert result.exit_code == 0, result.output
    verdicts = [v for v in read_verdicts(run_dir / "verdicts.jsonl") if v.method == "graphtrace"]
    assert len(verdicts) == 4
    assert all(v.cost.lm_calls >= 1 for v in verdicts if v.error is None)


def test_an_unknown_method_is_a_one_line_error(run_dir) -> None:
    from memtrace_opt.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["attribute", str(run_dir), "--method", "oracle"])
    assert exit_info.value.code == 2


def test_a_directory_without_cases_is_an_error(tmp_path) -> None:
    from memtrace_opt.errors import MemtraceError

    with pytest.raises(MemtraceError, match="not a run directory"):
        attribute_command_impl(tmp_path, "lineage", progress=False)


@pytest.fixture
def attribute_calls(monkeypatch):
    """`attribute_run` as the command calls it: its keyword arguments, recorded; nothing is attributed."""
    from memtrace_opt.attribution import runs

    calls: list[dict] = []

    def record(run, method, **kwargs):
        calls.append({"method": method, **kwargs})
        return runs.AttributeRunResult(run / "verdicts.jsonl", method, (), (), 0, 0)

    monkeypatch.setattr(runs, "attribute_run", record)
    return calls


@pytest.mark.parametrize(("flags", "confirm"), [([], True), (["--no-confirm"], False)])
def test_graphtrace_gets_a_replay_provider_unless_no_confirm(run_dir, attribute_calls, flags, confirm) -> None:
    (run_dir / "config.yaml").write_text("system: mem0\n")
    result = CliRunner().invoke(app, ["attribute", str(run_dir), "-m", "graphtrace", "--embedder", "hash", "--lm", "fake",
                                      "-q", *flags])
    assert result.exit_code == 0, result.output
    [call] = attribute_calls
    assert call["config"].confirm is confirm
    assert (call["replay_provider"] is not None) is confirm and call["judge"] is None


def test_a_run_that_records_no_system_is_not_replayed(run_dir, attribute_calls) -> None:
    result = CliRunner().invoke(app, ["attribute", str(run_dir), "-m", "graphtrace", "--embedder", "hash", "--lm", "fake",
                                      "-q"])
    assert result.exit_code == 0, result.output
    assert attribute_calls[0]["config"].confirm is True and attribute_calls[0]["replay_provider"] is None


def test_a_judge_role_reaches_the_methods_that_take_it(run_dir, attribute_calls) -> None:
    from memtrace_opt.attribution import LMAnswerJudge

    result = CliRunner().invoke(app, ["attribute", str(run_dir), "-m", "lineage", "--embedder", "hash",
                                      "--judge-lm", "fake", "-q"])
    assert result.exit_code == 0, result.output
    assert isinstance(attribute_calls[0]["judge"], LMAnswerJudge) and attribute_calls[0]["replay_provider"] is None


@pytest.mark.parametrize(("flags", "asked"), [([], False), (["--judge-evidence"], True)])
def test_the_judges_gold_evidence_test_runs_only_when_asked(run_dir, attribute_calls, flags, asked) -> None:
    result = CliRunner().invoke(app, ["attribute", str(run_dir), "-m", "lineage", "--embedder", "hash",
                                      "--judge-lm", "fake", "-q", *flags])
    assert result.exit_code == 0, result.output
    assert attribute_calls[0]["config"].judge_evidence is asked


def test_judge_evidence_without_a_judge_is_a_usage_error(run_dir, attribute_calls, capsys) -> None:
    from memtrace_opt.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["attribute", str(run_dir), "-m", "lineage", "--embedder", "hash", "--judge-evidence", "-q"])
    assert exit_info.value.code == 2 and attribute_calls == []
    assert "--judge-evidence asks the judge role" in capsys.readouterr().err


def test_the_attribute_help_names_the_judges_gold_evidence_test() -> None:
    result = CliRunner().invoke(app, ["attribute", "--help"], env={"COLUMNS": "200"})
    assert "--judge-evidence" in result.output and "Off by default" in result.output
