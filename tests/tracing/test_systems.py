"""The graph of each built-in system on a small conversation with the fake LM."""

from __future__ import annotations

import json

import dspy
import networkx as nx
import pytest
from toy_memory import answer_skill, extract_skill, make_question, make_session

from memtrace_opt.data import Conversation, load_sample
from memtrace_opt.programs.evermemos import EverMemOS, EverMemOSConfig
from memtrace_opt.programs.long_context import LongContextConfig, LongContextMemory
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory
from memtrace_opt.programs.rag import RAGConfig, RAGMemory
from memtrace_opt.testing import FakeCall, FakeEngine, Skill, fake_lm
from memtrace_opt.tracing import (
    evidence_path,
    graph_from_json,
    graph_to_json,
    op_nodes,
    replay,
    trace_conversation,
    unit_life,
)


def mem0_facts(call: FakeCall) -> dict:
    lines = [ln for ln in call.inputs["new_messages"].splitlines() if not ln.startswith("[")]
    return {"facts": [ln.split(": ", 1)[1] for ln in lines]}


def mem0_decide(call: FakeCall) -> dict:
    existing = json.loads(call.inputs["existing_memories"])
    actions = []
    for fact in json.loads(call.inputs["new_facts"]):
        home = next((m["id"] for m in existing if "lives in" in m["text"]), None)
        dog = next((m["id"] for m in existing if "dog" in m["text"]), None)
        if fact.startswith("Alice moved to") and home is not None:
            actions.append({"event": "UPDATE", "id": home, "text": "Alice lives in " + fact.rsplit(" ", 1)[1]})
        elif "gave away" in fact and dog is not None:
            actions.append({"event": "DELETE", "id": dog, "text": ""})
        else:
            actions.append({"event": "ADD", "id": "", "text": fact})
    return {"memory_actions": actions}


def mem0_conversation() -> Conversation:
    sessions = (
        make_session(1, "1:00 pm on 8 May, 2023", [("Alice", "Alice lives in Berlin"), ("Bob", "Bob has a dog named Rex")]),
        make_session(2, "2:00 pm on 9 June, 2023", [("Alice", "Alice moved to Paris"), ("Bob", "Bob gave away his dog")]),
    )
    questions = (
        make_question("q-home", "Where does Alice live?", "Paris", ("D1:1", "D2:1")),
        make_question("q-dog", "What is the name of Bob's dog?", "Rex", ("D1:2",)),
    )
    return Conversation("m-1", ("Alice", "Bob"), sessions, questions, "toy")


@pytest.fixture
def mem0_run():
    engine = FakeEngine(skills=[Skill(("facts",), mem0_facts), Skill(("memory_actions",), mem0_decide),
                                Skill(("answer",), answer_skill)])
    program = Mem0Memory(Mem0Config(embedder="hash"))
    conv = mem0_conversation()
    with dspy.context(lm=fake_lm(engine=engine)):
        result = trace_conversation(program, conv, conv.questions)
    return program, conv, engine, result


def test_mem0_update_and_delete_are_version_chains(mem0_run):
    _, _, _, result = mem0_run
    G = result.graph()
    assert G.graph["system"] == "mem0"
    applies = op_nodes(G, "mem0.apply")
    update = applies[1]
    assert G.has_edge("mem:memory-1@1", update, key="input") and G.has_edge(update, "mem:memory-1@2", key="output")
    assert G.nodes["mem:memory-1@2"]["value"] == "Alice lives in Paris"
    assert G.has_edge("mem:memory-2@1", update, key="input") and G.has_edge(update, "mem:memory-2@2", key="output")
    assert G.nodes["mem:memory-2@2"]["deleted"] is True
    assert unit_life(G, "memory-2").deleted and unit_life(G, "memory-1").ops == [applies[0], update]
    # the decision that caused the update feeds the apply op, and is fed by the extraction's facts
    decision = op_nodes(G, "mem0.update_decision")[1]
    seq = G.nodes[decision]["seq"]
    assert G.has_edge(f"var:{seq}:memory_actions", update, key="input")
    extract_seq = G.nodes[op_nodes(G, "mem0.extract_facts")[1]]["seq"]
    assert G.has_edge(f"var:{extract_seq}:facts", decision, key="input")
    # the similarity search read the units the decision compared against
    search = op_nodes(G, "mem0.search_similar")[1]
    assert {"mem:memory-1@1", "mem:memory-2@1"} <= set(G.predecessors(search))


def test_mem0_retrieval_and_answer_are_linked_to_the_units(mem0_run):
    _, _, _, result = mem0_run
    G = result.graph()
    retrieve, answer = op_nodes(G, "mem0.retrieve")[0], op_nodes(G, "mem0.answer")[0]
    read = {u for u in G.predecessors(retrieve) if u.startswith("mem:")}
    assert read == {"mem:memory-1@2"}  # the deleted dog is never retrieved
    assert read <= set(G.predecessors(answer)) and G.has_edge(answer, "ans:q-home", key="output")
    assert result.answers["q-home"] == "Alice lives in Paris"
    path = evidence_path(G, "q-home")
    assert path.reached == ("turn:D1:1", "turn:D2:1")
    assert {"mem:memory-1@1", "mem:memory-1@2", update_of(G), retrieve, answer} <= set(path.nodes)
    # the dog's unit was deleted and never retrieved (the graph is op-granular: the apply op that deleted it
    # also updated Alice's home, so a path through that op exists; the unit's life says what happened)
    assert not any(G.has_edge(f"mem:memory-2@{v}", retrieve, key="input") for v in (1, 2))
    assert [v.deleted for v in unit_life(G, "memory-2").versions] == [False, True]


def update_of(G):
    return op_nodes(G, "mem0.apply")[1]


def test_mem0_replay_without_change_makes_no_lm_call(mem0_run):
    program, conv, engine, result = mem0_run
    engine.reset()
    with dspy.context(lm=fake_lm(engine=engine)):
        again = replay(program, conv, conv.questions, result.events)
    assert again.answers == result.answers and again.lm_calls == 0 and engine.calls == []
    assert graph_to_json(graph_from_json(graph_to_json(again.graph))) == graph_to_json(again.graph)


def _sample():
    conv = load_sample().conversations[0]
    return conv, list(conv.questions[:4])


SKILLS = [Skill(("facts",), extract_skill), Skill(("answer",), answer_skill)]


@pytest.mark.parametrize(
    ("program", "retrieve_op"),
    [
        (LongContextMemory(LongContextConfig()), "long_context.retrieve"),
        (RAGMemory(RAGConfig(embedder="hash", chunk_tokens=64, top_k=3)), "rag.retrieve"),
        (EverMemOS(EverMemOSConfig(embedder="hash", top_k=4, merge_top_n=4)), "evermemos.retrieve"),
        (Mem0Memory(Mem0Config(embedder="hash")), "mem0.retrieve"),
    ],
    ids=lambda p: getattr(p, "name", p),
)
def test_every_system_builds_a_connected_trace(program, retrieve_op):
    conv, questions = _sample()
    with dspy.context(lm=fake_lm(SKILLS)):
        result = trace_conversation(program, conv, questions)
    G = result.graph()
    system = program.name
    assert nx.is_directed_acyclic_graph(G)
    ops = op_nodes(G)
    assert ops == [f"op:{i}" for i in range(len(ops))]
    assert all(G.nodes[n]["op"].startswith(system + ".") for n in ops)
    assert not result.failures
    for q in questions:
        answer_ops = list(G.predecessors(f"ans:{q.question_id}"))
        assert len(answer_ops) == 1 and G.nodes[answer_ops[0]]["op"] == f"{system}.answer"
        answer = answer_ops[0]
        assert G.has_edge(f"q:{q.question_id}", answer, key="input")
        assert G.nodes[answer]["lm_calls"] and G.nodes[answer]["predictor"] == "answer.predict"
        context_units = {u for u in G.predecessors(answer) if u.startswith("mem:")}
        assert context_units, f"{system}: the answer op saw no memory"
        retrieves = [n for n in nx_ancestor_ops(G, answer) if G.nodes[n]["op"] == retrieve_op]
        assert retrieves, f"{system}: no retrieval upstream of the answer"
        # every unit the answer saw is upstream through a retrieval or was written before it
        for unit in context_units:
            assert any(G.has_edge(unit, r, key="input") for r in retrieves) or system == "evermemos"
    # every memory version was written by an op (no orphan units)
    for node, data in G.nodes(data=True):
        if data.get("vtype") == "memory":
            assert any(G.nodes[p]["kind"] == "op" for p in G.predecessors(node)), node
    if system in ("long_context", "rag"):  # raw turns are stored: the evidence turn is on a path to the answer
        assert evidence_path(G, questions[0].question_id).reached or system == "rag"
    # an unchanged replay reproduces every answer without one LM call, and the same graph shape
    with dspy.context(lm=fake_lm(SKILLS)):
        again = replay(program, conv, questions, result.events)
    assert again.answers == result.answers and again.lm_calls == 0 and again.rerun_ops == 0
    assert [again.graph.nodes[n]["op"] for n in op_nodes(again.graph)] == [G.nodes[n]["op"] for n in ops]
    assert set(again.graph.edges(keys=True)) == set(G.edges(keys=True))


def nx_ancestor_ops(G, node):
    return [n for n in nx.ancestors(G, node) if G.nodes[n]["kind"] == "op"]


def test_long_context_evidence_reaches_the_answer_and_trim_deletes():
    conv, questions = _sample()
    program = LongContextMemory(LongContextConfig(context_tokens=200))
    with dspy.context(lm=fake_lm(SKILLS)):
        result = trace_conversation(program, conv, questions)
    G = result.graph()
    deleted = [n for n, d in G.nodes(data=True) if d.get("vtype") == "memory" and d["deleted"]]
    assert deleted and all(G.nodes[next(iter(G.predecessors(n)))]["op"] == "long_context.trim" for n in deleted)
    # the oldest turns were trimmed: early evidence is lost, late evidence reaches the answer
    early = evidence_path(G, "sample-1:q0")  # D1:4
    assert early.unreached == ("turn:D1:4",)
    late = evidence_path(G, "sample-1:q3", ["D3:7"])
    assert late.reached == ("turn:D3:7",)
