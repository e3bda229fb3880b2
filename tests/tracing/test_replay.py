from __future__ import annotations

import dspy
import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.tracing import (
    EventWriter,
    load_graph,
    op_nodes,
    replay,
    save_graph,
    trace_conversation,
    with_instructions,
)


@pytest.fixture
def recorded(toy_program, conversation, lm):
    with dspy.context(lm=lm):
        return trace_conversation(toy_program, conversation, conversation.questions)


def test_a_replay_with_no_change_reproduces_the_answers_with_zero_lm_calls(toy_program, conversation, lm, engine,
                                                                          recorded):
    calls_before = len(engine.calls)
    with dspy.context(lm=lm):
        result = replay(toy_program, conversation, conversation.questions, recorded.events)
    assert result.answers == recorded.answers
    assert result.lm_calls == 0 and len(engine.calls) == calls_before
    assert result.reused_by_op == {"toy.extract": 3, "toy.retrieve": 3, "toy.answer": 3}
    assert result.reused_ops == 9 and result.rerun_ops == 0
    # a search is reused only while the store holds the same memory; reused, it still links the units it found
    retrieve = op_nodes(result.graph, "toy.retrieve")[0]
    assert result.graph.nodes[retrieve]["replayed"] == "memo"
    assert {"mem:memory-1@2", "mem:memory-3@1"} <= set(result.graph.predecessors(retrieve))
    # the replay is traced too: same shape, every LM op marked as replayed from the memo
    assert [result.graph.nodes[n]["op"] for n in op_nodes(result.graph)] == [
        n["op"] for _, n in sorted((d["seq"], d) for _, d in recorded.graph().nodes(data=True) if d["kind"] == "op")
    ]
    assert {result.graph.nodes[n]["replayed"] for n in op_nodes(result.graph, "toy.extract")} == {"memo"}
    assert result.graph.nodes["mem:memory-1@2"]["value"] == "Alice lives in Paris"  # the store was rebuilt live
    assert result.graph.graph["meta"]["replay"]["instructions"] == []


def test_changing_the_answer_instruction_reruns_only_the_answer_ops(toy_program, conversation, lm, engine, recorded):
    engine.reset()
    original = toy_program.answer.predict.signature.instructions
    with dspy.context(lm=lm):
        result = replay(toy_program, conversation, conversation.questions, recorded.events,
                        instructions={"answer.predict": "Answer in as few words as you can."})
    assert result.rerun_by_op == {"toy.answer": 3} and result.rerun_ops == 3
    assert result.reused_by_op == {"toy.extract": 3, "toy.retrieve": 3}
    assert result.lm_calls == 3 and {c.output_fields for c in engine.calls} == {("answer",)}
    assert all(c.instruction == "Answer in as few words as you can." for c in engine.calls)
    assert result.answers == recorded.answers  # the fake answerer ignores the instruction
    assert result.graph.graph["instructions"]["answer.predict"] == "Answer in as few words as you can."
    # the caller's program (and its Signature class) are untouched
    assert toy_program.answer.predict.signature.instructions == original
    assert type(toy_program.answer).signature.instructions == original
    assert result.program.answer.predict.signature.instructions == "Answer in as few words as you can."


def test_forcing_an_extraction_output_changes_the_store_and_the_answers(toy_program, conversation, lm, recorded):
    G = recorded.graph()
    second_extract = op_nodes(G, "toy.extract")[1]
    seq = G.nodes[second_extract]["seq"]
    with dspy.context(lm=lm):
        result = replay(toy_program, conversation, conversation.questions, recorded.events,
                        forced={seq: {"facts": ["Alice lives in Madrid"]}})
    R = result.graph
    assert R.nodes[second_extract]["replayed"] == "forced"
    assert R.nodes[second_extract]["outputs"]["facts"] == ["Alice lives in Madrid"]
    # no update and no delete happened: memory-1 keeps one version, memory-2 is live, Madrid is a new unit
    assert "mem:memory-1@2" not in R and "mem:memory-2@2" not in R
    assert R.nodes["mem:memory-3@1"]["value"] == "Alice lives in Madrid"
    assert result.answers["q-live"] == "Alice lives in Berlin" != recorded.answers["q-live"]
    assert result.answers["q-dog"] == "Bob has a dog named Rex" != recorded.answers["q-dog"]
    assert result.rerun_by_op == {"toy.answer": 3}  # session 3's extraction saw the same turns: reused
    # the store changed, so its digest did: every search ran live against the rebuilt store
    assert {R.nodes[n]["replayed"] for n in op_nodes(R, "toy.retrieve")} == {None}


def test_replay_from_a_saved_graph_or_an_events_file(tmp_path, toy_program, conversation, lm, engine):
    path = tmp_path / "events.jsonl"
    with dspy.context(lm=lm), EventWriter(path) as writer:
        recorded = trace_conversation(toy_program, conversation, conversation.questions, writer=writer)
    graph_path = save_graph(recorded.graph(), tmp_path / "g.json")
    for record in (path, load_graph(graph_path)):
        with dspy.context(lm=lm):
            result = replay(toy_program, conversation, conversation.questions, record)
        assert result.answers == recorded.answers and result.lm_calls == 0


def test_replay_refuses_unknown_predictors_and_store_writers(toy_program, conversation, lm, recorded):
    with pytest.raises(ConfigError, match="no predictor named nope"):
        replay(toy_program, conversation, conversation.questions, recorded.events, instructions={"nope": "x"})
    write_seq = recorded.graph().nodes[op_nodes(recorded.graph(), "toy.write")[0]]["seq"]
    with pytest.raises(ConfigError, match="writes the store"):
        replay(toy_program, conversation, conversation.questions, recorded.events, forced={write_seq: {}})
    with pytest.raises(ConfigError, match="no such op"):
        replay(toy_program, conversation, conversation.questions, recorded.events, forced={999: {}})


def test_forcing_a_retrieval_output(toy_program, conversation, lm, recorded):
    G = recorded.graph()
    retrieve = op_nodes(G, "toy.retrieve")[1]  # q-dog found nothing: pretend it found Alice's home
    found = G.nodes[op_nodes(G, "toy.retrieve")[0]]["outputs"]["units"][:1]
    with dspy.context(lm=lm):
        result = replay(toy_program, conversation, conversation.questions, recorded.events,
                        forced={G.nodes[retrieve]["seq"]: {"units": found}})
    assert result.answers["q-dog"] == "Alice lives in Paris"
    assert result.answers["q-live"] == recorded.answers["q-live"]
    assert result.graph.nodes[retrieve]["replayed"] == "forced"
    assert "mem:memory-1@2" in set(result.graph.predecessors(retrieve))


def test_with_instructions_copies(toy_program):
    changed = with_instructions(toy_program, {"extract.predict": "Extract nothing."})
    assert changed is not toy_program
    assert changed.extract.predict.signature.instructions == "Extract nothing."
    assert toy_program.extract.predict.signature.instructions.startswith("Write down")
