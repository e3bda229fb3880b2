from __future__ import annotations

import json

import pytest

from memtrace_opt.data import DataSlice
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.metrics import TOKEN_RULE
from memtrace_opt.rundir import RunDir
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.tracing import load_graph, read_events

FAKE = ModelRoles(task=ModelSpec(model="fake"))


@pytest.mark.parametrize("system", ["long_context", "rag", "mem0", "evermemos"])
def test_run_writes_the_run_directory_of_the_design(tmp_path, system):
    request = RunRequest(system=system, data="sample", out=tmp_path / "run", roles=FAKE, judge=False,
                         program_settings={"embedder": "hash"})
    summary = run_system(request, progress=False)

    run = RunDir(summary.run_dir).require()
    cases = run.read_cases()
    assert summary.questions == len(cases) == 13
    assert {c.question_id for c in cases} == {f"sample-1:q{i}" for i in range(13)}
    assert all(c.graph == "graphs/sample-1.json" and c.system == system for c in cases)
    assert summary.correct == sum(c.correct for c in cases)

    graph = load_graph(run.root / cases[0].graph)
    assert graph.graph["system"] == system and graph.graph["sample_id"] == "sample-1"
    assert {f"ans:{c.question_id}" for c in cases} <= set(graph.nodes)
    events = read_events(run.events_path("sample-1"))
    assert sum(1 for e in events if e.type == "answer") == 13

    config = run.read_config()
    assert config["system"] == system and config["models"]["task"]["model"] == "fake"
    assert config["program"]["embedder"] == "hash"
    manifest = run.read_manifest()
    assert manifest["counts"]["questions"] == 13
    assert manifest["usage"]["task"]["calls"] > 0
    assert manifest["accuracy"]["overall"]["count"] == 13
    assert manifest["rule"] == manifest["accuracy"]["rule"] == TOKEN_RULE  # which rule scored the table
    assert manifest["counts"]["bare_numbers"] == manifest["accuracy"]["overall"]["bare_numbers"] == 0


def test_slicing_and_judge_scores_reach_the_cases(tmp_path):
    models = Models.from_roles(FAKE)
    request = RunRequest(system="rag", data="sample", out=tmp_path / "run", roles=FAKE, judge=True,
                         data_slice=DataSlice(sessions=(1, 1)), program_settings={"embedder": "hash"})
    summary = run_system(request, progress=False, models=models)
    cases = RunDir(summary.run_dir).read_cases()
    assert cases and all(all(e.startswith("D1:") for e in c.evidence) for c in cases)
    judged = [c for c in cases if not c.abstention]
    assert all(c.scores["judge"] in (0.0, 1.0) for c in judged)
    assert all(c.correct == bool(c.scores["judge"]) for c in judged)
    assert models.usage.snapshot()["judge"].calls == len(judged)


def test_an_existing_run_is_not_overwritten(tmp_path):
    request = RunRequest(system="rag", data="sample", out=tmp_path / "run", roles=FAKE, judge=False,
                         data_slice=DataSlice(limit=1), program_settings={"embedder": "hash"})
    run_system(request, progress=False)
    from memtrace_opt.errors import MemtraceError

    with pytest.raises(MemtraceError, match="already holds a run"):
        run_system(request, progress=False)
    assert len(json.loads(json.dumps(RunDir(request.out).read_cases()[0].to_dict()))) > 5
