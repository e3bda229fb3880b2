"""Everything the page shows, computed in Python and embedded as one JSON document.

Only failed questions get a graph view, and only the nodes of their views are described (once per
conversation graph, shared between questions). Long values are cut at `TEXT_CAP` characters with a note
of how much was left out; the page shows the first few hundred with "show more".
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any

import networkx as nx

from memtrace_opt.attribution import ROLE_MEANINGS
from memtrace_opt.memory.roles import OpRole, role_for_name
from memtrace_opt.report._accuracy import accuracy_from_cases, normalize_accuracy
from memtrace_opt.report._diff import word_diff_html
from memtrace_opt.report._layout import layered_layout
from memtrace_opt.report._plot import RoundPoint, accuracy_plot_svg
from memtrace_opt.report._run import RunArtifacts
from memtrace_opt.report._subgraph import QuestionView, question_view, unit_versions

__all__ = ["PAYLOAD_VERSION", "build_payload", "clip", "UNATTRIBUTED"]

log = logging.getLogger(__name__)

PAYLOAD_VERSION = 1
TEXT_CAP = 6000
UNATTRIBUTED = "Unattributed"
_OP_FIELDS = {"kind", "op", "predictor", "seq", "started_at", "ended_at", "inputs", "outputs", "instructions",
              "lm_calls", "error", "parent", "content_key", "role"}
_VAR_FIELDS = {"kind", "vtype", "value", "unit_id", "version", "deleted"}


def clip(value: Any, cap: int = TEXT_CAP) -> str:
    """A value as display text (strings as they are, anything else as indented JSON), cut at `cap`."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n… [{len(text) - cap:,} more characters not included in the report]"


def _short(text: str, width: int = 22) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# summary -------------------------------------------------------------------------------------------------
def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys; None values left out (an unset option says nothing)."""
    if not isinstance(value, dict):
        return {prefix: value} if value is not None else {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _summary(run: RunArtifacts) -> dict[str, Any]:
    config, manifest = run.config, run.manifest
    first = run.cases[0] if run.cases else {}
    usage = manifest.get("usage") or {}
    totals: dict[str, float] = {}
    for row in usage.values():
        if isinstance(row, dict):
            for key in ("calls", "prompt_tokens", "completion_tokens", "seconds", "cache_hits", "failures"):
                totals[key] = totals.get(key, 0.0) + (_number(row.get(key)) or 0.0)
    accuracy = normalize_accuracy(manifest.get("accuracy")) if manifest.get("accuracy") else accuracy_from_cases(run.cases)
    counts = dict(manifest.get("counts") or {})
    counts.setdefault("questions", len(run.cases))
    counts.setdefault("correct", sum(bool(c.get("correct")) for c in run.cases))
    return {
        "run": run.name,
        "system": config.get("system") or first.get("system") or "",
        "dataset": config.get("dataset") or first.get("dataset") or "",
        "data": _flat(config.get("data") or {}),
        "models": config.get("models") or {},
        "program": _flat(config.get("program") or {}),
        "accuracy": accuracy,
        "usage": usage,
        "totals": dict(totals),
        "counts": counts,
        "started_at": manifest.get("started_at"),
        "ended_at": manifest.get("ended_at"),
        "seconds": manifest.get("seconds"),
        "versions": manifest.get("versions") or {},
        **_lineage(run),
    }


def _lineage(run: RunArtifacts) -> dict[str, Any]:
    """The end-of-run lineage warnings (`lineage`) and the note on ops linked by content (`lineage_content`),
    recomputed from the run's graphs, so older runs get them too."""
    try:
        from memtrace_opt.tracing.lineage_check import describe_breaks, describe_content, lineage_check
    except ImportError:  # a partial install: the report still renders
        return {"lineage": [], "lineage_content": None}
    graphs = (run.graph(path) for path in run.graph_files())
    checks = [lineage_check(G) for G in graphs if G is not None]
    return {"lineage": describe_breaks(checks), "lineage_content": describe_content(checks)}


# failed questions ----------------------------------------------------------------------------------------
def _verdict(v: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a verdict line: its fields, whether a replay confirmed it (None: none tested it) and
    how many replays were run for it (their LM use is in `cost.replay_*`)."""
    kept = {key: v.get(key) for key in ("method", "error_type", "op_id", "op", "predictor", "reason", "confidence",
                                        "cost", "error", "confirmed")}
    replays = v.get("replays")
    kept["replays"] = len(replays) if isinstance(replays, list) else 0
    return kept


def _primary(verdicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    good = [v for v in verdicts if v.get("error_type") and not v.get("error")]
    return good[0] if good else None


def _case_row(case: dict[str, Any], verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    primary = _primary(verdicts)
    return {
        "id": str(case.get("case_id")),
        "qid": str(case.get("question_id")),
        "sample": str(case.get("sample_id", "")),
        "question": clip(case.get("question"), 2000),
        "gold": clip(case.get("gold"), 2000),
        "prediction": clip(case.get("prediction"), 2000),
        "category": str(case.get("category") or ""),
        "scores": case.get("scores") or {},
        "evidence": [str(e) for e in case.get("evidence") or []],
        "error": case.get("error"),
        "verdicts": [_verdict(v) for v in verdicts],
        "etype": primary["error_type"] if primary else UNATTRIBUTED,
        "op": (primary.get("op") or "") if primary else "",
        "op_id": (primary.get("op_id") or "") if primary else "",
        "view": None,
    }


# graph views ---------------------------------------------------------------------------------------------
def _label(node: str, data: dict[str, Any]) -> tuple[str, str]:
    if data.get("kind") == "op":
        name = str(data.get("op") or node)
        system, _, step = name.rpartition(".")
        seq = data.get("seq", node.split(":")[-1])
        return _short(step or name, 18), _short(f"#{seq} · {system}" if system else f"#{seq}", 19)
    vtype = str(data.get("vtype") or "")
    kind, _, rest = node.partition(":")
    value = data.get("value")
    preview = _short(value if isinstance(value, str) else json.dumps(value, default=str) if value is not None else "", 18)
    if kind == "turn":
        return f"turn {rest}", preview
    if kind == "mem" or vtype == "memory":
        unit, version = data.get("unit_id", rest.split("@")[0]), data.get("version", rest.rpartition("@")[2])
        return _short(f"{unit} v{version}", 16), "deleted" if data.get("deleted") else preview
    if kind == "q":
        return "question", preview
    if kind == "ans":
        return "final answer", preview
    name = rest.split(":", 1)[-1] if kind == "var" else node
    return _short(name, 16), preview


def _role_label(data: dict[str, Any]) -> str:
    """What the op does in a memory's life, as the report labels it (`ROLE_MEANINGS`): its declared role, else
    the one its name suggests; "" for none."""
    try:
        role = OpRole.parse(data.get("role")) or role_for_name(str(data.get("op") or ""))
    except ValueError:
        role = None
    return ROLE_MEANINGS[role].label if role is not None else ""


def _describe(node: str, data: dict[str, Any]) -> dict[str, Any]:
    title, sub = _label(node, data)
    if data.get("kind") == "op":
        started, ended = _number(data.get("started_at")), _number(data.get("ended_at"))
        calls = []
        for call in data.get("lm_calls") or []:
            if not isinstance(call, dict):
                continue
            messages = call.get("messages") or []
            calls.append({
                "model": call.get("model"),
                "messages": [{"role": str(m.get("role", "")), "content": clip(m.get("content"))}
                             for m in messages if isinstance(m, dict)],
                "response": clip(call.get("response")),
                "prompt_tokens": call.get("prompt_tokens"),
                "completion_tokens": call.get("completion_tokens"),
                "seconds": call.get("seconds"),
                "cached": bool(call.get("cached")),
            })
        return {
            "k": "op", "label": title, "sub": sub, "op": data.get("op"), "role": _role_label(data),
            "predictor": data.get("predictor"),
            "seq": data.get("seq"), "started_at": started, "ended_at": ended,
            "duration": (ended - started) if started is not None and ended is not None else None,
            "instructions": clip(data.get("instructions")), "inputs": clip(data.get("inputs")),
            "outputs": clip(data.get("outputs")), "lm_calls": calls, "error": clip(data.get("error"), 2000),
            "parent": data.get("parent"),
            "extra": {k: clip(v, 1000) for k, v in data.items() if k not in _OP_FIELDS},
        }
    vtype = str(data.get("vtype") or node.partition(":")[0])
    return {
        "k": "var", "label": title, "sub": sub, "vtype": vtype, "value": clip(data.get("value")),
        "unit_id": data.get("unit_id"), "version": data.get("version"), "deleted": bool(data.get("deleted")),
        "extra": {k: clip(v, 1000) for k, v in data.items() if k not in _VAR_FIELDS},
    }


def _flags(node: str, view: QuestionView) -> str:
    flags = ""
    if node in view.evidence_turns:
        flags += "e"
    if node in view.evidence_path:
        flags += "p"
    if node in view.evidence_flow:
        flags += "f"
    if node in view.read_path:
        flags += "r"
    if node in view.blamed:
        flags += "b"
    return flags


def _view_payload(graph: nx.MultiDiGraph, view: QuestionView, sample: str) -> dict[str, Any]:
    ops = {n: int(graph.nodes[n].get("seq", 0) or 0) for n in view.nodes if graph.nodes[n].get("kind") == "op"}
    layout = layered_layout(view.nodes, ops, view.edges)

    def edge_flag(u: str, v: str) -> str:
        if u in view.evidence_path and v in view.evidence_path:
            return "p"
        if u in view.evidence_flow and v in view.evidence_flow:
            return "f"
        return "r" if u in view.read_path and v in view.read_path else ""

    return {
        "sample": sample,
        "nodes": [[n, round(layout.positions[n][0], 1), round(layout.positions[n][1], 1), _flags(n, view)]
                  for n in view.nodes],
        "edges": [[u, v, role, edge_flag(u, v)] for u, v, role in view.edges],
        "w": round(layout.width, 1),
        "h": round(layout.height, 1),
        "trail": [n for n in sorted(ops, key=lambda o: (ops[o], o))
                  if n in view.evidence_flow or n in view.read_path or n in view.blamed],
        "truncated": view.truncated,
        "reaches": view.reaches_answer,
        "missing": list(view.missing_evidence),
    }


# optimize runs -------------------------------------------------------------------------------------------

def _demo_count(candidate: dict[str, Any]) -> int | None:
    """How many demos a candidate sets (the page shows the count, not the worked examples), None: none."""
    demos = candidate.get("demos")
    if isinstance(demos, list):
        return len(demos)
    return int(demos) if isinstance(demos, int) else None

def _optimize(manifest: dict[str, Any]) -> dict[str, Any] | None:
    rounds = [r for r in manifest.get("rounds") or [] if isinstance(r, dict)]
    cut = (manifest.get("optimizer") or {}).get("interrupted")
    interrupted = None
    if isinstance(cut, dict):  # the round the budget cut short
        interrupted = {**cut, "candidates": [{**c, "instruction": clip(c.get("instruction"))}
                                             for c in cut.get("candidates") or [] if isinstance(c, dict)]}
    if not rounds and interrupted is None:
        return None
    baseline = _number((manifest.get("baseline") or {}).get("val_accuracy"))
    points = [RoundPoint(0, baseline, True)] if baseline is not None else []
    diffs = []
    for r in rounds:
        candidates = [c for c in r.get("candidates") or [] if isinstance(c, dict)]
        points.append(RoundPoint(
            int(r.get("round", len(points))), _number(r.get("val_accuracy")), bool(r.get("accepted")),
            tuple((s, bool(c.get("accepted"))) for c in candidates if (s := _number(c.get("val_score"))) is not None),
        ))
        chosen = next((c for c in candidates if c.get("accepted")), None)
        if r.get("accepted") and chosen is not None:
            old, new = str(r.get("previous_instruction") or ""), str(chosen.get("instruction") or "")
            diffs.append({"round": r.get("round"), "predictor": r.get("chosen_predictor"),
                          "html": word_diff_html(old, new), "demos": _demo_count(chosen)})
    return {
        "baseline": baseline,
        "rounds": [{**r, "candidates": [{**c, "instruction": clip(c.get("instruction")), "demos": _demo_count(c)}
                                        for c in r.get("candidates") or [] if isinstance(c, dict)],
                    "previous_instruction": clip(r.get("previous_instruction"))} for r in rounds],
        "plot": accuracy_plot_svg(points),
        "diffs": diffs,
        "stop_reason": str((manifest.get("optimizer") or {}).get("stop_reason") or ""),
        "best": _number((manifest.get("optimizer") or {}).get("best_val_accuracy")),
        "interrupted": interrupted,
        "test": _test(manifest.get("test")),
    }


def _test(test: Any) -> dict[str, Any] | None:
    """The optimization's test figure, before and after, with its label: "held-out test", or "same-conversation
    questions" when the test shared memory with the training and validation questions; None without one."""
    if not isinstance(test, dict) or _number(test.get("optimized_accuracy")) is None:
        return None
    return {"label": str(test.get("label") or "held-out test"),  # a manifest written before the label: held out
            "baseline": _number(test.get("baseline_accuracy")), "optimized": _number(test.get("optimized_accuracy")),
            "questions": test.get("questions")}


def intern_strings(nodes: dict[str, dict[str, Any]], *, min_length: int = 160) -> list[str]:
    """Replaces every long text that occurs more than once in the node details (an instruction, the system
    message every call of a predictor sends) with `{"$s": index}` into the returned table, in place."""
    counts: Counter[str] = Counter()

    def walk(value: Any, visit: Any) -> Any:
        if isinstance(value, str):
            return visit(value)
        if isinstance(value, list):
            return [walk(v, visit) for v in value]
        if isinstance(value, dict):
            return {k: walk(v, visit) for k, v in value.items()}
        return value

    def count(text: str) -> str:
        if len(text) >= min_length:
            counts[text] += 1
        return text

    for described in nodes.values():
        walk(described, count)
    index: dict[str, int] = {}
    table: list[str] = []

    def swap(text: str) -> Any:
        if counts.get(text, 0) < 2:
            return text
        if text not in index:
            index[text] = len(table)
            table.append(text)
        return {"$s": index[text]}

    for sample, described in nodes.items():
        nodes[sample] = walk(described, swap)
    return table


def _labels(run: RunArtifacts) -> dict[str, dict[str, Any]]:
    """The run's root-cause labels (RUN/labels.jsonl), latest per case; none when the file is unreadable (logged)."""
    from memtrace_opt.errors import MemtraceError
    from memtrace_opt.report.labels import LABELS_FILE, latest_labels

    try:
        return latest_labels(run.root / LABELS_FILE)
    except MemtraceError as error:
        log.warning("labels not shown: %s", error)
        return {}


def build_payload(run: RunArtifacts, *, max_nodes: int = 150) -> dict[str, Any]:
    """The report's data: summary, failed questions with verdicts and graph views, optimization rounds, and the
    labels given so far. `labelling` says how the page saves a label: `download` (a plain file: the page
    collects labels and downloads labels.jsonl); the labelling server sets `server`."""
    by_case = run.verdicts_by_case()
    rows: list[dict[str, Any]] = []
    nodes: dict[str, dict[str, Any]] = {}
    views: dict[str, Any] = {}
    versions: dict[str, dict[str, list[str]]] = {}
    for case in run.cases:
        if case.get("correct") and not case.get("error"):
            continue
        row = _case_row(case, by_case.get(str(case.get("case_id")), []))
        rows.append(row)
        key = str(case.get("graph") or "")
        graph = run.graph(key)
        if graph is None:
            continue
        if key not in versions:
            versions[key] = unit_versions(graph)
        blamed = [v["op_id"] for v in row["verdicts"] if v.get("op_id")]
        view = question_view(graph, question_id=row["qid"], evidence=row["evidence"], blamed=blamed,
                             max_nodes=max_nodes, versions=versions[key])
        if not view.nodes:
            continue
        described = nodes.setdefault(key, {})
        for node in view.nodes:
            if node not in described:
                described[node] = _describe(node, graph.nodes[node])
        views[row["id"]] = _view_payload(graph, view, key)
        row["view"] = row["id"]
    etypes = Counter(r["etype"] for r in rows)
    ops = Counter(r["op"] for r in rows if r["op"])
    log.info("report: %d failed questions, %d graph views, %d nodes described", len(rows), len(views),
             sum(len(n) for n in nodes.values()))
    return {
        "payload_version": PAYLOAD_VERSION,
        "generated_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "summary": _summary(run),
        "cases": rows,
        "error_types": dict(etypes.most_common()),
        "ops": dict(ops.most_common()),
        "strings": intern_strings(nodes),
        "nodes": nodes,
        "views": views,
        "optimize": _optimize(run.manifest),
        "labels": {k: v for k, v in _labels(run).items() if k in {r["id"] for r in rows}},
        "labelling": {"mode": "download", "file": "labels.jsonl"},
    }
