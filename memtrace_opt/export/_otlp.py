"""Replays a run's evolution graphs as OpenTelemetry spans, with their original times, to an OTLP endpoint.

One trace per conversation graph:

    memtrace <system> <sample>                  root (CHAIN), session.id = sample id
    ├── <op>  (write path)                      one span per op, nested as the ops were (`parent`)
    │   └── llm <model>                         one LLM span per LM call, in order from the op's start
    └── question <qid>                          one per question of the conversation: input = question,
        ├── <retrieve op>                        output = prediction, scores and verdicts as evaluation
        └── <answer op>                          events; its read-path ops nest under it

Attributes follow OpenInference and the GenAI conventions (see `_semconv`), so the run opens in Phoenix,
Langfuse or any OTLP backend. Needs the `otlp` extra (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import networkx as nx

from memtrace_opt.errors import MemtraceError
from memtrace_opt.export._semconv import (
    jsonish,
    lm_call_attributes,
    op_attributes,
    score_events,
    verdict_event,
)
from memtrace_opt.report import RunArtifacts, load_run, read_path

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = ["OtlpExportResult", "export_otlp", "traces_url"]

log = logging.getLogger(__name__)
_EVAL_EVENT = "gen_ai.evaluation.result"


@dataclass(frozen=True)
class OtlpExportResult:
    endpoint: str | None
    traces: int
    spans: int


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL: `endpoint` when it ends in /v1/traces, else the OTLP base URL convention
    `<endpoint>/v1/traces` (Langfuse: https://cloud.langfuse.com/api/public/otel)."""
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise MemtraceError(f"--otlp wants an http(s) URL such as http://localhost:6006/v1/traces, not {endpoint!r}")
    return endpoint if parsed.path.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


def _otel() -> Any:
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    except ImportError as error:
        raise MemtraceError(
            "the OTLP export needs OpenTelemetry: pip install 'memtrace-opt[otlp]'") from error
    return trace, Resource, TracerProvider, BatchSpanProcessor, SpanExportResult


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class _Clock:
    """Op times in ns; ops without times (0 or missing) get made-up ones, 1 ms apart, after the last known."""

    def __init__(self, graph: nx.MultiDiGraph, ops: Sequence[str]) -> None:
        self.times: dict[str, tuple[int, int]] = {}
        last = 0.0
        fallback = time.time()
        for op in ops:
            data = graph.nodes[op]
            start, end = data.get("started_at"), data.get("ended_at")
            if not isinstance(start, (int, float)) or start <= 0:
                start = max(last, fallback)
            if not isinstance(end, (int, float)) or end < start:
                end = start + 0.001
            self.times[op] = (_ns(start), _ns(end))
            last = end


def _ops(graph: nx.MultiDiGraph) -> list[str]:
    ops = [n for n, d in graph.nodes(data=True) if d.get("kind") == "op"]
    return sorted(ops, key=lambda n: (graph.nodes[n].get("seq") if isinstance(graph.nodes[n].get("seq"), int) else 1 << 40, n))


def _replay(tracer: Tracer, trace_api: Any, graph: nx.MultiDiGraph, cases: list[dict[str, Any]],
            verdicts: dict[str, list[dict[str, Any]]]) -> int:
    """Emits the spans of one graph; returns how many."""
    ops = _ops(graph)
    if not ops:
        return 0
    replay = _GraphReplay(tracer, trace_api, graph, _Clock(graph, ops), cases)
    for case in cases:
        replay.question(case, verdicts.get(str(case.get("case_id")), []))
    for op in ops:
        replay.op(op)
    replay.root.end(end_time=replay.end)
    return replay.spans


class _GraphReplay:
    """The spans of one graph as they are emitted: the root at once, then each question, then each op (nested
    under its enclosing op, else the question whose read path it is on, else the root)."""

    def __init__(self, tracer: Tracer, trace_api: Any, graph: nx.MultiDiGraph, clock: _Clock,
                 cases: list[dict[str, Any]]) -> None:
        self.tracer, self.trace_api, self.graph, self.clock = tracer, trace_api, graph, clock
        meta = graph.graph
        self.sample = str(meta.get("sample_id") or (cases[0].get("sample_id") if cases else "") or "conversation")
        system = str(meta.get("system") or (cases[0].get("system") if cases else "") or "memory")
        self.run_id = f"run:{self.sample}"
        start = min(s for s, _ in clock.times.values())
        self.end = max(e for _, e in clock.times.values())
        self.root = tracer.start_span(f"memtrace {system} {self.sample}", start_time=start, attributes={
            "openinference.span.kind": "CHAIN", "graph.node.id": self.run_id, "session.id": self.sample,
            "memtrace.system": system, "memtrace.dataset": str(meta.get("dataset") or ""),
            "memtrace.sample_id": self.sample, "input.value": self.sample,
            "metadata": jsonish({"models": meta.get("models"), "instructions": meta.get("instructions")}),
        })
        self.spans = 1
        self.parents: dict[str, Span] = {self.run_id: self.root}
        self.question_of: dict[str, str] = {}
        self.blamed_by: dict[str, list[dict[str, Any]]] = {}

    def _under(self, parent: Span) -> Any:
        return self.trace_api.set_span_in_context(parent)

    def _error(self, span: Span, message: str) -> None:
        span.set_status(self.trace_api.Status(self.trace_api.StatusCode.ERROR, message[:500]))

    def question(self, case: dict[str, Any], found: list[dict[str, Any]]) -> None:
        """The question's span (its scores and verdicts as evaluation events); remembers its read-path ops
        and the ops its verdicts blame."""
        qid = str(case.get("question_id"))
        for verdict in found:
            if verdict.get("op_id"):
                self.blamed_by.setdefault(str(verdict["op_id"]), []).append(verdict)
        times = self.clock.times
        read_ops = [n for n in read_path(self.graph, qid) if n in times]
        q_start = min((times[o][0] for o in read_ops), default=self.end)
        q_end = max((times[o][1] for o in read_ops), default=self.end)
        span = self.tracer.start_span(f"question {qid}", context=self._under(self.root), start_time=q_start,
                                      attributes=_question_attributes(case, qid, self.run_id, found))
        for event in score_events(case):
            span.add_event(_EVAL_EVENT, attributes=event, timestamp=q_end)
        for verdict in found:
            span.add_event(_EVAL_EVENT, attributes=verdict_event(verdict), timestamp=q_end)
        if case.get("error"):
            self._error(span, str(case["error"]))
        span.end(end_time=q_end)
        self.spans += 1
        self.parents[f"q:{qid}"] = span
        for op in read_ops:
            self.question_of.setdefault(op, f"q:{qid}")

    def op(self, op: str) -> None:
        """The op's span: the verdicts that blame it, its error, and one child span per LM call."""
        data = self.graph.nodes[op]
        parent = data.get("parent")
        parent_id = parent if parent in self.parents else self.question_of.get(op, self.run_id)
        op_start, op_end = self.clock.times[op]
        span = self.tracer.start_span(
            str(data.get("op") or op), context=self._under(self.parents[parent_id]), start_time=op_start,
            attributes=op_attributes(self.graph, op, parent_id=parent_id, store_id=self.sample))
        self.parents[op] = span
        self.spans += 1
        for verdict in self.blamed_by.get(op, []):
            span.add_event(_EVAL_EVENT, attributes=verdict_event(verdict), timestamp=op_end)
        if op in self.blamed_by:
            span.set_attribute("memtrace.blamed", True)
            span.set_attribute("memtrace.blamed_by", [str(v.get("case_id")) for v in self.blamed_by[op]])
        if data.get("error"):
            span.set_attribute("error.type", "memtrace.OperationFailed")
            span.add_event("exception", attributes={"exception.message": str(data["error"])[:2000]}, timestamp=op_end)
            self._error(span, str(data["error"]))
        self._lm_calls(op, span, data.get("lm_calls") or [], op_start, op_end)
        span.end(end_time=op_end)

    def _lm_calls(self, op: str, span: Span, calls: list[Any], op_start: int, op_end: int) -> None:
        """One LLM span per LM call, back to back from the op's start, each as long as the call took (within the op)."""
        cursor = op_start
        for i, call in enumerate(c for c in calls if isinstance(c, dict)):
            seconds = call.get("seconds")
            length = _ns(float(seconds)) if isinstance(seconds, (int, float)) else 0
            call_end = min(cursor + length, op_end) if op_end > cursor else cursor
            child = self.tracer.start_span(
                f"llm {call.get('model') or ''}".strip(), context=self._under(span), start_time=cursor,
                attributes=lm_call_attributes(call, node_id=f"{op}:lm:{i}", parent_id=op))
            child.end(end_time=call_end)
            self.spans += 1
            cursor = call_end


def _question_attributes(case: dict[str, Any], qid: str, run_id: str, found: list[dict[str, Any]]) -> dict[str, Any]:
    """A question span's attributes: the case, and the first verdict that names an error type."""
    attrs: dict[str, Any] = {
        "openinference.span.kind": "CHAIN", "graph.node.id": f"q:{qid}", "graph.node.parent_id": run_id,
        "input.value": str(case.get("question") or ""), "output.value": str(case.get("prediction") or ""),
        "memtrace.question_id": qid, "memtrace.case_id": str(case.get("case_id") or ""),
        "memtrace.gold": str(case.get("gold") or ""), "memtrace.category": str(case.get("category") or ""),
        "memtrace.correct": bool(case.get("correct")), "memtrace.evidence": [str(e) for e in case.get("evidence") or []],
    }
    primary = next((v for v in found if v.get("error_type") and not v.get("error")), None)
    if primary is not None:
        for key in ("error_type", "op_id", "op", "reason"):
            if primary.get(key):
                attrs[f"memtrace.verdict.{key}"] = jsonish(primary[key])
    return attrs


class _Counting:
    """A span exporter that passes spans on and counts what was delivered and what was not."""

    def __init__(self, inner: Any, success: Any) -> None:
        self.inner, self.success, self.sent, self.failed = inner, success, 0, 0

    def export(self, spans: Sequence[Any]) -> Any:
        result = self.inner.export(spans)
        if result == self.success:
            self.sent += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class _Told(logging.Handler):
    """Keeps what OpenTelemetry logs while it exports (its retries, an endpoint's refusal, an exporter's crash with
    its traceback) instead of printing it: the export's own error says it in one line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        self.said.append(" ".join(f"{record.getMessage()}{f' ({error})' if error else ''}".split()))


@contextmanager
def _otel_told() -> Iterator[_Told]:
    """OpenTelemetry's log records (logger `opentelemetry`) kept by a `_Told` while inside, not propagated."""
    logger, told = logging.getLogger("opentelemetry"), _Told()
    propagate = logger.propagate
    logger.addHandler(told)
    logger.propagate = False
    try:
        yield told
    finally:
        logger.removeHandler(told)
        logger.propagate = propagate


def _count_spans(run: RunArtifacts) -> int:
    total = 0
    for rel in run.graph_files():
        graph = run.graph(rel)
        if graph is not None:
            total += 1 + sum(1 + len(d.get("lm_calls") or []) for _, d in graph.nodes(data=True) if d.get("kind") == "op")
    return total + len(run.cases)


def export_otlp(run_dir: str | Path, endpoint: str | None = None, *, span_exporter: SpanExporter | None = None,
                service_name: str = "memtrace-opt") -> OtlpExportResult:
    """Sends the run's graphs as spans to `endpoint` (OTLP/HTTP protobuf), or to `span_exporter` when given
    (tests pass the SDK's InMemorySpanExporter). Raises MemtraceError when spans could not be delivered.
    Headers (e.g. an API key) come from the standard OTEL_EXPORTER_OTLP_HEADERS variable."""
    trace_api, Resource, TracerProvider, BatchSpanProcessor, SpanExportResult = _otel()
    if span_exporter is None:
        if not endpoint:
            raise MemtraceError("give an OTLP endpoint URL (e.g. http://localhost:6006/v1/traces)")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = traces_url(endpoint)
        span_exporter = OTLPSpanExporter(endpoint=endpoint)
    run = load_run(run_dir)

    counting = _Counting(span_exporter, SpanExportResult.SUCCESS)
    provider = TracerProvider(resource=Resource.create({
        "service.name": service_name, "openinference.project.name": run.name,
        "memtrace.run": run.name, "memtrace.config": json.dumps(run.config, default=str)[:4000],
    }))
    provider.add_span_processor(BatchSpanProcessor(counting, max_queue_size=max(2048, _count_spans(run) + 64),
                                                   max_export_batch_size=256, schedule_delay_millis=200))
    tracer = provider.get_tracer("memtrace_opt.export")
    with _otel_told() as told:
        traces, emitted = _replay_run(run, tracer, trace_api)
        provider.force_flush(timeout_millis=120_000)
        provider.shutdown()
    if counting.failed or counting.sent < emitted:
        why = f" ({told.said[0]})" if told.said else ""  # the first thing that went wrong
        raise MemtraceError(f"could not deliver {emitted - counting.sent} of {emitted} spans to "
                            f"{endpoint or 'the exporter'}{why}; is the collector running?")
    log.info("exported %d spans in %d traces", emitted, traces)
    return OtlpExportResult(endpoint=endpoint, traces=traces, spans=emitted)


def _replay_run(run: RunArtifacts, tracer: Tracer, trace_api: Any) -> tuple[int, int]:
    """Emits the spans of every graph of `run`; returns (traces, spans)."""
    by_graph: dict[str, list[dict[str, Any]]] = {}
    for case in run.cases:
        by_graph.setdefault(str(case.get("graph") or ""), []).append(case)
    verdicts = run.verdicts_by_case()
    traces = emitted = 0
    for rel in run.graph_files():
        graph = run.graph(rel)
        if graph is None:
            continue
        count = _replay(tracer, trace_api, graph, by_graph.get(rel, []), verdicts)
        traces += bool(count)
        emitted += count
    return traces, emitted
