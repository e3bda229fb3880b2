"""`memtrace serve RUN`: the report of a run served on the loopback interface, with a labelling form that
writes each label to `RUN/labels.jsonl` as it is saved.

    with LabelServer("runs/mem0-locomo") as server:   # port 0: any free port
        print(server.url)
        server.serve_forever()

Routes: `GET /` the report (rendered once; the labels re-read on every load, so a reload shows them),
`GET /labels.jsonl` the labels file, `POST /labels` one label as JSON (`case_id`, `error_type`, `ops`,
`rationale`, `by`): 200 with the stored line, or 400 with `{"error": ...}` when it cannot be taken.
Only 127.0.0.1 is ever bound: the page has every prompt and answer of the run.
"""

from __future__ import annotations

import getpass
import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memtrace_opt.errors import MemtraceError
from memtrace_opt.report._html import render_html
from memtrace_opt.report._payload import build_payload
from memtrace_opt.report._run import load_run
from memtrace_opt.report.labels import LABELS_FILE, LabelError, append_label, latest_labels, make_label

__all__ = ["LabelServer", "LOOPBACK"]

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
MAX_BODY = 64 * 1024


def _default_labeller() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment: the form's own field then
        return ""


class LabelServer:
    """The report of `run_dir` and its labelling endpoint on `127.0.0.1:port` (0: a free port). Use as a context
    manager, or call `close()`; `serve_forever()` blocks until `shutdown()` (from another thread) or Ctrl-C."""

    def __init__(self, run_dir: str | Path, *, port: int = 0, max_nodes: int = 150, by: str | None = None) -> None:
        self.run = load_run(run_dir)
        self.by = _default_labeller() if by is None else by
        self._payload = build_payload(self.run, max_nodes=max_nodes)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((LOOPBACK, port), _handler(self))
        self._httpd.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    @property
    def labels_path(self) -> Path:
        return self.run.root / LABELS_FILE

    def page(self) -> str:
        """The report with the labels saved so far and the form set to post them here."""
        shown = {r["id"] for r in self._payload["cases"]}
        try:
            saved = latest_labels(self.labels_path)
        except MemtraceError as error:  # a damaged file: the page still opens, without the labels
            log.warning("labels not shown: %s", error)
            saved = {}
        labels = {k: v for k, v in saved.items() if k in shown}
        return render_html({**self._payload, "labels": labels,
                            "labelling": {"mode": "server", "endpoint": "labels", "by": self.by}})

    def save(self, form: dict[str, Any]) -> dict[str, Any]:
        """Checks one submitted label and appends it to RUN/labels.jsonl; LabelError when it cannot be taken."""
        line = make_label(self.run, form, by=self.by)
        with self._lock:
            append_label(self.run.root, line)
        log.info("labelled %s: %s at %s", line["case_id"], line["error_type"], ", ".join(line["ops"]) or "-")
        return line

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        self._httpd.shutdown()

    def close(self) -> None:
        self._httpd.server_close()

    def __enter__(self) -> LabelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: LabelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "memtrace-serve"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            log.debug("%s " + format, self.address_string(), *args)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: Any) -> None:
            self._send(status, json.dumps(data, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path in ("/", "/index.html", "/report.html"):
                self._send(HTTPStatus.OK, server.page().encode("utf-8"), "text/html; charset=utf-8")
            elif path == f"/{LABELS_FILE}":
                data = server.labels_path.read_bytes() if server.labels_path.exists() else b""
                self._send(HTTPStatus.OK, data, "application/x-ndjson; charset=utf-8")
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}"})

        def do_POST(self) -> None:  # noqa: N802 - the base class's name
            if self.path.split("?", 1)[0] != "/labels":
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no endpoint {self.path}"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"a label is one JSON object of at most {MAX_BODY} bytes"})
                return
            try:
                form = json.loads(self.rfile.read(length).decode("utf-8"))
                if not isinstance(form, dict):
                    raise ValueError("not a JSON object")
            except (UnicodeDecodeError, ValueError) as error:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"the label is not a JSON object ({error})"})
                return
            try:
                self._json(HTTPStatus.OK, server.save(form))
            except LabelError as error:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(error)})

    return Handler
