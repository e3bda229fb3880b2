"""`memtrace serve RUN`: the report served on loopback, labels posted by the form written to RUN/labels.jsonl."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from memtrace_opt.errors import MemtraceError
from memtrace_opt.report import load_run, write_report
from memtrace_opt.report.labels import LabelError, append_label, latest_labels, make_label, read_labels
from memtrace_opt.report.serve import LabelServer

DELETED = "mem0/demo/demo-q3"  # a bad update decision (op:10) deleted the memory
RETRIEVAL = "mem0/demo/demo-q4"


@pytest.fixture
def server(demo_run: Path) -> Iterator[LabelServer]:
    with LabelServer(demo_run, by="tester") as served:
        thread = threading.Thread(target=served.serve_forever, daemon=True)
        thread.start()
        yield served
        served.shutdown()
        thread.join(timeout=5)


def _post(server: LabelServer, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(server.url + "labels", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _page_payload(html: str) -> dict:
    start = html.index('<script type="application/json" id="report-data">') + len('<script type="application/json" id="report-data">')
    return json.loads(html[start:html.index("</script>", start)])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode("utf-8")


def test_a_posted_label_is_written_at_once_and_shown_after_a_reload(server: LabelServer) -> None:
    assert server.url.startswith("http://127.0.0.1:") and server.port > 0
    first = _page_payload(_get(server.url))
    assert first["labelling"] == {"mode": "server", "endpoint": "labels", "by": "tester"} and first["labels"] == {}

    status, line = _post(server, json.dumps({"case_id": DELETED, "error_type": "UpdateError", "ops": ["op:10"],
                                             "rationale": "decided DELETE on\n'works at the bookshop'", "by": ""}).encode())
    assert status == 200, line
    [written] = read_labels(server.labels_path)  # on disk before the reply
    assert written == line
    assert (line["source"], line["op_id"], line["op"], line["ops"], line["by"]) == (
        "human", "op:10", "mem0.update_decision", ["op:10"], "tester")
    assert line["rationale"] == "decided DELETE on 'works at the bookshop'" and line["at"].endswith("Z")

    again = _page_payload(_get(server.url))  # a reload shows the label
    assert again["labels"][DELETED]["error_type"] == "UpdateError"
    assert _get(server.url + "labels.jsonl").strip() == json.dumps(line, sort_keys=True, ensure_ascii=False)


def test_two_acceptable_ops_and_gold_error_without_an_op(server: LabelServer) -> None:
    status, line = _post(server, json.dumps({"case_id": RETRIEVAL, "error_type": "RetrievalError",
                                             "ops": ["op:18", "op:19", "op:18"], "by": "ann"}).encode())
    assert status == 200 and line["ops"] == ["op:18", "op:19"] and line["by"] == "ann"
    status, line = _post(server, json.dumps({"case_id": DELETED, "error_type": "GoldError", "ops": ["op:10"],
                                             "rationale": "the gold answer is the old job"}).encode())
    assert status == 200 and (line["ops"], line["op_id"], line["op"]) == ([], None, None)
    assert set(latest_labels(server.labels_path)) == {RETRIEVAL, DELETED}


@pytest.mark.parametrize(("body", "says"), [
    ({"case_id": DELETED, "error_type": "UpdateError", "ops": ["op:999"]}, f"case {DELETED}: its graph has no op op:999"),
    ({"case_id": DELETED, "error_type": "UpdateError", "ops": ["turn:D1:4"]}, "its graph has no op turn:D1:4"),
    ({"case_id": DELETED, "error_type": "UpdateError", "ops": []}, "name the root-cause op"),
    ({"case_id": DELETED, "error_type": "Oops", "ops": ["op:10"]}, "unknown error type 'Oops'"),
    ({"case_id": "nope", "error_type": "UpdateError", "ops": ["op:10"]}, "no question 'nope'"),
])
def test_a_label_that_cannot_be_taken_is_refused_with_one_line(server: LabelServer, body: dict, says: str) -> None:
    status, reply = _post(server, json.dumps(body).encode())
    assert status == 400 and says in reply["error"] and "\n" not in reply["error"]
    assert not server.labels_path.exists()


def test_bad_requests(server: LabelServer) -> None:
    assert _post(server, b"not json")[0] == 400
    assert _post(server, b"[1, 2]")[0] == 400
    with pytest.raises(urllib.error.HTTPError) as missing:
        _get(server.url + "etc/passwd")
    assert missing.value.code == 404


def test_the_plain_file_report_downloads_labels_and_shows_the_saved_ones(demo_run: Path) -> None:
    run = load_run(demo_run)
    append_label(demo_run, make_label(run, {"case_id": DELETED, "error_type": "UpdateError", "ops": "op:10 op:16"},
                                      by="tester", at="2026-01-01T00:00:00Z"))
    payload = _page_payload(write_report(demo_run).path.read_text(encoding="utf-8"))
    assert payload["labelling"]["mode"] == "download"
    assert payload["labels"][DELETED]["ops"] == ["op:10", "op:16"]
    (demo_run / "labels.jsonl").write_text('{"case_id": "x"}\n{"broken\n{}\n', encoding="utf-8")
    assert _page_payload(write_report(demo_run).path.read_text(encoding="utf-8"))["labels"] == {}  # logged, not fatal
    with pytest.raises(MemtraceError, match="line 2 is not valid JSON"):
        read_labels(demo_run / "labels.jsonl")


def test_make_label_checks_against_the_graph(demo_run: Path) -> None:
    run = load_run(demo_run)
    with pytest.raises(LabelError, match=f"case {DELETED}: its graph has no op op:77"):
        make_label(run, {"case_id": DELETED, "error_type": "DeletionError", "ops": ["op:10", "op:77"]})


def test_serve_command_is_registered() -> None:
    from typer.testing import CliRunner

    from memtrace_opt.cli import app

    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "127.0.0.1" in result.output and "labels.jsonl" in result.output


def test_the_command_prints_its_address_and_stops_cleanly(demo_run: Path) -> None:
    import re
    import signal
    import subprocess
    import sys

    code = f"from memtrace_opt.cli import main; main(['serve', {str(demo_run)!r}, '--by', 'cli'])"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline() if proc.stderr else ""
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        assert found, first
        assert "labels go to" in first and "Ctrl-C stops" in first
        assert _page_payload(_get(found.group(0)))["labelling"]["by"] == "cli"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "stopped" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
