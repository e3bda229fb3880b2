"""The attribute mapping, without OpenTelemetry installed."""

from __future__ import annotations

import networkx as nx

from memtrace_opt.export._semconv import (
    jsonish,
    lm_call_attributes,
    memory_operation,
    op_attributes,
    op_span_kind,
    score_events,
    verdict_event,
)


def _graph() -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    g.add_node("op:0", kind="op", op="mem0.apply", seq=0, inputs={}, outputs={})
    g.add_node("op:1", kind="op", op="mem0.apply", seq=1, inputs={}, outputs={})
    g.add_node("op:2", kind="op", op="mem0.retrieve", seq=2, inputs={"k": 2}, outputs={})
    g.add_node("q:x", kind="var", vtype="question", value="Where?")
    for node, version, deleted in (("mem:a@1", 1, False), ("mem:b@1", 1, False), ("mem:a@2", 2, False),
                                   ("mem:b@2", 2, True)):
        g.add_node(node, kind="var", vtype="memory", unit_id=node[4], version=version, deleted=deleted, value=node)
    g.add_edge("op:0", "mem:a@1", role="output")
    g.add_edge("op:0", "mem:b@1", role="output")
    g.add_edge("mem:a@1", "op:1", role="input")
    g.add_edge("op:1", "mem:a@2", role="output")
    g.add_edge("op:1", "mem:b@2", role="output")
    g.add_edge("mem:a@2", "op:2", role="input")
    g.add_edge("q:x", "op:2", role="input")
    return g


def test_memory_operations_follow_the_genai_names() -> None:
    g = _graph()
    assert memory_operation(g, "op:0") == ("create_memory", ["mem:a@1", "mem:b@1"])
    assert memory_operation(g, "op:1") == ("upsert_memory", ["mem:a@2", "mem:b@2"])  # an update and a delete
    assert memory_operation(g, "op:2") == ("search_memory", ["mem:a@2"])
    g.add_node("op:3", kind="op", op="x.compute")
    assert memory_operation(g, "op:3") is None


def test_retrieval_op_attributes() -> None:
    attrs = op_attributes(_graph(), "op:2", parent_id="q:x", store_id="conv")
    assert attrs["openinference.span.kind"] == "RETRIEVER"
    assert attrs["gen_ai.operation.name"] == "search_memory" and attrs["gen_ai.memory.query.text"] == "Where?"
    assert attrs["gen_ai.memory.record.id"] == "a@2" and attrs["gen_ai.memory.record.count"] == 1
    assert attrs["retrieval.documents.0.document.id"] == "a@2"
    assert attrs["graph.node.id"] == "op:2" and attrs["graph.node.parent_id"] == "q:x"
    assert attrs["input.value"] == '{"k": 2}' and attrs["memtrace.op.seq"] == 2


def test_lm_call_attributes_flatten_messages_and_tokens() -> None:
    call = {"model": "m", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
            "response": "R", "prompt_tokens": 10, "completion_tokens": 3, "cached": True}
    attrs = lm_call_attributes(call, node_id="op:1:lm:0", parent_id="op:1")
    assert attrs["llm.input_messages.1.message.content"] == "U"
    assert attrs["llm.output_messages.0.message.content"] == "R"
    assert (attrs["llm.token_count.prompt"], attrs["llm.token_count.completion"], attrs["llm.token_count.total"]) == (10, 3, 13)
    assert attrs["gen_ai.usage.input_tokens"] == 10 and attrs["memtrace.lm.cached"] is True
    assert "llm.token_count.total" not in lm_call_attributes({"model": "m"}, node_id="a", parent_id="b")


def test_evaluation_events() -> None:
    event = verdict_event({"case_id": "c", "error_type": "UpdateError", "confidence": 0.7, "reason": "why", "op_id": "op:1"})
    assert event["gen_ai.evaluation.score.label"] == "UpdateError" and event["gen_ai.evaluation.score.value"] == 0.7
    assert event["gen_ai.evaluation.explanation"] == "why" and event["memtrace.verdict.op_id"] == "op:1"
    assert verdict_event({"error": "no parse"})["gen_ai.evaluation.score.label"] == "unattributed"
    names = [e["gen_ai.evaluation.name"] for e in score_events({"scores": {"f1": 0.5, "judge": None}, "correct": True})]
    assert names == ["memtrace.f1", "memtrace.correct"]


def test_helpers() -> None:
    assert op_span_kind("rag.embed_chunks") == "EMBEDDING" and op_span_kind("mem0.extract_facts") == "CHAIN"
    assert jsonish("x" * 50, cap=10) == "x" * 10 + "…" and jsonish([1]) == "[1]"
