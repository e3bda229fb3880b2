"""The HTML report of a run: one self-contained page (no network) with the run summary, the failed questions
with their verdicts, each question's memory evolution subgraph, and the optimization rounds.

    from memtrace_opt.report import write_report
    result = write_report("runs/mem0-locomo")          # -> runs/mem0-locomo/report.html
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from memtrace_opt.report._diff import word_diff, word_diff_html
from memtrace_opt.report._html import embed_json, render_html
from memtrace_opt.report._payload import build_payload
from memtrace_opt.report._run import RunArtifacts, load_run, read_graph
from memtrace_opt.report._subgraph import QuestionView, question_view, read_path

__all__ = [
    "ReportResult",
    "write_report",
    "render_report",
    "build_payload",
    "render_html",
    "embed_json",
    "load_run",
    "read_graph",
    "RunArtifacts",
    "QuestionView",
    "question_view",
    "read_path",
    "word_diff",
    "word_diff_html",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportResult:
    path: Path
    failed: int  # failed questions listed
    views: int  # of them with a graph view
    bytes: int


def render_report(run: RunArtifacts, *, max_nodes: int = 150) -> tuple[str, dict]:
    """The page's HTML and the payload it embeds."""
    payload = build_payload(run, max_nodes=max_nodes)
    return render_html(payload), payload


def write_report(run_dir: str | Path, out: str | Path | None = None, *, max_nodes: int = 150) -> ReportResult:
    """Writes the report of the run at `run_dir` to `out` (default `<run_dir>/report.html`).
    `max_nodes` caps each question's graph view. Raises MemtraceError when `run_dir` is not a run."""
    run = load_run(run_dir)
    page, payload = render_report(run, max_nodes=max_nodes)
    path = Path(out) if out is not None else run.report_path
    path.parent.mkdir(parents=True, exist_ok=True)
    data = page.encode("utf-8")
    path.write_bytes(data)
    log.info("wrote %s (%d bytes)", path, len(data))
    return ReportResult(path=path, failed=len(payload["cases"]), views=len(payload["views"]), bytes=len(data))
