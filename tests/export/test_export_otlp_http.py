"""`memtrace export RUN --otlp URL` over the wire: a fake-LM run sent over OTLP/HTTP (protobuf) to a receiver on
loopback, decoded with opentelemetry-proto, and checked against the run's own graphs, cases and verdicts."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from required import need_module

from memtrace_opt.cli import run_cli
from memtrace_opt.report import load_run


class Receiver:
    """An OTLP/HTTP traces receiver on 127.0.0.1: keeps each decoded ExportTraceServiceRequest and its headers."""

    def __init__(self) -> None:
        service = need_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2",
                              "pip install -e '.[dev]' installs it")
        self.requests: list[Any] = []
        self.content_types: list[str] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers.get("Content-Type") or "")
                request = service.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                reply = service.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) for every span received."""
        return [(attributes(resource.resource.attributes), span)
                for request in self.requests for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def attributes(values: Any) -> dict[str, Any]:
    """An OTLP KeyValue list as a dict of plain values."""
    out: dict[str, Any] = {}
    for item in values:
        kind = item.value.WhichOneof("value")
        out[item.key] = getattr(item.value, kind) if kind else None
    return out


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mem0 run of the fake LM over the shipped sample conversation, its failures attributed (lineage)."""
    root = tmp_path_factory.mktemp("otlp")
    config = root / "run.yaml"
    config.write_text("settings: {embedder: hash}\n")
    run = root / "run"
    assert run_cli(["run", "--system", "mem0", "--lm", "fake", "--data", "sample", "--no-judge", "-q",
                    "--config", str(config), "--out", str(run)]) == 0
    assert run_cli(["attribute", str(run), "--method", "lineage", "--embedder", "hash", "-q"]) == 0
    return run


@pytest.fixture
def received(fake_run: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[tuple[Receiver, str]]:
    with Receiver() as receiver:
        assert run_cli(["export", str(fake_run), "--otlp", receiver.endpoint]) == 0
        yield receiver, capsys.readouterr().err


def test_every_span_arrives_as_otlp_protobuf_at_v1_traces(fake_run: Path, received: tuple[Receiver, str]) -> None:
    receiver, said = received
    spans = receiver.spans()
    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    assert f"sent {len(spans):,} spans in 1 traces to {receiver.endpoint}/v1/traces" in " ".join(said.split())
    resource = spans[0][0]
    assert resource["service.name"] == "memtrace-opt" and resource["memtrace.run"] == fake_run.name
    assert json.loads(resource["memtrace.config"])["system"] == "mem0"
    assert len({span.trace_id for _, span in spans}) == 1


def test_the_spans_are_the_graph_ops_lm_calls_and_questions(fake_run: Path, received: tuple[Receiver, str]) -> None:
    receiver, _ = received
    spans = [span for _, span in receiver.spans()]
    run = load_run(fake_run)
    graph = run.graph(run.cases[0]["graph"])
    ops = {node: data for node, data in graph.nodes(data=True) if data.get("kind") == "op"}
    by_node = {attributes(s.attributes)["graph.node.id"]: s for s in spans}
    for node, data in ops.items():
        span = by_node[node]
        assert span.name == data["op"]
        assert (span.start_time_unix_nano, span.end_time_unix_nano) == (
            int(data["started_at"] * 1e9), int(data["ended_at"] * 1e9))
    kinds = [attributes(s.attributes)["openinference.span.kind"] for s in spans]
    assert kinds.count("LLM") == sum(len(d["lm_calls"]) for d in ops.values()) > 0
    assert len(spans) == 1 + len(run.cases) + len(ops) + kinds.count("LLM")
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 1 and all(s.parent_span_id in ids for s in spans if s.parent_span_id)


def test_each_question_carries_its_outcome_and_verdict(fake_run: Path, received: tuple[Receiver, str]) -> None:
    receiver, _ = received
    by_node = {attributes(s.attributes)["graph.node.id"]: s for _, s in receiver.spans()}
    run = load_run(fake_run)
    verdicts = run.verdicts_by_case()
    blamed = 0
    for case in run.cases:
        span = by_node[f"q:{case['question_id']}"]
        found = attributes(span.attributes)
        assert found["input.value"] == case["question"] and found["memtrace.correct"] is case["correct"]
        verdict = next((v for v in verdicts.get(case["case_id"], []) if v.get("error_type") and not v.get("error")),
                       None)
        if verdict is None:
            assert "memtrace.verdict.error_type" not in found
            continue
        blamed += 1
        assert found["memtrace.verdict.error_type"] == verdict["error_type"]
        labels = {attributes(e.attributes).get("gen_ai.evaluation.score.label") for e in span.events}
        assert verdict["error_type"] in labels
        op_labels = {attributes(e.attributes).get("gen_ai.evaluation.score.label")
                     for e in by_node[verdict["op_id"]].events}
        assert verdict["error_type"] in op_labels  # the blamed op's span carries the verdict too
    assert blamed > 0  # the fake run has failures lineage attributed


class Refusing:
    """An HTTP endpoint on 127.0.0.1 that answers every POST with 500."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="otlp-500", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.mark.parametrize("answer", ["500", "refused"])
def test_an_endpoint_that_fails_is_one_line_and_exit_2(answer: str, demo_run: Path, closed_api_base: str) -> None:
    """In a terminal (a process of its own, no logging set up): the exporter's retries and failures stay quiet,
    and the error line says what the endpoint answered."""
    need_module("opentelemetry.exporter.otlp.proto.http", "pip install -e '.[dev]' installs it")
    server = Refusing() if answer == "500" else None
    endpoint = server.endpoint if server else closed_api_base.removesuffix("/v1")
    try:
        done = subprocess.run([sys.executable, "-c", "from memtrace_opt.cli import main; main()", "export",
                               str(demo_run), "--otlp", endpoint], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OTEL_EXPORTER_OTLP_TIMEOUT": "2"})
    finally:
        if server:
            server.close()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: could not deliver"), done.stderr
    assert ("code: 500" if answer == "500" else "Connection refused") in lines[0]
