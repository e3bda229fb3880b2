"""`memtrace export --otlp`: the replayed spans, checked with the SDK's in-memory exporter (no network)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.cli.export_cmd import export
from memtrace_opt.errors import ConfigError, MemtraceError
from memtrace_opt.export import export_otlp, traces_url
from memtrace_opt.report import load_run


def _spans(run_dir: Path, exporter) -> tuple[list, object]:
    result = export_otlp(run_dir, span_exporter=exporter)
    return list(exporter.get_finished_spans()), result


def test_one_trace_with_a_span_per_op_lm_call_and_question(demo_run: Path, memory_exporter) -> None:
    spans, result = _spans(demo_run, memory_exporter)
    run = load_run(demo_run)
    graph = run.graph(run.cases[0]["graph"])
    ops = [d for _, d in graph.nodes(data=True) if d.get("kind") == "op"]
    calls = sum(len(d["lm_calls"]) for d in ops)
    assert len(spans) == result.spans == 1 + len(run.cases) + len(ops) + calls
    assert result.traces == 1 and len({s.context.trace_id for s in spans}) == 1
    kinds = Counter(s.attributes["openinference.span.kind"] for s in spans)
    assert kinds["LLM"] == calls and kinds["RETRIEVER"] > 0
    root = next(s for s in spans if s.parent is None)
    assert root.attributes["session.id"] == "demo"
    by_node = {s.attributes["graph.node.id"]: s for s in spans}
    for op_id, data in graph.nodes(data=True):
        if data.get("kind") != "op":
            continue
        span = by_node[op_id]
        assert span.name == data["op"]
        assert (span.start_time, span.end_time) == (int(data["started_at"] * 1e9), int(data["ended_at"] * 1e9))
        parent = by_node[span.attributes["graph.node.parent_id"]]
        assert span.parent.span_id == parent.context.span_id


def test_read_path_ops_nest_under_their_question_with_scores_and_verdict(demo_run: Path, memory_exporter) -> None:
    spans, _ = _spans(demo_run, memory_exporter)
    by_node = {s.attributes["graph.node.id"]: s for s in spans}
    question = by_node["q:demo-q3"]
    assert question.attributes["input.value"] == "Where does Odalys work?"
    assert question.attributes["memtrace.verdict.error_type"] == "DeletionError"
    assert question.attributes["memtrace.correct"] is False
    events = {e.attributes["gen_ai.evaluation.name"]: e for e in question.events}
    assert events["memtrace.correct"].attributes["gen_ai.evaluation.score.label"] == "incorrect"
    assert events["memtrace.attribution"].attributes["gen_ai.evaluation.score.label"] == "DeletionError"
    children = [s for s in spans if s.parent is not None and s.parent.span_id == question.context.span_id]
    assert [s.name for s in sorted(children, key=lambda s: s.start_time)] == ["mem0.retrieve", "mem0.answer"]
    retrieve = children[0] if children[0].name == "mem0.retrieve" else children[1]
    assert retrieve.attributes["gen_ai.operation.name"] == "search_memory"
    assert retrieve.attributes["gen_ai.memory.query.text"] == "Where does Odalys work?"


def test_blamed_op_and_memory_writes(demo_run: Path, memory_exporter) -> None:
    spans, _ = _spans(demo_run, memory_exporter)
    blamed = [s for s in spans if s.attributes.get("memtrace.blamed")]
    labels = {s.name: sorted(e.attributes["gen_ai.evaluation.score.label"] for e in s.events) for s in blamed}
    assert labels["mem0.update_decision"] == ["DeletionError", "UpdateError"]
    assert labels["mem0.extract_facts"] == ["ExtractionError"]
    writes = Counter(s.attributes.get("gen_ai.operation.name") for s in spans if s.name == "mem0.apply")
    assert writes == {"create_memory": 2, "upsert_memory": 1}  # sessions 1-2 add; session 3 adds, deletes, updates
    first = next(s for s in spans if s.name == "mem0.apply")
    assert first.attributes["gen_ai.memory.record.count"] == 4
    assert "Quillfeather Bookshop" in first.attributes["gen_ai.memory.records"]


def test_llm_spans_follow_openinference(demo_run: Path, memory_exporter) -> None:
    spans, _ = _spans(demo_run, memory_exporter)
    llm = next(s for s in spans if s.attributes["openinference.span.kind"] == "LLM"
               and s.parent and s.attributes["graph.node.parent_id"] == "op:0")
    parent = next(s for s in spans if s.attributes["graph.node.id"] == "op:0")
    assert llm.attributes["llm.input_messages.0.message.role"] == "system"
    assert llm.attributes["llm.input_messages.0.message.content"].startswith("You keep the long-term memory")
    assert json.loads(llm.attributes["llm.output_messages.0.message.content"])[0].startswith("Odalys")
    assert llm.attributes["llm.token_count.total"] == (
        llm.attributes["llm.token_count.prompt"] + llm.attributes["llm.token_count.completion"])
    assert parent.start_time <= llm.start_time <= llm.end_time <= parent.end_time


def test_a_failed_op_has_an_error_status(demo_run: Path, memory_exporter) -> None:
    path = demo_run / "graphs" / "demo.json"
    data = json.loads(path.read_text())
    node = next(n for n in data["nodes"] if n["id"] == "op:4")
    node["error"] = "reply did not parse"
    path.write_text(json.dumps(data))
    spans, _ = _spans(demo_run, memory_exporter)
    span = next(s for s in spans if s.attributes["graph.node.id"] == "op:4")
    assert span.status.status_code.name == "ERROR" and span.attributes["error.type"]
    assert any(e.name == "exception" for e in span.events)


def test_undeliverable_spans_are_an_error(demo_run: Path, memory_exporter) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    class Refusing(type(memory_exporter)):
        def export(self, spans):
            return SpanExportResult.FAILURE

    with pytest.raises(MemtraceError, match="could not deliver"):
        export_otlp(demo_run, span_exporter=Refusing())


def test_endpoint_urls_and_command_checks(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert traces_url("http://localhost:4318") == "http://localhost:4318/v1/traces"
    assert traces_url("http://localhost:6006/v1/traces") == "http://localhost:6006/v1/traces"
    assert traces_url("https://cloud.langfuse.com/api/public/otel") == "https://cloud.langfuse.com/api/public/otel/v1/traces"
    with pytest.raises(MemtraceError, match="http"):
        traces_url("localhost:4318")
    with pytest.raises(ConfigError, match="--otlp URL and/or --mlflow"):
        export(demo_run)
    with pytest.raises(SystemExit) as exit_info:
        main(["export", str(demo_run), "--tracking-uri", "file:x"])
    assert exit_info.value.code == 2 and "error:" in capsys.readouterr().err
