"""The memory evolution graph (schema_version 2): a pure function of the trace events.

Nodes (see docs/design.md): `turn:{dia_id}`, `op:{seq}`, `mem:{unit_id}@{version}`, `q:{id}`, `ans:{id}` and
`var:{seq}:{field}`. Edges go var -> op (`role="input"`) and op -> var (`role="output"`); a MultiDiGraph
with the role as the edge key, so a pair of nodes has at most one edge per role.

How edges are derived, per op call in `seq` order:
1. refs in the op's inputs (`$turn`, `$question`, `$mem` values): turn/q/mem node -> op.
2. store events tied to the op: add -> op -> mem:X@1; update and delete -> mem:X@v -> op -> mem:X@v+1 (the
   delete's version has `deleted: true`); read -> mem:X@v -> op.
3. `$mem` refs in the op's outputs that neither it nor an op nested in it wrote are reads too (so a
   retrieval answered from a replay record, which makes no store reads, keeps its edges): mem -> op.
4. each output field becomes `var:{seq}:{field}` (op -> var), except the answer op's `answer` field (op ->
   `ans:{question_id}`), the `error` field (the op's `error` attribute) and fields that hold nothing but
   units the op itself wrote (those units are its outputs already).
5. value flow between ops: an input value of a later op that equals, as canonical JSON, the whole value of
   an earlier var, or one element of an earlier list var, links that var -> op. The most recent earlier
   producer wins. Trivial values (None, booleans, numbers, empty containers, strings under 8 characters) and
   values holding unit/turn/question refs are never matched this way. A unit ref in a later op's inputs links the
   most recent earlier `retrieved` var holding that unit (so a retrieved list that was reordered, cut to a
   budget or merged still leads to the op that used it). Vars of an enclosing op are never linked into the
   ops nested in it (they are produced after them).
6. content lineage: a string (anywhere in an op's inputs, outside refs) that holds a turn's text, or the text
   of a live unit version, links turn/mem -> op (`role="input"`, `via="content"`); so does a string in the
   op's outputs that copies a unit's text (the op read it). Texts are matched on word tokens (case,
   punctuation and spacing aside) and need at least 4 of them; where several turns say the same thing, those
   of the session most other matches belong to are kept. Never the op's own writes, never a typed edge
   replaced (a pair linked both ways keeps the typed edge, without `via`). An op that nothing else feeds
   (no ref but the question, no store read, no value match, no turn or unit text) is linked the same way to
   the earlier vars whose strings its input strings hold (a note joined from an LM op's facts).

Schema versions: 2 adds the `via` edge attribute (rule 6); a schema-1 graph (every edge typed, no `via`)
reads as it is.
"""

from __future__ import annotations

import gc
import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from memtrace_opt.errors import MemtraceError
from memtrace_opt.redact import redact
from memtrace_opt.tracing._builder import CONTENT, Builder
from memtrace_opt.tracing.events import (
    AnswerEvent,
    Event,
    LMCallEvent,
    OpEvent,
    QuestionEvent,
    RunStart,
    StoreRecord,
    TurnEvent,
    events_of,
)
from memtrace_opt.tracing.ids import answer_node, mem_id, op_id, question_node, turn_id

__all__ = [
    "GRAPH_SCHEMA_VERSION",
    "CONTENT",
    "build_graph",
    "save_graph",
    "load_graph",
    "graph_to_json",
    "graph_from_json",
    "mem_id",
    "turn_id",
    "op_id",
    "question_node",
    "answer_node",
]

log = logging.getLogger(__name__)

GRAPH_SCHEMA_VERSION = 2  # 2: edges found by content carry `via: "content"` (1: typed edges only)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector while a graph is built: the build allocates hundreds of thousands
    of small acyclic dicts, and the collector's repeated passes over them cost more than the build itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def build_graph(events: Iterable[Event | dict[str, Any]], *, content_lineage: bool = True) -> nx.MultiDiGraph:
    """The evolution graph of one conversation run. Pure and deterministic: the same events (in any
    interleaving of threads) give the same graph. Events may be Event objects or their dict forms.
    `content_lineage=False` leaves out the edges found by matching text (rule 6)."""
    with _gc_paused():
        return _build(events, content_lineage)


@dataclass
class _Trace:
    """The events of one run, sorted by kind: LM calls and store records grouped by the op call they belong to."""

    run: RunStart | None = None
    turns: list[TurnEvent] = field(default_factory=list)
    ops: list[OpEvent] = field(default_factory=list)
    lm_by_op: dict[str | None, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    store_by_op: dict[str | None, list[StoreRecord]] = field(default_factory=lambda: defaultdict(list))
    questions: list[QuestionEvent] = field(default_factory=list)
    answers: list[AnswerEvent] = field(default_factory=list)

    @classmethod
    def of(cls, events: Iterable[Event | dict[str, Any]]) -> _Trace:
        trace = cls()
        for event in events_of(events):
            if isinstance(event, OpEvent):
                trace.ops.append(event)
            elif isinstance(event, StoreRecord):
                trace.store_by_op[event.op_call_id].append(event)
            elif isinstance(event, LMCallEvent):
                trace.lm_by_op[event.op_call_id].append(_lm_call(event))
            elif isinstance(event, TurnEvent):
                trace.turns.append(event)
            elif isinstance(event, QuestionEvent):
                trace.questions.append(event)
            elif isinstance(event, AnswerEvent):
                trace.answers.append(event)
            elif isinstance(event, RunStart):
                trace.run = event
        trace.ops.sort(key=lambda o: o.seq)
        return trace


def _lm_call(event: LMCallEvent) -> dict[str, Any]:
    """An op node's `lm_calls` entry."""
    return {
        "model": event.model,
        "messages": event.messages,
        "response": event.response,
        "prompt_tokens": event.prompt_tokens,
        "completion_tokens": event.completion_tokens,
        "seconds": event.seconds,
        "cached": event.cached,
    }


@dataclass(frozen=True)
class _CallTree:
    """The recorded op calls by call id: their node ids, seqs and enclosing calls."""

    node_of: dict[str, str]
    seq_of: dict[str, int]
    parent_of: dict[str, str | None]

    @classmethod
    def of(cls, ops: list[OpEvent]) -> _CallTree:
        return cls({o.call_id: op_id(o.seq) for o in ops}, {o.call_id: o.seq for o in ops},
                   {o.call_id: o.parent_call_id for o in ops})

    def ancestors(self, op: OpEvent) -> frozenset[int]:
        """The seqs of the recorded calls that enclose `op`."""
        chain = []
        walk: str | None = op.parent_call_id
        while walk is not None and walk in self.seq_of:
            chain.append(self.seq_of[walk])
            walk = self.parent_of.get(walk)
        return frozenset(chain)

    def writes(self, store_by_op: dict[str | None, list[StoreRecord]]) -> dict[str, set[str]]:
        """The unit versions each call wrote (for "is this output ref the op's own write"); an op's writes
        include those of ops nested in it."""
        writes_by_op: dict[str, set[str]] = defaultdict(set)
        for call_id, records in store_by_op.items():
            if call_id is None:
                continue
            written = {mem_id(r.unit["unit_id"], int(r.unit["version"])) for r in records if r.action != "read"}
            ancestor: str | None = call_id
            while written and ancestor is not None:
                writes_by_op[ancestor] |= written
                ancestor = self.parent_of.get(ancestor)
        return writes_by_op


def _build(events: Iterable[Event | dict[str, Any]], content_lineage: bool = True) -> nx.MultiDiGraph:
    trace = _Trace.of(events)
    calls = _CallTree.of(trace.ops)
    b = Builder(content=content_lineage)
    for turn in trace.turns:
        b.turn({"dia_id": turn.dia_id, "speaker": turn.speaker, "text": turn.text,
                "session_index": turn.session_index, "timestamp": turn.timestamp,
                "image_caption": turn.image_caption})
    for question in trace.questions:
        b.question(question.question)
    _add_ops(b, trace, calls)
    for call_id, records in trace.store_by_op.items():
        if call_id is None or call_id not in calls.node_of:  # writes with no recorded op (a crash mid-op)
            for record in records:
                if record.action != "read":
                    b.mem(record.unit)
    for answer in trace.answers:
        b.nodes[b.answer(answer.question_id, answer.answer)]["error"] = answer.error
    return b.graph(_graph_attrs(trace.run))


def _add_ops(b: Builder, trace: _Trace, calls: _CallTree) -> None:
    """Every op call in seq order, with its LM calls, store records, own writes, answer and enclosing calls."""
    writes_by_op = calls.writes(trace.store_by_op)
    answer_of_op = {a.op_call_id: a.question_id for a in trace.answers if a.op_call_id is not None}
    empty: set[str] = set()
    for o in trace.ops:
        parent = o.parent_call_id
        b.op(
            o,
            calls.node_of[o.call_id],
            calls.node_of.get(parent) if parent is not None else None,
            trace.lm_by_op.get(o.call_id, []),
            trace.store_by_op.get(o.call_id, []),
            writes_by_op.get(o.call_id, empty),
            answer_of_op.get(o.call_id),
            calls.ancestors(o),
        )


def _graph_attrs(run: RunStart | None) -> dict[str, Any]:
    """The graph attributes: the schema version and what the run-start event says of the run."""
    return {
        "schema_version": GRAPH_SCHEMA_VERSION,
        "system": run.system if run else "",
        "dataset": run.dataset if run else "",
        "sample_id": run.sample_id if run else "",
        "models": run.models if run else {},
        "instructions": run.instructions if run else {},
        "config": run.config if run else {},
        "meta": run.meta if run else {},
    }


# saving ------------------------------------------------------------------------------------------------
def graph_to_json(G: nx.MultiDiGraph) -> str:
    """Deterministic JSON (`node_link_data(G, edges="edges")`, sorted keys, compact, trailing newline), secrets
    redacted (`memtrace_opt.redact`)."""
    data = redact(nx.node_link_data(G, edges="edges"))
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def graph_from_json(text: str) -> nx.MultiDiGraph:
    data = json.loads(text)
    version = int(data.get("graph", {}).get("schema_version", 0))
    if version > GRAPH_SCHEMA_VERSION:
        raise MemtraceError(
            f"graph schema_version {version} is newer than this memtrace-opt reads ({GRAPH_SCHEMA_VERSION})"
        )
    return nx.node_link_graph(data, directed=True, multigraph=True, edges="edges")


def save_graph(G: nx.MultiDiGraph, path: str | Path) -> Path:
    """Writes the graph as JSON (see `graph_to_json`); write(read(write(G))) gives identical bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(graph_to_json(G), encoding="utf-8")
    tmp.replace(path)
    return path


def load_graph(path: str | Path) -> nx.MultiDiGraph:
    path = Path(path)
    try:
        return graph_from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MemtraceError(f"{path}: no such graph file") from None
    except (json.JSONDecodeError, KeyError) as error:
        raise MemtraceError(f"{path}: not an evolution graph ({error})") from error
