from __future__ import annotations

import json

import dspy
import networkx as nx
import pytest

from memtrace_opt.tracing import (
    GRAPH_SCHEMA_VERSION,
    EventWriter,
    OpEvent,
    StoreRecord,
    build_graph,
    evidence_path,
    graph_to_json,
    load_graph,
    op_nodes,
    op_subgraph,
    paths_to_answer,
    read_events,
    render_subgraph,
    save_graph,
    trace_conversation,
    unit_life,
)

OP_ATTRS = {"kind", "op", "predictor", "seq", "started_at", "ended_at", "inputs", "outputs", "instructions",
            "lm_calls", "error", "parent"}
LM_CALL_KEYS = {"model", "messages", "response", "prompt_tokens", "completion_tokens", "seconds", "cached"}


@pytest.fixture
def traced(toy_program, conversation, lm):
    with dspy.context(lm=lm):
        return trace_conversation(toy_program, conversation, conversation.questions,
                                  meta={"models": {"task": "fake/test"}})


@pytest.fixture
def G(traced):
    return build_graph(traced.events)


def _op(G, name, nth=0):
    return op_nodes(G, name)[nth]


def test_graph_attributes(G):
    assert G.graph["schema_version"] == GRAPH_SCHEMA_VERSION == 2
    assert (G.graph["system"], G.graph["dataset"], G.graph["sample_id"]) == ("toy", "toy", "toy-1")
    assert G.graph["models"] == {"task": "fake/test"}
    assert G.graph["instructions"]["answer.predict"].startswith("You answer a question")


def test_node_ids_and_kinds(G, conversation):
    for turn in conversation.turns():
        node = G.nodes[f"turn:{turn.dia_id}"]
        assert node["kind"] == "var" and node["vtype"] == "turn" and node["value"] == turn.text
    ops = op_nodes(G)
    assert ops == [f"op:{i}" for i in range(12)]
    for node in ops:
        data = G.nodes[node]
        assert OP_ATTRS <= set(data) and data["kind"] == "op" and data["parent"] is None
    assert G.nodes["op:0"]["op"] == "toy.extract" and G.nodes["op:0"]["predictor"] == "extract.predict"
    assert [set(c) for c in G.nodes["op:0"]["lm_calls"]] == [LM_CALL_KEYS]
    assert G.nodes["op:1"]["predictor"] is None and G.nodes["op:1"]["lm_calls"] == []
    for qid in ("q-live", "q-dog", "q-violin"):
        assert G.nodes[f"q:{qid}"]["vtype"] == "question" and G.nodes[f"ans:{qid}"]["vtype"] == "answer"
    assert G.nodes["q:q-live"]["evidence"] == ["D1:1", "D2:1"]
    assert G.nodes["var:0:facts"] == {"kind": "var", "vtype": "fact", "name": "facts",
                                      "value": ["Alice lives in Berlin", "Bob has a dog named Rex"]}
    for u, v, key, data in G.edges(keys=True, data=True):
        assert data["role"] == key
        if data["role"] == "input":
            assert G.nodes[u]["kind"] == "var" and G.nodes[v]["kind"] == "op"
        else:
            assert data["role"] == "output" and G.nodes[u]["kind"] == "op" and G.nodes[v]["kind"] == "var"


def _edge(G, u, v, role):
    return G.has_edge(u, v, key=role)


def test_extraction_flows_from_turns_through_facts_to_the_store(G):
    extract, write = _op(G, "toy.extract"), _op(G, "toy.write")
    assert _edge(G, "turn:D1:1", extract, "input") and _edge(G, "turn:D1:2", extract, "input")
    assert _edge(G, extract, "var:0:facts", "output")
    assert _edge(G, "var:0:facts", write, "input")  # the facts list passed on to the writer
    assert _edge(G, write, "mem:memory-1@1", "output") and _edge(G, write, "mem:memory-2@1", "output")
    assert not G.has_node(f"var:{G.nodes[write]['seq']}:units")  # the writer's own units are its outputs already


def test_an_update_links_the_versions_through_the_update_op(G):
    update = _op(G, "toy.write", 1)
    assert _edge(G, "mem:memory-1@1", update, "input") and _edge(G, update, "mem:memory-1@2", "output")
    v2 = G.nodes["mem:memory-1@2"]
    assert (v2["unit_id"], v2["version"], v2["deleted"], v2["value"]) == ("memory-1", 2, False, "Alice lives in Paris")
    life = unit_life(G, "memory-1")
    assert life.nodes == ["mem:memory-1@1", "mem:memory-1@2"]
    assert life.ops == [_op(G, "toy.write", 0), update] and not life.deleted
    assert set(life.versions[1].read_by) >= {_op(G, "toy.retrieve", 0), _op(G, "toy.answer", 0)}


def test_a_delete_produces_a_deleted_version(G):
    delete = _op(G, "toy.write", 1)
    assert _edge(G, "mem:memory-2@1", delete, "input") and _edge(G, delete, "mem:memory-2@2", "output")
    assert G.nodes["mem:memory-2@2"]["deleted"] is True and G.nodes["mem:memory-2@1"]["deleted"] is False
    life = unit_life(G, "memory-2")
    assert life.deleted and [v.deleted for v in life.versions] == [False, True]
    assert G.out_degree("mem:memory-2@2") == 0  # nothing reads a deleted unit


def test_retrieval_is_linked_to_the_units_it_returned_and_the_answer_to_them(G):
    retrieve, answer = _op(G, "toy.retrieve", 0), _op(G, "toy.answer", 0)
    assert _edge(G, "q:q-live", retrieve, "input")
    returned = {"mem:memory-1@2", "mem:memory-3@1"}
    assert {u for u in G.predecessors(retrieve) if u.startswith("mem:")} == returned
    retrieved_var = f"var:{G.nodes[retrieve]['seq']}:units"
    assert G.nodes[retrieved_var]["vtype"] == "retrieved"
    assert _edge(G, retrieve, retrieved_var, "output") and _edge(G, retrieved_var, answer, "input")
    assert returned <= set(G.predecessors(answer))
    assert _edge(G, answer, "ans:q-live", "output")
    assert G.nodes["ans:q-live"]["value"] == "Alice lives in Paris"


def test_evidence_path_and_paths_to_answer(G):
    path = evidence_path(G, "q-live")
    assert path.reached == ("turn:D1:1", "turn:D2:1") and path.unreached == ()
    for node in ("turn:D1:1", "op:0", "var:0:facts", "op:1", "mem:memory-1@1", "op:3", "mem:memory-1@2",
                 _op(G, "toy.retrieve", 0), _op(G, "toy.answer", 0), "ans:q-live"):
        assert node in path
    assert "mem:memory-2@2" not in path and "mem:memory-3@1" not in path  # not on a path from the evidence
    dog = evidence_path(G, "q-dog", ["D1:2"])
    assert dog.reached == () and dog.unreached == ("turn:D1:2",) and len(dog) == 0  # deleted: never reached
    paths = paths_to_answer(G, ["D1:1"], "q-live")
    assert paths and all(p[0] == "turn:D1:1" and p[-1] == "ans:q-live" for p in paths)
    assert all(all(G.has_edge(a, b) for a, b in zip(p, p[1:], strict=False)) for p in paths)
    assert paths_to_answer(G, ["D1:2"], "q-dog") == []


def test_malformed_evidence_ids_are_split(G):
    assert evidence_path(G, "q-live", ["D1:1; D2:1"]).reached == ("turn:D1:1", "turn:D2:1")


def test_op_subgraph(G):
    view = op_subgraph(G, _op(G, "toy.answer", 0))
    assert view.op == "toy.answer" and view.predictor == "answer.predict"
    assert "q:q-live" in view.inputs and view.outputs == ("ans:q-live",)
    assert len(view.lm_calls) == 1 and view.parent is None and view.children == ()
    with pytest.raises(ValueError):
        op_subgraph(G, "turn:D1:1")


def test_render_subgraph_paginates_by_budget(G):
    nodes = list(G.nodes)
    pages = render_subgraph(G, nodes, budget_chars=600)
    assert len(pages) > 1 and all(len(p) <= 600 for p in pages)
    text = "\n".join(pages)
    for node in nodes:
        assert f"[{node}]" in text
    assert text.index("[op:0]") < text.index("[op:1]") < text.index("[ans:q-live]")
    assert "DELETED" in text and "Alice lives in Paris" in text
    one = render_subgraph(G, ["op:0"], budget_chars=100)
    assert len(one) == 1 and len(one[0]) <= 100
    assert render_subgraph(G, [], budget_chars=100) == []


def test_save_load_round_trip_is_byte_stable(tmp_path, G):
    first = save_graph(G, tmp_path / "graphs" / "toy-1.json").read_bytes()
    again = load_graph(tmp_path / "graphs" / "toy-1.json")
    second = save_graph(again, tmp_path / "again.json").read_bytes()
    assert first == second
    assert isinstance(again, nx.MultiDiGraph) and again.graph["schema_version"] == GRAPH_SCHEMA_VERSION
    assert json.loads(first)["edges"]  # node_link_data with edges="edges"
    assert nx.utils.graphs_equal(G, again)


def test_graph_from_the_events_file_equals_graph_from_memory(tmp_path, toy_program, conversation, lm):
    path = tmp_path / "events.jsonl"
    with dspy.context(lm=lm), EventWriter(path) as writer:
        result = trace_conversation(toy_program, conversation, conversation.questions, writer=writer)
    assert graph_to_json(build_graph(read_events(path))) == graph_to_json(build_graph(result.events))
    assert graph_to_json(build_graph(e.to_dict() for e in result.events)) == graph_to_json(result.graph())


def test_build_graph_does_not_depend_on_how_threads_interleaved_events(traced):
    events = traced.events
    reordered = ([e for e in events if not isinstance(e, (OpEvent, StoreRecord))]
                 + [e for e in reversed(events) if isinstance(e, OpEvent)]
                 + [e for e in events if isinstance(e, StoreRecord)])
    assert graph_to_json(build_graph(reordered)) == graph_to_json(build_graph(events))


def test_a_crash_mid_op_still_builds(traced):
    # drop the op event of the second write (a crash before it ended): its store writes survive as nodes
    second_write = [e for e in traced.events if isinstance(e, OpEvent) and e.op == "toy.write"][1]
    cut = traced.events[: traced.events.index(second_write)]
    G = build_graph(cut)
    assert "mem:memory-1@2" in G and G.in_degree("mem:memory-1@2") == 0
    assert "ans:q-live" not in G


def test_the_fast_fill_builds_what_the_networkx_api_builds(G):
    H = nx.MultiDiGraph()
    H.graph.update(G.graph)
    H.add_nodes_from(G.nodes(data=True))
    H.add_edges_from((u, v, k, d) for u, v, k, d in G.edges(keys=True, data=True))
    assert graph_to_json(H) == graph_to_json(G)
    assert nx.utils.graphs_equal(H, G) and set(H.pred["op:3"]) == set(G.pred["op:3"])
    G.add_edge("op:0", "var:0:facts", key="output", role="output")  # the filled graph behaves normally
    assert G.number_of_edges() == H.number_of_edges()
    G.remove_node("op:0")
    assert "op:0" not in G.pred["var:0:facts"] and not G.has_edge("turn:D1:1", "op:0")


def test_run_directory_paths():
    from memtrace_opt.rundir import RunDir
    from memtrace_opt.tracing import events_file, graph_file

    assert events_file("runs/r1", "conv-26").as_posix() == "runs/r1/events/conv-26.jsonl"
    assert graph_file("runs/r1", "a/b c") == RunDir("runs/r1").graph_path("a/b c")


def test_meta_keys_are_routed(toy_program, conversation, lm):
    with dspy.context(lm=lm):
        result = trace_conversation(toy_program, conversation, [], meta={
            "system": "toy", "program": {"top_k": 3}, "instructions": {"stale": "x"}, "run_id": "r7"})
    G = result.graph()
    assert G.graph["config"] == {"top_k": 3} and G.graph["meta"] == {"run_id": "r7"}
    assert "stale" not in G.graph["instructions"] and "answer.predict" in G.graph["instructions"]
    assert nx.is_directed_acyclic_graph(G)
