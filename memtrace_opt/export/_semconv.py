"""Span attributes for an evolution graph, as plain dicts (no OpenTelemetry import), per:

* OpenInference (what Phoenix and Langfuse read): `openinference.span.kind` (CHAIN, LLM, RETRIEVER, EMBEDDING),
  `input.value`/`output.value` with their mime types, `llm.model_name`, `llm.input_messages.{i}.message.role`
  / `.content`, `llm.output_messages.0.message.*`, `llm.token_count.prompt|completion|total`,
  `retrieval.documents.{i}.document.id|content`, `session.id`, `graph.node.id` / `graph.node.parent_id`.
* OpenTelemetry GenAI semantic conventions (development status): on memory operations
  `gen_ai.operation.name` = create_memory | update_memory | delete_memory | upsert_memory | search_memory,
  `gen_ai.memory.store.id`, `gen_ai.memory.record.id` (one record), `gen_ai.memory.record.count`,
  `gen_ai.memory.records` (JSON, opt-in content), `gen_ai.memory.query.text`; on LM calls `gen_ai.operation.name`
  = chat, `gen_ai.request.model`, `gen_ai.usage.input_tokens|output_tokens`; verdicts and scores as
  `gen_ai.evaluation.result` events (`gen_ai.evaluation.name`, `.score.value`, `.score.label`, `.explanation`).
* `memtrace.*` for what neither names: op name, seq, predictor, instruction, verdict fields.

Span names are the op names (`mem0.update_decision`), not the GenAI `{operation}` form, so a trace reads like
the program; the GenAI operation is on the attribute.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import networkx as nx

__all__ = [
    "AttributeValue",
    "VALUE_CAP",
    "jsonish",
    "op_span_kind",
    "memory_operation",
    "op_attributes",
    "lm_call_attributes",
    "verdict_event",
    "score_events",
]

AttributeValue = str | bool | int | float | list[str]
VALUE_CAP = 32_000


def jsonish(value: Any, cap: int = VALUE_CAP) -> str:
    """A value as attribute text: strings as they are, anything else as JSON; cut at `cap` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= cap else text[:cap] + "…"


def op_span_kind(op_name: str, reads_memory: bool = False) -> str:
    """The OpenInference span kind of an operation call (its LM calls are LLM spans of their own)."""
    name = op_name.lower()
    if "embed" in name:
        return "EMBEDDING"
    if "retriev" in name or "search" in name or (reads_memory and "recall" in name):
        return "RETRIEVER"
    return "CHAIN"


def _mem_nodes(graph: nx.MultiDiGraph, nodes: Iterable[str]) -> list[str]:
    return [n for n in nodes if graph.nodes[n].get("vtype") == "memory" or str(n).startswith("mem:")]


def memory_operation(graph: nx.MultiDiGraph, op: str) -> tuple[str, list[str]] | None:
    """(GenAI memory operation name, the memory version nodes it concerns) for an op, or None if it touches
    no memory. Writes: version 1 is a create, a deleted version a delete, any other version an update; an op
    doing several kinds is an upsert. An op that only reads memory is a search."""
    written = _mem_nodes(graph, graph.successors(op))
    if written:
        kinds = set()
        for node in written:
            data = graph.nodes[node]
            if data.get("deleted"):
                kinds.add("delete_memory")
            elif int(data.get("version") or 1) <= 1:
                kinds.add("create_memory")
            else:
                kinds.add("update_memory")
        return (kinds.pop() if len(kinds) == 1 else "upsert_memory"), sorted(written)
    read = _mem_nodes(graph, graph.predecessors(op))
    return ("search_memory", sorted(read)) if read else None


def _record(graph: nx.MultiDiGraph, node: str) -> dict[str, Any]:
    data = graph.nodes[node]
    record: dict[str, Any] = {"id": f"{data.get('unit_id', node)}@{data.get('version', '')}".rstrip("@"),
                              "content": data.get("value")}
    if data.get("deleted"):
        record["metadata"] = {"deleted": True}
    return record


def op_attributes(graph: nx.MultiDiGraph, op: str, *, parent_id: str, store_id: str) -> dict[str, AttributeValue]:
    """The attributes of an op's span (see the module docstring)."""
    data = graph.nodes[op]
    name = str(data.get("op") or op)
    memory = memory_operation(graph, op)
    attrs: dict[str, AttributeValue] = {
        "openinference.span.kind": op_span_kind(name, reads_memory=memory is not None),
        "graph.node.id": op,
        "graph.node.parent_id": parent_id,
        "memtrace.op.name": name,
        "input.value": jsonish(data.get("inputs") or {}),
        "input.mime_type": "application/json",
        "output.value": jsonish(data.get("outputs") or {}),
        "output.mime_type": "application/json",
    }
    if isinstance(data.get("seq"), int):
        attrs["memtrace.op.seq"] = data["seq"]
    if data.get("predictor"):
        attrs["memtrace.predictor"] = str(data["predictor"])
    if data.get("instructions"):
        attrs["memtrace.instructions"] = jsonish(data["instructions"])
    if data.get("replayed"):
        attrs["memtrace.replayed"] = str(data["replayed"])
    if memory is not None:
        operation, nodes = memory
        attrs["gen_ai.operation.name"] = operation
        attrs["gen_ai.memory.store.id"] = store_id
        attrs["gen_ai.memory.record.count"] = len(nodes)
        records = [_record(graph, n) for n in nodes]
        if len(records) == 1:
            attrs["gen_ai.memory.record.id"] = records[0]["id"]
        attrs["gen_ai.memory.records"] = jsonish(records)
        if operation == "search_memory":
            queries = [graph.nodes[n].get("value") for n in graph.predecessors(op) if str(n).startswith("q:")]
            if queries:
                attrs["gen_ai.memory.query.text"] = jsonish(queries[0])
            if attrs["openinference.span.kind"] == "RETRIEVER":
                for i, record in enumerate(records):
                    attrs[f"retrieval.documents.{i}.document.id"] = str(record["id"])
                    attrs[f"retrieval.documents.{i}.document.content"] = jsonish(record["content"])
    return attrs


def lm_call_attributes(call: dict[str, Any], *, node_id: str, parent_id: str) -> dict[str, AttributeValue]:
    """The attributes of one LM call's LLM span."""
    model = str(call.get("model") or "")
    messages = [m for m in call.get("messages") or [] if isinstance(m, dict)]
    attrs: dict[str, AttributeValue] = {
        "openinference.span.kind": "LLM",
        "graph.node.id": node_id,
        "graph.node.parent_id": parent_id,
        "llm.model_name": model,
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "input.value": jsonish(messages),
        "input.mime_type": "application/json",
        "output.value": jsonish(call.get("response") or ""),
        "output.mime_type": "text/plain",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": jsonish(call.get("response") or ""),
        "memtrace.lm.cached": bool(call.get("cached")),
    }
    for i, message in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = str(message.get("role") or "")
        attrs[f"llm.input_messages.{i}.message.content"] = jsonish(message.get("content") or "")
    prompt, completion = call.get("prompt_tokens"), call.get("completion_tokens")
    if isinstance(prompt, int):
        attrs["llm.token_count.prompt"] = prompt
        attrs["gen_ai.usage.input_tokens"] = prompt
    if isinstance(completion, int):
        attrs["llm.token_count.completion"] = completion
        attrs["gen_ai.usage.output_tokens"] = completion
    if isinstance(prompt, int) and isinstance(completion, int):
        attrs["llm.token_count.total"] = prompt + completion
    return attrs


def verdict_event(verdict: dict[str, Any]) -> dict[str, AttributeValue]:
    """A `gen_ai.evaluation.result` event's attributes for an attribution verdict."""
    attrs: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": "memtrace.attribution",
        "gen_ai.evaluation.score.label": str(verdict.get("error_type") or "unattributed"),
        "memtrace.case_id": str(verdict.get("case_id") or ""),
        "memtrace.verdict.method": str(verdict.get("method") or ""),
    }
    if isinstance(verdict.get("confidence"), (int, float)):
        attrs["gen_ai.evaluation.score.value"] = float(verdict["confidence"])
    if verdict.get("reason"):
        attrs["gen_ai.evaluation.explanation"] = jsonish(verdict["reason"])
    for key in ("op_id", "op", "predictor", "error"):
        if verdict.get(key):
            attrs[f"memtrace.verdict.{key}"] = str(verdict[key])
    return attrs


def score_events(case: dict[str, Any]) -> list[dict[str, AttributeValue]]:
    """`gen_ai.evaluation.result` events for a question's scores (f1, bleu1, judge) and its correctness."""
    events: list[dict[str, AttributeValue]] = []
    for name, value in sorted((case.get("scores") or {}).items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            events.append({"gen_ai.evaluation.name": f"memtrace.{name}", "gen_ai.evaluation.score.value": float(value)})
    correct = bool(case.get("correct"))
    events.append({"gen_ai.evaluation.name": "memtrace.correct", "gen_ai.evaluation.score.value": float(correct),
                   "gen_ai.evaluation.score.label": "correct" if correct else "incorrect"})
    return events
