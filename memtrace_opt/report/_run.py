"""Reading a run directory for the report and the exporters: every artifact is optional except cases.jsonl.

Rows are kept as plain dicts (read with `.get`), so a run written by an older or newer memtrace-opt still
renders: a missing field shows as empty, it never fails the report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from memtrace_opt.errors import MemtraceError
from memtrace_opt.redact import redact, redact_text
from memtrace_opt.rundir import RunDir, read_jsonl

__all__ = ["RunArtifacts", "load_run", "read_graph"]

log = logging.getLogger(__name__)


def read_graph(path: Path) -> nx.MultiDiGraph:
    """An evolution graph file (`networkx.node_link_data(G, edges="edges")` JSON) as a MultiDiGraph, read with
    `memtrace_opt.tracing.graph_from_json` (which checks the schema version) when the tracing package imports.
    Secrets a file written by an older release may hold are redacted on the way in."""
    try:
        from memtrace_opt.tracing.graph import graph_from_json
    except ImportError:  # a partial install: read the documented format directly
        return _read_node_link(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise MemtraceError(f"{path}: cannot read the evolution graph ({error})") from error
    try:
        graph = graph_from_json(redact_text(text))
    except (ValueError, KeyError) as error:
        raise MemtraceError(f"{path}: cannot read the evolution graph ({error})") from error
    return graph if isinstance(graph, nx.MultiDiGraph) else nx.MultiDiGraph(graph)


def _read_node_link(path: Path) -> nx.MultiDiGraph:
    try:
        data = redact(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as error:
        raise MemtraceError(f"{path}: cannot read the evolution graph ({error})") from error
    data.setdefault("directed", True)
    data.setdefault("multigraph", True)
    key = "edges" if "edges" in data else "links"
    graph = nx.node_link_graph(data, edges=key)
    if not isinstance(graph, nx.MultiDiGraph):
        graph = nx.MultiDiGraph(graph)
    return graph


@dataclass
class RunArtifacts:
    """What a run directory holds. `graph(path)` loads an evolution graph once and keeps it."""

    root: Path
    config: dict[str, Any]
    manifest: dict[str, Any]
    cases: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    _graphs: dict[str, nx.MultiDiGraph | None] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.root.resolve().name

    @property
    def program_path(self) -> Path:
        return RunDir(self.root).program_path

    @property
    def report_path(self) -> Path:
        return RunDir(self.root).report_path

    def verdicts_by_case(self) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for verdict in self.verdicts:
            grouped.setdefault(str(verdict.get("case_id")), []).append(verdict)
        return grouped

    def graph_files(self) -> list[str]:
        """The graph paths (relative to the run) that cases name, plus any other file under graphs/."""
        named = [str(c["graph"]) for c in self.cases if c.get("graph")]
        extra = sorted(str(p.relative_to(self.root)) for p in (self.root / "graphs").glob("*.json"))
        return list(dict.fromkeys(named + extra))

    def graph(self, relative: str | None) -> nx.MultiDiGraph | None:
        """The graph at `relative` (a case's `graph` field), or None when absent or unreadable (logged)."""
        if not relative:
            return None
        if relative not in self._graphs:
            path = self.root / relative
            if not path.exists():
                log.warning("%s: graph file missing", path)
                self._graphs[relative] = None
            else:
                try:
                    self._graphs[relative] = read_graph(path)
                except MemtraceError as error:
                    log.warning("%s", error)
                    self._graphs[relative] = None
        return self._graphs[relative]


def load_run(root: str | Path) -> RunArtifacts:
    """Reads a run directory; raises MemtraceError when it is not one (no cases.jsonl). Every value is redacted
    (`memtrace_opt.redact`), so the report and the exporters never pass on a secret an older run wrote."""
    run = RunDir(root).require()
    try:
        config = run.read_config()
        manifest = run.read_manifest()
    except (OSError, ValueError) as error:
        raise MemtraceError(f"{run.root}: cannot read the run's config or manifest ({error})") from error
    return RunArtifacts(
        root=run.root,
        config=redact(config) if isinstance(config, dict) else {},
        manifest=redact(manifest) if isinstance(manifest, dict) else {},
        cases=redact(read_jsonl(run.cases_path)),
        verdicts=redact(read_jsonl(run.verdicts_path)),
    )
