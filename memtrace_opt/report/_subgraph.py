"""The part of a conversation's evolution graph that tells one question's story, small enough to draw.

A whole conversation graph has thousands of nodes, and almost all of them are ancestors of every answer
(each memory write reads earlier memories). So the view is not "all ancestors" but, in priority order:

1. the question, the answer, the gold evidence turns and the blamed op(s);
2. the read path: every node on a path from the question to the answer (retrieval, context, answering op);
3. the blamed op's direct inputs and outputs;
4. the evidence flow: where the evidence turns' content went, followed forward op by op. From a memory unit
   it follows only the op that wrote its next version or an op on the read path (its life, and whether this
   question retrieved it), not every later op that merely read it;
5. the inputs of the read-path ops (what was retrieved), and the version chain of every memory unit shown
   (all its versions and the ops that wrote them).

Each group is capped, and the whole view at `max_nodes`. `evidence_path` is the set of nodes on a path from an
evidence turn to the answer inside the view (version steps count as edges): empty when the fact was lost.
Self-contained (networkx only), so it works on any graph in the docs/design.md schema.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

__all__ = ["QuestionView", "question_view", "read_path", "unit_versions", "VERSION_ROLE"]

VERSION_ROLE = "version"
_MEM_RE = re.compile(r"^mem:(?P<unit>.+)@(?P<version>\d+)$")


@dataclass(frozen=True)
class QuestionView:
    """The nodes and edges drawn for one question, and which of them the page highlights."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, str], ...]  # (source, target, role): input, output or version
    evidence_turns: tuple[str, ...]  # evidence turn nodes present in the graph
    missing_evidence: tuple[str, ...]  # evidence dia_ids the graph has no turn for
    evidence_flow: frozenset[str]  # nodes the evidence reached
    evidence_path: frozenset[str]  # nodes on a path evidence -> answer
    read_path: frozenset[str]  # nodes on a path question -> answer
    blamed: tuple[str, ...]
    truncated: bool  # some relevant nodes were left out (caps)

    @property
    def reaches_answer(self) -> bool:
        return bool(self.evidence_path)


def _is_op(graph: nx.MultiDiGraph, node: str) -> bool:
    return graph.nodes[node].get("kind") == "op"


def _seq(graph: nx.MultiDiGraph, node: str) -> int:
    seq = graph.nodes[node].get("seq")
    return seq if isinstance(seq, int) else 1 << 40


def _unit_of(graph: nx.MultiDiGraph, node: str) -> tuple[str, int] | None:
    data = graph.nodes[node]
    if data.get("unit_id") is not None and data.get("version") is not None:
        try:
            return str(data["unit_id"]), int(data["version"])
        except (TypeError, ValueError):
            return None
    match = _MEM_RE.match(node)
    return (match["unit"], int(match["version"])) if match else None


def unit_versions(graph: nx.MultiDiGraph) -> dict[str, list[str]]:
    """unit_id -> its version nodes, oldest first."""
    chains: dict[str, list[tuple[int, str]]] = {}
    for node in graph.nodes:
        unit = _unit_of(graph, node)
        if unit is not None:
            chains.setdefault(unit[0], []).append((unit[1], node))
    return {unit: [n for _, n in sorted(versions)] for unit, versions in chains.items()}


class _Picker:
    """An ordered node set with a global cap; `truncated` records that something was left out."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.order: dict[str, None] = {}
        self.truncated = False

    def add(self, nodes: Iterable[str], limit: int | None = None) -> None:
        added = 0
        for node in nodes:
            if node in self.order:
                continue
            if len(self.order) >= self.cap or (limit is not None and added >= limit):
                self.truncated = True
                return
            self.order[node] = None
            added += 1


def _read_path(graph: nx.MultiDiGraph, question: str | None, answer: str | None) -> list[str]:
    if question is None or answer is None:
        return [n for n in (question, answer) if n is not None]
    forward = nx.descendants(graph, question) | {question}
    if answer not in forward:
        return [question, answer]
    back, queue = {answer}, deque([answer])
    while queue:
        for pred in graph.predecessors(queue.popleft()):
            if pred in forward and pred not in back:
                back.add(pred)
                queue.append(pred)
    return list(nx.lexicographical_topological_sort(graph.subgraph(back), key=lambda n: (_seq(graph, n), n)))


def read_path(graph: nx.MultiDiGraph, question_id: str) -> list[str]:
    """The nodes on a path from `q:{question_id}` to `ans:{question_id}` (retrieval, context, answering op),
    in execution order; just the ends that exist when the answer is not reachable from the question."""
    question, answer = f"q:{question_id}", f"ans:{question_id}"
    return _read_path(graph, question if question in graph else None, answer if answer in graph else None)


def _evidence_flow(graph: nx.MultiDiGraph, turns: list[str], read_path: set[str], *, limit: int,
                   fanout: int = 4, depth: int = 14) -> tuple[list[str], bool]:
    """Forward BFS from the evidence turns (see the module docstring); returns nodes in discovery order."""
    seen: dict[str, None] = dict.fromkeys(turns)
    queue = deque((t, 0) for t in turns)
    cut = False
    while queue:
        node, level = queue.popleft()
        if level >= depth:
            cut = True
            continue
        nexts = list(graph.successors(node))
        unit = _unit_of(graph, node)
        if unit is not None:  # a memory version: its next version's writer, or this question's read path
            nexts = [n for n in nexts if n in read_path or any(
                (u := _unit_of(graph, s)) is not None and u[0] == unit[0] for s in graph.successors(n))]
        nexts.sort(key=lambda n: (n not in read_path, _seq(graph, n), n))
        if len(nexts) > fanout:
            nexts, cut = nexts[:fanout], True
        for nxt in nexts:
            if nxt in seen:
                continue
            if len(seen) >= limit:
                return list(seen), True
            seen[nxt] = None
            queue.append((nxt, level + 1))
    return list(seen), cut


def _version_edges(graph: nx.MultiDiGraph, nodes: Iterable[str]) -> list[tuple[str, str, str]]:
    by_unit: dict[str, list[tuple[int, str]]] = {}
    for node in nodes:
        unit = _unit_of(graph, node)
        if unit is not None:
            by_unit.setdefault(unit[0], []).append((unit[1], node))
    edges = []
    for versions in by_unit.values():
        ordered = [n for _, n in sorted(versions)]
        edges += [(a, b, VERSION_ROLE) for a, b in zip(ordered, ordered[1:], strict=False)]
    return edges


def _reach(start: Iterable[str], adjacency: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    queue = deque(seen)
    while queue:
        for nxt in adjacency.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def question_view(graph: nx.MultiDiGraph, *, question_id: str, evidence: Iterable[str] = (),
                  blamed: Iterable[str] = (), max_nodes: int = 150, versions: dict[str, list[str]] | None = None,
                  ) -> QuestionView:
    """The view of question `question_id` (see the module docstring). `evidence` are dia_ids; `blamed` op ids
    (unknown ones are ignored); `versions` is `unit_versions(graph)`, passed in when viewing many questions."""
    versions = unit_versions(graph) if versions is None else versions
    question = f"q:{question_id}" if f"q:{question_id}" in graph else None
    answer = f"ans:{question_id}" if f"ans:{question_id}" in graph else None
    # a malformed evidence item such as "D8:6; D9:17" names both turns
    dia_ids = list(dict.fromkeys(p for e in evidence for p in re.split(r"[;,\s]+", str(e)) if p))
    turns = [f"turn:{d}" for d in dia_ids if f"turn:{d}" in graph]
    missing = tuple(d for d in dia_ids if f"turn:{d}" not in graph)
    blamed_ops = [b for b in dict.fromkeys(blamed) if b in graph]

    pick = _Picker(max_nodes)
    pick.add(n for n in (question, answer) if n)
    pick.add(turns, limit=12)
    pick.add(blamed_ops)
    read = _read_path(graph, question, answer)
    if question is not None:  # ops that read the question (a retrieval whose result reached nothing) and their outputs
        asked = sorted((n for n in graph.successors(question) if _is_op(graph, n)), key=lambda n: (_seq(graph, n), n))[:6]
        read += [n for op in asked for n in (op, *sorted(graph.successors(op))[:6]) if n not in read]
    read_set = set(read)
    pick.add(read, limit=40)
    for op in blamed_ops:
        pick.add(sorted(graph.predecessors(op), key=lambda n: (n not in read_set, n)), limit=8)
        pick.add(sorted(graph.successors(op)), limit=8)
    flow, flow_cut = _evidence_flow(graph, turns, read_set, limit=max(24, max_nodes // 2))
    pick.add(flow)
    for op in (n for n in read if _is_op(graph, n)):
        pick.add(sorted(graph.predecessors(op), key=lambda n: (_seq(graph, n), n)), limit=12)
    for node in list(pick.order):
        unit = _unit_of(graph, node)
        if unit is None:
            continue
        chain = versions.get(unit[0], [node])
        pick.add(chain, limit=8)
        pick.add((p for v in chain if v in pick.order for p in graph.predecessors(v) if _is_op(graph, p)), limit=8)

    chosen = list(pick.order)
    inside = set(chosen)
    edges = sorted({(u, v, str(d.get("role") or ("input" if _is_op(graph, v) else "output")))
                    for u, v, d in graph.edges(chosen, data=True) if v in inside})
    edges += [e for e in _version_edges(graph, chosen) if not graph.has_edge(e[0], e[1])]
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for u, v, _ in edges:
        forward.setdefault(u, set()).add(v)
        backward.setdefault(v, set()).add(u)
    from_evidence = _reach(turns, forward)
    evidence_path = from_evidence & _reach([answer], backward) if answer and answer in from_evidence else set()
    return QuestionView(
        nodes=tuple(chosen),
        edges=tuple(edges),
        evidence_turns=tuple(turns),
        missing_evidence=missing,
        evidence_flow=frozenset(n for n in flow if n in inside) | frozenset(from_evidence),
        evidence_path=frozenset(evidence_path),
        read_path=frozenset(n for n in read if n in inside),
        blamed=tuple(blamed_ops),
        truncated=pick.truncated or flow_cut,
    )
