"""Questions one asks of an evolution graph: a unit's life, an op's neighbourhood, how evidence reached (or
failed to reach) an answer. Every function reads the graph only; node lists come back in graph order (the
order `build_graph` added them: turns, questions, then ops by `seq` with what each produced)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from memtrace_opt.tracing.graph import answer_node, question_node, turn_id

__all__ = [
    "UnitVersion",
    "UnitLife",
    "OpView",
    "EvidencePath",
    "unit_life",
    "op_subgraph",
    "paths_to_answer",
    "ancestors",
    "descendants",
    "evidence_path",
    "op_nodes",
    "inputs_of",
    "outputs_of",
    "in_graph_order",
]


def in_graph_order(G: nx.MultiDiGraph, nodes: Iterable[str]) -> list[str]:
    wanted = set(nodes)
    return [n for n in G.nodes if n in wanted]


def inputs_of(G: nx.MultiDiGraph, node: str) -> list[str]:
    """Nodes with an edge into `node` (an op's inputs, or a var's producer)."""
    return list(dict.fromkeys(G.predecessors(node)))


def outputs_of(G: nx.MultiDiGraph, node: str) -> list[str]:
    """Nodes `node` has an edge to (an op's outputs, or the ops that consumed a var)."""
    return list(dict.fromkeys(G.successors(node)))


def op_nodes(G: nx.MultiDiGraph, op: str | None = None) -> list[str]:
    """Every op node (optionally only those of operation name `op`), by seq."""
    found = [(d["seq"], n) for n, d in G.nodes(data=True) if d.get("kind") == "op" and (op is None or d["op"] == op)]
    return [n for _, n in sorted(found)]


def ancestors(G: nx.MultiDiGraph, node: str) -> list[str]:
    """Every node with a path to `node`, in graph order."""
    return in_graph_order(G, nx.ancestors(G, node))


def descendants(G: nx.MultiDiGraph, node: str) -> list[str]:
    """Every node reachable from `node`, in graph order."""
    return in_graph_order(G, nx.descendants(G, node))


# units --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnitVersion:
    """One version of a unit: its node, the op that wrote it, and the ops that read it."""

    node: str
    version: int
    text: str | None
    deleted: bool
    written_by: str | None
    read_by: tuple[str, ...]


@dataclass(frozen=True)
class UnitLife:
    """Every version of one unit, oldest first. `ops` lists the writing ops between versions, in order."""

    unit_id: str
    versions: tuple[UnitVersion, ...]

    @property
    def ops(self) -> list[str]:
        return [v.written_by for v in self.versions if v.written_by is not None]

    @property
    def deleted(self) -> bool:
        return bool(self.versions) and self.versions[-1].deleted

    @property
    def nodes(self) -> list[str]:
        return [v.node for v in self.versions]


def unit_life(G: nx.MultiDiGraph, unit_id: str) -> UnitLife:
    """The version chain of `unit_id` (empty if the graph has no such unit)."""
    found = sorted(
        (d["version"], n) for n, d in G.nodes(data=True) if d.get("vtype") == "memory" and d.get("unit_id") == unit_id
    )
    versions = []
    for version, node in found:
        data = G.nodes[node]
        writers = [p for p in G.predecessors(node) if G.nodes[p].get("kind") == "op"]
        readers = [s for s in outputs_of(G, node) if G.nodes[s].get("kind") == "op"]
        writer = writers[0] if writers else None
        versions.append(
            UnitVersion(
                node=node,
                version=version,
                text=data.get("value"),
                deleted=bool(data.get("deleted")),
                written_by=writer,
                read_by=tuple(r for r in readers if r != _next_writer(G, node, readers)),
            )
        )
    return UnitLife(unit_id, tuple(versions))


def _next_writer(G: nx.MultiDiGraph, node: str, readers: list[str]) -> str | None:
    """The op that turned this version into the next one (it takes it as input and writes the unit)."""
    unit = G.nodes[node]["unit_id"]
    for op in readers:
        for out in G.successors(op):
            d = G.nodes[out]
            if d.get("unit_id") == unit and d.get("version") == G.nodes[node]["version"] + 1:
                return op
    return None


# ops ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpView:
    """One op call and its neighbourhood."""

    node: str
    op: str
    predictor: str | None
    seq: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    parent: str | None
    children: tuple[str, ...]
    lm_calls: tuple[dict[str, Any], ...]
    error: str | None
    attrs: dict[str, Any] = field(repr=False, default_factory=dict)


def op_subgraph(G: nx.MultiDiGraph, op_node: str) -> OpView:
    """The op's input and output nodes, its enclosing op, the ops nested in it, and its LM calls."""
    data = G.nodes[op_node]
    if data.get("kind") != "op":
        raise ValueError(f"{op_node} is not an op node")
    children = [n for n in op_nodes(G) if G.nodes[n].get("parent") == op_node]
    return OpView(
        node=op_node,
        op=data["op"],
        predictor=data.get("predictor"),
        seq=data["seq"],
        inputs=tuple(inputs_of(G, op_node)),
        outputs=tuple(outputs_of(G, op_node)),
        parent=data.get("parent"),
        children=tuple(children),
        lm_calls=tuple(data.get("lm_calls") or ()),
        error=data.get("error"),
        attrs=dict(data),
    )


# evidence -----------------------------------------------------------------------------------------------
def paths_to_answer(
    G: nx.MultiDiGraph, turn_ids: Iterable[str], question_id: str, *, max_paths: int = 100
) -> list[list[str]]:
    """Simple paths from each turn (`D1:3` or `turn:D1:3`) to `ans:{question_id}`, shortest first, at most
    `max_paths` in all (a fan-out graph can hold very many)."""
    target = answer_node(question_id)
    if target not in G:
        return []
    upstream = nx.ancestors(G, target)
    paths: list[list[str]] = []
    for source in _turn_nodes(turn_ids):
        if source not in upstream:
            continue
        keep = (nx.descendants(G, source) & upstream) | {source, target}
        found = nx.all_simple_paths(G.subgraph(keep), source, target)
        paths.extend(itertools.islice(found, max_paths - len(paths)))
        if len(paths) >= max_paths:
            break
    return sorted(paths, key=len)


def _turn_nodes(evidence: Iterable[str]) -> list[str]:
    """Turn node ids from dialogue ids; a malformed id like "D8:6; D9:17" gives both turns."""
    out: list[str] = []
    for item in evidence:
        for part in re.split(r"[;,\s]+", str(item)):
            if part:
                out.append(turn_id(part))
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class EvidencePath:
    """The nodes on any path from the evidence turns to the answer (graph order), which evidence turns reach
    the answer and which do not (or are not in the graph). Iterating gives `nodes`."""

    question_id: str
    nodes: tuple[str, ...]
    reached: tuple[str, ...]
    unreached: tuple[str, ...]

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.nodes

    def __len__(self) -> int:
        return len(self.nodes)


def evidence_path(G: nx.MultiDiGraph, question_id: str, evidence: Iterable[str] | None = None) -> EvidencePath:
    """Nodes on any path from the evidence turns (default: the question node's `evidence`) to the answer."""
    target = answer_node(question_id)
    if evidence is None:
        evidence = G.nodes[question_node(question_id)].get("evidence", []) if question_node(question_id) in G else []
    turns = _turn_nodes(evidence)
    if target not in G:
        return EvidencePath(question_id, (), (), tuple(turns))
    upstream = nx.ancestors(G, target)
    on_path: set[str] = set()
    reached, unreached = [], []
    for turn in turns:
        if turn in upstream:
            reached.append(turn)
            on_path.add(turn)
            on_path |= nx.descendants(G, turn) & upstream
        else:
            unreached.append(turn)
    if reached:
        on_path.add(target)
    return EvidencePath(question_id, tuple(in_graph_order(G, on_path)), tuple(reached), tuple(unreached))
