"""Root-cause labels a person gives a run's failed questions: `RUN/labels.jsonl`, one label per line.

A line is the bench label of docs/design.md with the case it labels: `{schema_version, case_id, error_type, op_id, op,
source: "human", ops, rationale, by, at}`. The labelling page (`memtrace serve RUN`, or the report opened as a
plain file, which downloads the lines instead) writes them; `memtrace bench import` turns them into bench cases.
A case labelled twice keeps its latest line.

    line = make_label(run, {"case_id": "...", "error_type": "UpdateError", "ops": ["op:12"], "rationale": "..."})
    append_label(run.root, line)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from memtrace_opt.errors import MemtraceError
from memtrace_opt.report._run import RunArtifacts
from memtrace_opt.rundir import append_jsonl, read_jsonl

__all__ = ["LABELS_FILE", "LABELS_SCHEMA_VERSION", "HUMAN", "LabelError", "make_label", "check_ops", "append_label",
           "read_labels", "latest_labels"]

LABELS_FILE = "labels.jsonl"
LABELS_SCHEMA_VERSION = 1
HUMAN = "human"
RATIONALE_CAP = 1000


class LabelError(MemtraceError):
    """A label that cannot be taken: unknown case or error type, no op, or an op its graph lacks."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _one_line(text: Any, cap: int = RATIONALE_CAP) -> str:
    return " ".join(str(text or "").split())[:cap]


def check_ops(graph: nx.MultiDiGraph | None, ops: list[str], case_id: str) -> dict[str, str]:
    """op id -> op name for each of `ops`; LabelError naming the case when the graph lacks one (or is missing)."""
    if graph is None:
        raise LabelError(f"case {case_id}: its evolution graph is missing, so its ops cannot be checked")
    names: dict[str, str] = {}
    for op_id in ops:
        data = graph.nodes[op_id] if op_id in graph else None
        if data is None or data.get("kind") != "op":
            raise LabelError(f"case {case_id}: its graph has no op {op_id}")
        names[op_id] = str(data.get("op") or "")
    return names


def make_label(run: RunArtifacts, form: Mapping[str, Any], *, by: str = "", at: str | None = None) -> dict[str, Any]:
    """The label line for a submitted form (`case_id`, `error_type`, `ops`, `rationale`, `by`), checked against
    the run: the case must be one of its questions, the error type one of ERROR_TYPES, and unless it is GoldError
    (nothing in the pipeline at fault: `ops` is emptied) at least one op, each an op of the case's graph.
    `by` is the default labeller when the form names none; `at` defaults to now. LabelError otherwise."""
    from memtrace_opt.attribution import ERROR_TYPES, GOLD  # on first use: the report itself needs no dspy

    case_id = str(form.get("case_id") or "")
    case = next((c for c in run.cases if str(c.get("case_id")) == case_id), None)
    if case is None:
        raise LabelError(f"no question {case_id!r} in the run {run.name}")
    error_type = str(form.get("error_type") or "")
    if error_type not in ERROR_TYPES:
        raise LabelError(f"case {case_id}: unknown error type {error_type!r}; choose from {', '.join(ERROR_TYPES)}")
    raw = form.get("ops") or []
    if isinstance(raw, str):
        raw = raw.replace(",", " ").split()
    ops = list(dict.fromkeys(str(op).strip() for op in raw if str(op).strip()))
    if error_type == GOLD:
        ops = []
    elif not ops:
        raise LabelError(f"case {case_id}: name the root-cause op (or GoldError when the gold or the metric is at fault)")
    names = check_ops(run.graph(case.get("graph")), ops, case_id) if ops else {}
    return {
        "schema_version": LABELS_SCHEMA_VERSION,
        "case_id": case_id,
        "error_type": error_type,
        "op_id": ops[0] if ops else None,
        "op": names[ops[0]] if ops else None,
        "source": HUMAN,
        "ops": ops,
        "rationale": _one_line(form.get("rationale")),
        "by": _one_line(form.get("by"), 100) or by,
        "at": at or _now(),
    }


def append_label(run_root: str | Path, line: Mapping[str, Any]) -> Path:
    """Appends one label line to `run_root/labels.jsonl` (flushed at once); returns the file."""
    path = Path(run_root) / LABELS_FILE
    append_jsonl(path, json.dumps(dict(line), sort_keys=True, ensure_ascii=False))
    return path


def read_labels(path: str | Path) -> list[dict[str, Any]]:
    """Every line of a labels file, in order (none when absent); MemtraceError naming the line on bad JSON or a
    line without `case_id` or `error_type`."""
    rows = read_jsonl(Path(path))
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not row.get("case_id") or not row.get("error_type"):
            raise MemtraceError(f"{path}: label {number} has no case_id or error_type")
    return rows


def latest_labels(path: str | Path) -> dict[str, dict[str, Any]]:
    """case_id -> its latest label line."""
    return {str(row["case_id"]): row for row in read_labels(path)}
