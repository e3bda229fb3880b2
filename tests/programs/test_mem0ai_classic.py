"""`--system mem0ai` over Mem0 1.0.x, the classic pipeline: fact extraction, then the ADD / UPDATE / DELETE / NONE
decision, each an op on the scripted LM; updates are new versions of Mem0's memory, deletes mark it deleted.
One mem0ai version is installed at a time: .ci/run runs this file with 1.0.x apart."""

from __future__ import annotations

import json

import dspy
import pytest
from mem0ai_kit import KeptMemory, blamed, planted_skills, without
from required import need_mem0ai

from memtrace_opt.attribution import GraphView
from memtrace_opt.programs.mem0ai._library import import_mem0
from memtrace_opt.programs.mem0ai.session import session_of
from memtrace_opt.testing import fake_lm
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import trace_conversation

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
MERGE = "Merge a new fact into the existing memory it adds to (UPDATE)."


@pytest.fixture(autouse=True)
def mem0ai_1_0() -> str:
    return need_mem0ai("1.0.")


def _merging() -> KeptMemory:
    prompt = import_mem0().configs.prompts.DEFAULT_UPDATE_MEMORY_PROMPT
    return KeptMemory(KeptMemory.Config(custom_update_memory_prompt=f"{prompt}\n{MERGE}"))


def test_two_calls_per_add_and_every_version_mem0_keeps(sample):
    program = _merging()
    assert program.mem0_config() == {"custom_update_memory_prompt": program.update_decision.instruction.strip()}
    with dspy.context(lm=fake_lm(default_skills())):
        traced = trace_conversation(program, sample, sample.questions[:2])
    graph, view = traced.graph(), None
    view = GraphView(graph)
    memory = session_of(program.kept).memory
    versions: dict[str, list[str]] = {}
    for node, attrs in graph.nodes(data=True):
        if node.startswith("mem:"):
            versions.setdefault(attrs["unit_id"], []).append(node)
    events = {unit: [h["event"] for h in memory.history(unit)] for unit in versions}
    assert all(len(nodes) == len(events[unit]) for unit, nodes in versions.items())
    assert any("UPDATE" in e for e in events.values()) and any("DELETE" in e for e in events.values())
    for unit, history in events.items():
        last = max(versions[unit], key=lambda n: graph.nodes[n]["version"])
        assert graph.nodes[last]["deleted"] == (history[-1] == "DELETE")
        for node in versions[unit]:
            if graph.nodes[node]["version"] > 1:  # each later version was decided by the update decision call
                writer = next(graph.predecessors(node))
                assert graph.nodes[view.decider(writer)]["op"] == "mem0ai.update_decision"
    decisions = [n for n, a in graph.nodes(data=True) if a.get("op") == "mem0ai.update_decision"]
    facts = [n for n, a in graph.nodes(data=True) if a.get("name") == "facts"]
    assert decisions and any(graph.has_edge(var, op) for var in facts for op in decisions)
    assert traced.op_counts["mem0ai.extract_facts"] == traced.op_counts["mem0ai.add"]


def test_a_fact_the_decision_skips_is_blamed_on_the_update_decision(tmp_path):
    dog, graph = blamed(tmp_path / "run", planted_skills("mem0ai.update_decision", without("Biscuit")),
                        "mem0ai:sample-1:q0")  # "What is the name of Theo's dog?"
    assert (dog.error_type, dog.op, dog.predictor) == ("UpdateError", "mem0ai.update_decision", "update_decision.predict")
    assert any("Biscuit" in fact for fact in graph.nodes[dog.op_id]["inputs"]["facts"])
    dropped = [d for a in graph.nodes.values() if a.get("name") == "dropped" for d in a["value"]]
    assert all("Biscuit" not in json.dumps(d) for d in dropped)  # skipped by the LM, not dropped by Mem0
