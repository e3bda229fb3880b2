"""`memtrace run --threads N` against a served model: conversations overlap on the server, each with its own
memory state, and the run directory holds what one thread writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtrace_opt.data import SAMPLE_PATH
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.rundir import RunDir
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.testing.openai_server import FakeOpenAIServer
from memtrace_opt.tracing import load_graph

MARK = "[B] "


def _two_conversations(path: Path) -> Path:
    """The packaged sample twice: sample-1 as shipped, sample-2 with every turn marked."""
    [first] = json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
    second = json.loads(json.dumps(first))
    second["sample_id"] = "sample-2"
    for turns in second["conversation"].values():
        if isinstance(turns, list):
            for turn in turns:
                turn["text"] = MARK + turn["text"]
    path.write_text(json.dumps([first, second]), encoding="utf-8")
    return path


def _run(tmp_path: Path, data: Path, server: FakeOpenAIServer, threads: int, name: str):
    roles = ModelRoles(task=ModelSpec(model="openai/fake", api_base=server.api_base, extra={"cache": False}))
    request = RunRequest(system="mem0", data=str(data), out=tmp_path / name, roles=roles, judge=False,
                         threads=threads, program_settings={"embedder": "hash"})
    return run_system(request, progress=False, models=Models.from_roles(roles))


@pytest.mark.parametrize("threads", [2])
def test_threads_overlap_conversations_on_a_server_each_with_its_own_memory(tmp_path, threads):
    data = _two_conversations(tmp_path / "two.json")
    with FakeOpenAIServer(latency=0.01) as one_at_a_time:
        alone = _run(tmp_path, data, one_at_a_time, 1, "alone")
    with FakeOpenAIServer(latency=0.01) as server:
        parallel = _run(tmp_path, data, server, threads, "parallel")

    assert one_at_a_time.max_in_flight == 1
    assert server.max_in_flight >= 2  # both conversations were at the server at once
    assert len(server.requests) == len(one_at_a_time.requests) > 0
    assert parallel.usage["task"]["calls"] == alone.usage["task"]["calls"] == len(server.requests)

    def answers(summary):
        return sorted((c.question_id, c.prediction, c.correct) for c in RunDir(summary.run_dir).read_cases())

    assert answers(parallel) == answers(alone) and len(answers(parallel)) == 26
    run = RunDir(parallel.run_dir)
    for sample_id, marked in (("sample-1", False), ("sample-2", True)):
        graph = load_graph(run.graph_path(sample_id))
        memories = [str(d["value"]) for _, d in graph.nodes(data=True) if d.get("vtype") == "memory"]
        turns = [str(d["value"]) for _, d in graph.nodes(data=True) if d.get("vtype") == "turn"]
        assert memories and turns
        assert all((MARK in text) == marked for text in turns)  # each graph saw only its own conversation
        if not marked:
            assert not any(MARK.strip() in text for text in memories)  # nor did its memory
    assert run.read_config()["threads"] == threads
