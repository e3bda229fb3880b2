"""A read-only view of an evolution graph (docs/design.md schema_version 1) with the lookups attribution needs.

Works on any graph of that schema, including ones built by hand: node ids `turn:{dia_id}`, `op:{seq}`,
`mem:{unit_id}@{version}`, `q:{qid}`, `ans:{qid}`, `var:{seq}:{name}`; edges var -> op (`role="input"`)
and op -> var (`role="output"`).
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx

from memtrace_opt.attribution._types import error_type_for_role
from memtrace_opt.errors import MemtraceError
from memtrace_opt.memory.roles import OpRole, role_for_name

__all__ = ["GraphUnavailable", "GraphView", "load_case_graph", "value_parts", "value_text"]

# Keys whose values are identifiers, not content: left out of a value's text.
_ID_KEYS = frozenset(
    {"$mem", "$turn", "$question", "unit_id", "version", "source_turns", "dia_id", "question_id", "deleted",
     "session_index", "metadata", "evidence", "category_id", "id", "kind", "abstention"}
)


log = logging.getLogger(__name__)

_GUESSED: set[str] = set()  # op names whose role was guessed from the name (warned once each)
_GUESSED_LOCK = threading.Lock()

_VIEWS: weakref.WeakKeyDictionary[nx.MultiDiGraph, GraphView] = weakref.WeakKeyDictionary()
_VIEWS_LOCK = threading.Lock()


class GraphUnavailable(MemtraceError):
    """A case's graph file is missing, unreadable or not an evolution graph."""


def load_case_graph(path: str | Path) -> nx.MultiDiGraph:
    """Read an evolution graph saved with `node_link_data(G, edges="edges")`. Raises GraphUnavailable."""
    path = Path(path)
    if not path.is_file():
        raise GraphUnavailable(f"{path}: no such graph file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        graph = nx.node_link_graph(data, edges="edges", directed=True, multigraph=True)
    except (OSError, ValueError, KeyError, TypeError, nx.NetworkXError) as error:
        raise GraphUnavailable(f"{path}: not a readable evolution graph ({type(error).__name__}: {error})") from error
    if not isinstance(graph, nx.MultiDiGraph):
        graph = nx.MultiDiGraph(graph)
    return graph


def value_text(value: Any, limit: int | None = None) -> str:
    """The content of a JSON value as plain text: every string/number leaf, identifier keys left out."""
    parts: list[str] = []
    _collect(value, parts)
    text = " ".join(p for p in parts if p)
    if limit is not None and len(text) > limit:
        return text[: max(0, limit - 3)] + "..."
    return text


def value_parts(value: Any) -> list[str]:
    """A value's text in parts: one per element of a list (a retrieved unit, a fact), else the whole."""
    if isinstance(value, (list, tuple)):
        return [t for t in (value_text(item) for item in value) if t]
    text = value_text(value)
    return [text] if text else []


def _collect(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, (str, int, float)):
        out.append(str(value))
    elif isinstance(value, Mapping):
        if "$question" in value:  # a question (with its gold answer) is not content an op produced
            return
        for key, item in value.items():
            if key not in _ID_KEYS:
                _collect(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, out)


def refs_in(value: Any) -> Iterator[str]:
    """Node ids named by `$mem` / `$turn` / `$question` markers anywhere in a JSON value."""
    if isinstance(value, list):
        for item in value:
            yield from refs_in(item)
    elif isinstance(value, Mapping):
        for marker in ("$mem", "$turn", "$question"):
            if isinstance(value.get(marker), str):
                yield value[marker]
                return
        for item in value.values():
            yield from refs_in(item)


class GraphView:
    """Lookups over one evolution graph. Never mutates it (and assumes nobody else does while it lives)."""

    def __init__(self, graph: nx.MultiDiGraph) -> None:
        self.graph = graph
        self._text: dict[str, str] = {}
        self._lineage: dict[str, frozenset[str]] = {}
        self._descent: dict[str, frozenset[str]] = {}

    @classmethod
    def of(cls, graph: nx.MultiDiGraph) -> GraphView:
        """A shared view of `graph` (cases of one conversation share the graph, so they share its caches)."""
        with _VIEWS_LOCK:
            view = _VIEWS.get(graph)
            if view is None:
                view = cls(graph)
                _VIEWS[graph] = view
            return view

    # nodes ---------------------------------------------------------------------------------------
    def attrs(self, node: str) -> dict[str, Any]:
        return self.graph.nodes[node] if node in self.graph else {}

    def is_op(self, node: str) -> bool:
        return self.attrs(node).get("kind") == "op"

    @cached_property
    def ops(self) -> list[str]:
        """Every op node, in execution order."""
        return sorted((n for n in self.graph if self.is_op(n)), key=self.seq)

    def seq(self, node: str) -> int:
        value = self.attrs(node).get("seq")
        if isinstance(value, int):
            return value
        if node.startswith("op:"):
            try:
                return int(node[3:])
            except ValueError:
                pass
        return 1 << 30

    def op_name(self, op: str) -> str:
        return str(self.attrs(op).get("op") or "")

    def predictor(self, op: str) -> str | None:
        value = self.attrs(op).get("predictor")
        return str(value) if value else None

    def role(self, op: str) -> OpRole | None:
        """What the op does in a memory's life: the role it declared, else the one its name suggests (a graph
        recorded before ops declared roles, or an op that declares none: warned once per op name)."""
        try:
            declared = OpRole.parse(self.attrs(op).get("role"))
        except ValueError:
            declared = None
        if declared is not None:
            return declared
        name = self.op_name(op)
        guessed = role_for_name(name)
        with _GUESSED_LOCK:
            first = name not in _GUESSED
            _GUESSED.add(name)
        if first and name:
            log.warning("op %s declares no role; %s", name,
                        f"taken as {guessed.value!r} from its name" if guessed else "its name suggests none")
        return guessed

    def error_type(self, op: str, outputs: Any = None) -> str | None:
        """The error type a fault of `op` is, by its role (`ROLE_MEANINGS`); with `outputs`, an update whose
        actions only delete is a deletion."""
        return error_type_for_role(self.role(op), outputs)

    def op_of_id(self, op_id: str | None) -> str | None:
        """The op node of an id like "op:12" (or "12"), if the graph has it."""
        if op_id is None:
            return None
        node = op_id if str(op_id).startswith("op:") else f"op:{op_id}"
        return node if self.is_op(node) else None

    def text(self, node: str) -> str:
        """A var node's content as text (its value, identifiers left out; a memory unit's date appended, as
        the answerer sees it)."""
        cached = self._text.get(node)
        if cached is None:
            value = self.attrs(node).get("value")
            cached = value_text(value)
            stamp = self.attrs(node).get("timestamp")
            if self.is_mem(node) and stamp and not isinstance(value, Mapping):
                cached = f"{cached} ({stamp})"
            self._text[node] = cached
        return cached

    def turn_text(self, node: str) -> str:
        """What was said in a turn (its text and any image caption; no speaker, date or id)."""
        value = self.attrs(node).get("value")
        if isinstance(value, Mapping) and "text" in value:
            return " ".join(str(value[k]) for k in ("text", "image_caption") if value.get(k))
        text = self.attrs(node).get("text")
        return str(text) if text else self.text(node)

    def turn_line(self, node: str) -> str:
        """`speaker: text (date)` of a turn."""
        attrs = self.attrs(node)
        value = attrs.get("value")
        speaker = attrs.get("speaker") or (value.get("speaker") if isinstance(value, Mapping) else None)
        stamp = attrs.get("timestamp") or (value.get("timestamp") if isinstance(value, Mapping) else None)
        line = f"{speaker}: {self.turn_text(node)}" if speaker else self.turn_text(node)
        return f"{line} ({stamp})" if stamp else line

    # edges ---------------------------------------------------------------------------------------
    def _edges(self, edges: Iterable[tuple[str, str, dict[str, Any]]], role: str, pick: int) -> list[str]:
        seen: dict[str, None] = {}
        for edge in edges:
            if edge[2].get("role", role) == role:
                seen.setdefault(str(edge[pick]), None)
        return list(seen)

    def inputs(self, op: str) -> list[str]:
        return self._edges(self.graph.in_edges(op, data=True), "input", 0)

    def outputs(self, op: str) -> list[str]:
        return self._edges(self.graph.out_edges(op, data=True), "output", 1)

    def producers(self, var: str) -> list[str]:
        return [n for n in self._edges(self.graph.in_edges(var, data=True), "output", 0) if self.is_op(n)]

    def consumers(self, var: str) -> list[str]:
        found = [n for n in self._edges(self.graph.out_edges(var, data=True), "input", 1) if self.is_op(n)]
        return sorted(found, key=self.seq)

    # memory units --------------------------------------------------------------------------------
    @staticmethod
    def is_mem(node: str) -> bool:
        return node.startswith("mem:")

    @staticmethod
    def is_turn(node: str) -> bool:
        return node.startswith("turn:")

    def unit_id(self, node: str) -> str:
        unit = self.attrs(node).get("unit_id")
        if unit:
            return str(unit)
        return node[4:].rsplit("@", 1)[0]

    def version(self, node: str) -> int:
        value = self.attrs(node).get("version")
        if isinstance(value, int):
            return value
        try:
            return int(node.rsplit("@", 1)[1])
        except (IndexError, ValueError):
            return 0

    def deleted(self, node: str) -> bool:
        attrs = self.attrs(node)
        value = attrs.get("value")
        return bool(attrs.get("deleted") or (isinstance(value, Mapping) and value.get("deleted")))

    def unit_kind(self, node: str) -> str:
        if self.attrs(node).get("unit_kind"):
            return str(self.attrs(node)["unit_kind"])
        value = self.attrs(node).get("value")
        if isinstance(value, Mapping) and value.get("kind"):
            return str(value["kind"])
        unit = self.unit_id(node)
        return unit.rsplit("-", 1)[0] if "-" in unit else unit

    @cached_property
    def units(self) -> dict[str, list[str]]:
        """unit_id -> its version nodes, oldest first."""
        chains: dict[str, list[str]] = {}
        for node in self.graph:
            if self.is_mem(node):
                chains.setdefault(self.unit_id(node), []).append(node)
        for chain in chains.values():
            chain.sort(key=self.version)
        return chains

    def written_at(self, node: str) -> int:
        """The seq of the op that wrote this version (-1 when no op did)."""
        return min((self.seq(p) for p in self.producers(node)), default=-1)

    def source_turns(self, node: str) -> frozenset[str]:
        """The turn nodes a memory version was formed from: its `source_turns` if recorded, else the turns
        reachable backwards through the ops that produced it (through earlier versions of the same unit,
        never through other units)."""
        cached = self._lineage.get(node)
        if cached is not None:
            return cached
        found = self._recorded_turns(node)
        if not found:
            found = frozenset(self._walk_turns(node))
        self._lineage[node] = found
        return found

    def _recorded_turns(self, node: str) -> frozenset[str]:
        """The `source_turns` a memory version records (empty when none)."""
        attrs = self.attrs(node)
        value = attrs.get("value")
        recorded = attrs.get("source_turns")
        if recorded is None and isinstance(value, Mapping):
            recorded = value.get("source_turns")
        return frozenset(t if str(t).startswith("turn:") else f"turn:{t}" for t in recorded or ())

    def lineage(self, node: str) -> frozenset[str]:
        """The turn nodes `node` descends from by the graph's edges: a turn itself; a memory version the turns it
        records (`source_turns`); an op the union of its inputs'; any other value (or a memory version that records
        none) the union of the inputs of the ops that produced it. A question node is no source."""
        done = self._descent
        if node in done:
            return done[node]
        stack: list[tuple[str, bool]] = [(node, False)]
        open_nodes: set[str] = set()
        while stack:
            current, expanded = stack.pop()
            if current in done:
                continue
            if self.is_turn(current) or current.startswith("q:"):
                done[current] = frozenset({current}) if self.is_turn(current) else frozenset()
                continue
            recorded = self._recorded_turns(current) if self.is_mem(current) else frozenset()
            if recorded:
                done[current] = recorded
                continue
            sources = self.inputs(current) if self.is_op(current) else self.producers(current)
            if expanded:
                done[current] = frozenset().union(*(done.get(s, frozenset()) for s in sources))
                open_nodes.discard(current)
                continue
            open_nodes.add(current)
            stack.append((current, True))
            stack.extend((s, False) for s in sources if s not in done and s not in open_nodes)
        return done[node]

    def _walk_turns(self, start: str) -> set[str]:
        unit = self.unit_id(start) if self.is_mem(start) else None
        turns: set[str] = set()
        seen = {start}
        stack = [start]
        while stack:
            var = stack.pop()
            for op in self.producers(var):
                for source in self.inputs(op):
                    if source in seen:
                        continue
                    seen.add(source)
                    if self.is_turn(source):
                        turns.add(source)
                    elif self.is_mem(source):
                        if unit is not None and self.unit_id(source) == unit:
                            stack.append(source)
                    elif not source.startswith("q:"):
                        stack.append(source)
        return turns

    # questions -----------------------------------------------------------------------------------
    def answer_op(self, question_id: str) -> str | None:
        """The op that answered `question_id`: the producer of `ans:{qid}`, else an answering op (`role`)
        reading `q:{qid}`."""
        answer = f"ans:{question_id}"
        if answer in self.graph:
            producers = self.producers(answer)
            if producers:
                return max(producers, key=self.seq)
        question = f"q:{question_id}"
        if question in self.graph:
            reading = [op for op in self.consumers(question) if self.role(op) is OpRole.ANSWERS]
            if reading:
                return reading[-1]
            for op in sorted(nx.descendants(self.graph, question), key=self.seq):
                if self.is_op(op) and self.role(op) is OpRole.ANSWERS:
                    return op
        return None

    def read_path(self, answer_op: str, question_id: str | None = None) -> list[str]:
        """The ops of the question's read path, in order, ending with the answer op: the ops that read the
        question node `q:{question_id}` up to the answer, and every op reachable backwards from those through
        non-memory, non-turn values."""
        found = {answer_op}
        question = f"q:{question_id}" if question_id is not None else None
        if question is not None and question in self.graph:
            limit = self.seq(answer_op)
            found |= {op for op in self.consumers(question) if self.seq(op) <= limit}
        stack = list(found)
        while stack:
            op = stack.pop()
            for var in self.inputs(op):
                if self.is_mem(var) or self.is_turn(var) or var.startswith("q:"):
                    continue
                for producer in self.producers(var):
                    if producer not in found:
                        found.add(producer)
                        stack.append(producer)
        return sorted(found, key=self.seq)

    @cached_property
    def all_read_ops(self) -> frozenset[str]:
        """The ops of every answered question's read path."""
        found: set[str] = set()
        for node in self.graph:
            if node.startswith("ans:"):
                qid = node[4:]
                answer = self.answer_op(qid)
                if answer is not None:
                    found.update(self.read_path(answer, qid))
        return frozenset(found)

    def mem_refs(self, op: str) -> list[str]:
        """Memory versions an op read or returned: its memory inputs and `$mem` references in its outputs."""
        refs = [n for n in self.inputs(op) if self.is_mem(n)]
        for var in self.outputs(op):
            refs.extend(r for r in refs_in(self.attrs(var).get("value")) if r.startswith("mem:"))
        refs.extend(r for r in refs_in(self.attrs(op).get("outputs")) if r.startswith("mem:"))
        return list(dict.fromkeys(refs))

    def returns_units(self, op: str) -> bool:
        """Whether `op` passes memory units on (`$mem` references in its outputs): a retrieval, a merge, a rerank;
        not a step that only judges or plans (a sufficiency check, a query writer)."""
        outputs = [self.attrs(var).get("value") for var in self.outputs(op)] + [self.attrs(op).get("outputs")]
        return any(r.startswith("mem:") for value in outputs for r in refs_in(value))

    def parts(self, node: str) -> list[str]:
        """A var node's content in parts (see `value_parts`); a memory unit is one part."""
        if self.is_mem(node):
            return [self.text(node)]
        return value_parts(self.attrs(node).get("value"))

    def input_parts(self, op: str, *, skip_question: bool = True) -> list[str]:
        """The content of an op's inputs, in parts (the question itself left out when `skip_question`)."""
        parts = [p for v in self.inputs(op) if not (skip_question and v.startswith("q:")) for p in self.parts(v)]
        recorded = self.attrs(op).get("inputs")
        if isinstance(recorded, Mapping):
            for key, value in recorded.items():
                if not (skip_question and key == "question"):
                    parts.extend(value_parts(value))
        return parts

    def output_parts(self, op: str) -> list[str]:
        parts = [p for v in self.outputs(op) for p in self.parts(v)]
        recorded = self.attrs(op).get("outputs")
        if isinstance(recorded, Mapping):
            for value in recorded.values():
                parts.extend(value_parts(value))
        return parts

    def decider(self, writer: str) -> str:
        """The op that decided a store write: the writer itself if it asks an LM, else the latest LM-backed
        op that produced one of its non-memory inputs (e.g. Mem0's update decision behind `apply`)."""
        if self.predictor(writer):
            return writer
        candidates = [
            producer
            for var in self.inputs(writer)
            if not (self.is_mem(var) or self.is_turn(var) or var.startswith("q:"))
            for producer in self.producers(var)
            if self.predictor(producer) and self.seq(producer) < self.seq(writer)
        ]
        return max(candidates, key=self.seq) if candidates else writer
