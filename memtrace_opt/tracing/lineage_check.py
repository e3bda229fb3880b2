"""Where a graph's lineage breaks: memory units and answers with no path from any conversation turn.

Attribution follows information from the evidence turns forward; a unit (or an answer) no turn reaches is
invisible to it, and every failure behind it lands on the first op that did show up (typically a store op,
which no prompt fixes). That happens when an op gets the conversation some way the trace cannot see: from
`state.extra`, an attribute or a global, or as text so changed that it matches no turn.

    check = lineage_check(G)                 # one conversation's graph
    for line in describe_breaks([check, ...]):
        log.warning(line)                    # once per op, across conversations

`lineage_check` is pure and linear in the graph's size (one forward walk from the turns, one backward walk
from what it missed). It names the *root* ops of what was missed: those whose inputs no other op produced.
`via_content` lists the ops reached only by matching text (their turns arrived as plain strings): their
lineage holds, but passing the `Turn` objects makes it exact.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from memtrace_opt.memory.values import refs_in
from memtrace_opt.tracing._content import strings_in, tokens

__all__ = ["OpBreak", "LineageCheck", "lineage_check", "describe_breaks", "describe_content", "merge_checks"]

log = logging.getLogger(__name__)

_HOLDS_TURN = 0.6  # share of a turn's words an input must hold to count as carrying that turn's text
_SAMPLE_CALLS = 3  # calls of a root op whose inputs are compared with the turns


@dataclass(frozen=True)
class OpBreak:
    """A root op of unreached values. `untyped`: its inputs hold conversation text that matches no turn
    exactly (changed on the way); else it took no conversation content at all. `units`: whether unreached
    memory units come from it (else only answers do)."""

    op: str
    calls: int
    untyped: bool
    units: bool

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "calls": self.calls, "untyped": self.untyped, "units": self.units}

    def message(self) -> str:
        if self.untyped:
            got = ("received the conversation as plain text that matches no turn's text (reworded, cut or "
                   "joined without spaces), so nothing links")
        else:
            got = ("took none of the conversation among its call arguments (it reads it from state.extra, an "
                   "attribute or a global), so nothing links")
        calls = f"its {self.calls} call{'s' if self.calls != 1 else ''}"
        if self.units:
            fix = ("pass the session's Turn objects as an argument (e.g. turns=session.turns), or text that "
                   "holds each turn's text unchanged")
        else:
            fix = ("return the memory units it found, read with state.store.read(units), or their text "
                   "unchanged, and pass them to the answer op as an argument")
        return f"{self.op} {got} {calls} to the turns: {fix}"


@dataclass(frozen=True)
class LineageCheck:
    """What no turn reaches in one graph, and the ops at its root."""

    units: int = 0  # memory units none of whose versions any turn reaches
    answers: int = 0  # answers with context that no turn reaches
    breaks: tuple[OpBreak, ...] = ()
    via_content: tuple[str, ...] = ()
    conversations: int = 1

    @property
    def broken(self) -> bool:
        return bool(self.units or self.answers)

    def to_dict(self) -> dict[str, Any]:
        return {"units": self.units, "answers": self.answers, "conversations": self.conversations,
                "breaks": [b.to_dict() for b in self.breaks], "via_content": list(self.via_content)}


@dataclass
class _Walk:
    G: nx.MultiDiGraph
    reached: set[str] = field(default_factory=set)

    def producers(self, node: str) -> list[str]:
        return [u for u, _, role in self.G.in_edges(node, keys=True) if role == "output"]

    def inputs(self, op: str) -> list[str]:
        return [u for u, _, role in self.G.in_edges(op, keys=True) if role == "input"]


def _forward(G: nx.MultiDiGraph, start: Iterable[str]) -> set[str]:
    seen = set(start)
    stack = list(seen)
    succ = G.succ
    while stack:
        for nxt in succ[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _has_context(G: nx.MultiDiGraph, op: str) -> bool:
    """Whether an answer op was given any memory to answer from (an empty retrieval is no break)."""
    recorded = G.nodes[op].get("inputs") or {}
    if not isinstance(recorded, dict):
        return False
    rest = {k: v for k, v in recorded.items() if k != "question"}
    return _has_text(rest) or any(ref.startswith("mem:") for ref in refs_in(rest))


def _has_text(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip()) and not value.startswith("state:")
    if isinstance(value, dict):
        return "$question" not in value and any(_has_text(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_text(v) for v in value)
    return False


def _carries_turn_text(G: nx.MultiDiGraph, op_nodes: list[str], turns: list[str]) -> bool:
    words: set[str] = set()
    for op in op_nodes[:_SAMPLE_CALLS]:
        for text in strings_in(G.nodes[op].get("inputs") or {}):
            words.update(tokens(text))
    if not words:
        return False
    for turn in turns:
        turn_words = set(tokens(str(G.nodes[turn].get("value") or "")))
        if len(turn_words) >= 4 and len(turn_words & words) >= _HOLDS_TURN * len(turn_words):
            return True
    return False


def lineage_check(G: nx.MultiDiGraph) -> LineageCheck:
    """The units and answers of `G` no turn reaches, their root ops, and the ops linked only by content.
    Never raises: a graph it cannot read (hand-made, damaged) gives an empty check, logged."""
    try:
        return _check(G)
    except Exception:  # noqa: BLE001 - a diagnostic must never cost the run its results
        log.exception("lineage check failed on graph %s", G.graph.get("sample_id", "?"))
        return LineageCheck()


def _check(G: nx.MultiDiGraph) -> LineageCheck:
    turns = [n for n in G if str(n).startswith("turn:")]
    if not turns:
        return LineageCheck()
    walk = _Walk(G, _forward(G, turns))
    reached = walk.reached
    via_content = sorted({str(G.nodes[v].get("op")) for u, v, data in G.edges(data=True)
                          if data.get("via") == "content" and str(u).startswith("turn:")})
    versions: dict[str, list[str]] = {}  # unit id -> its versions some op wrote
    for node, data in G.nodes(data=True):
        if str(node).startswith("mem:") and walk.producers(node):
            versions.setdefault(str(data.get("unit_id") or node), []).append(node)
    unit_nodes = [chain[0] for chain in versions.values() if not any(n in reached for n in chain)]
    answer_nodes = []
    for node in G:
        if str(node).startswith("ans:") and node not in reached:
            producers = walk.producers(node)
            if producers and _has_context(G, producers[0]):
                answer_nodes.append(node)
    if not unit_nodes and not answer_nodes:
        return LineageCheck(via_content=tuple(via_content))
    roots_of_units = _roots(walk, unit_nodes)
    roots = roots_of_units | _roots(walk, answer_nodes)
    by_name: dict[str, list[str]] = {}
    for op in sorted(roots, key=lambda n: G.nodes[n].get("seq", 0)):
        by_name.setdefault(str(G.nodes[op].get("op") or op), []).append(op)
    breaks = tuple(
        OpBreak(name, len(ops), _carries_turn_text(G, ops, turns), any(op in roots_of_units for op in ops))
        for name, ops in by_name.items()
    )
    return LineageCheck(len(unit_nodes), len(answer_nodes), breaks, tuple(via_content))


def _roots(walk: _Walk, nodes: list[str]) -> set[str]:
    """The ops upstream of `nodes` none of whose inputs another op produced."""
    G = walk.G
    roots: set[str] = set()
    seen: set[str] = set()
    stack = [p for n in nodes for p in walk.producers(n)]
    while stack:
        op = stack.pop()
        if op in seen or G.nodes[op].get("kind") != "op":
            continue
        seen.add(op)
        upstream = [p for var in walk.inputs(op) if not str(var).startswith("q:") for p in walk.producers(var)]
        if upstream:
            stack.extend(upstream)
        else:
            roots.add(op)
    return roots


def merge_checks(checks: Iterable[LineageCheck]) -> LineageCheck:
    """The checks of several conversations as one: counts added, one break per op."""
    checks = list(checks)
    units = sum(c.units for c in checks)
    answers = sum(c.answers for c in checks)
    calls: Counter[str] = Counter()
    untyped: dict[str, bool] = {}
    of_units: dict[str, bool] = {}
    for check in checks:
        for b in check.breaks:
            calls[b.op] += b.calls
            untyped[b.op] = untyped.get(b.op, False) or b.untyped
            of_units[b.op] = of_units.get(b.op, False) or b.units
    breaks = tuple(OpBreak(op, calls[op], untyped[op], of_units[op]) for op in calls)
    via = sorted({op for c in checks for op in c.via_content})
    broken = sum(1 for c in checks if c.broken)
    return LineageCheck(units, answers, breaks, tuple(via), conversations=broken)


def describe_breaks(checks: Iterable[LineageCheck]) -> list[str]:
    """Warning lines, once per op: a head line with the counts, then what each root op did and how to fix it.
    Empty when every unit and answer has a path from a turn."""
    merged = merge_checks(checks)
    if not merged.broken:
        return []
    parts = []
    if merged.units:
        parts.append(f"{merged.units} memory unit{'s' if merged.units != 1 else ''}")
    if merged.answers:
        parts.append(f"{merged.answers} answer{'s' if merged.answers != 1 else ''}")
    head = (f"lineage: {' and '.join(parts)} in {merged.conversations} conversation"
            f"{'s' if merged.conversations != 1 else ''} have no path from any conversation turn, so attribution "
            "cannot follow them (their failures land on the first op it sees)")
    return [head, *(f"lineage: {b.message()}" for b in merged.breaks)]


def describe_content(checks: Iterable[LineageCheck]) -> str | None:
    """A note naming the ops whose turns were found only by their text (None when there are none)."""
    ops = merge_checks(checks).via_content
    if not ops:
        return None
    return (f"{', '.join(ops)} received the conversation as plain text; lineage was found by matching each "
            "turn's text (edges marked via: content). Passing the Turn objects makes it exact.")
