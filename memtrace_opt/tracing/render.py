"""Compact text renderings of graph nodes for an LM (an attributor) or a person, paginated by characters.

Each node is one block: its id, what it is, a short value, and its edges (`<-` inputs or producer, `->`
outputs or consumers). Units, turns and questions inside values are shown by node id only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import networkx as nx

from memtrace_opt.tracing.queries import in_graph_order

__all__ = ["compact", "short", "render_node", "render_subgraph"]

_REF_KEYS = ("$mem", "$turn", "$question")


def compact(value: Any) -> Any:
    """`value` with every unit/turn/question ref replaced by its node id."""
    if isinstance(value, dict):
        for key in _REF_KEYS:
            if key in value:
                return value[key]
        return {k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return value


def short(value: Any, limit: int = 240) -> str:
    """A one-line rendering of a value, cut to `limit` characters."""
    value = compact(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _edges(G: nx.MultiDiGraph, node: str, limit: int = 12) -> str:
    def listed(nodes: list[str]) -> str:
        more = f", +{len(nodes) - limit} more" if len(nodes) > limit else ""
        return ", ".join(nodes[:limit]) + more

    parts = []
    ins = list(dict.fromkeys(G.predecessors(node)))
    outs = list(dict.fromkeys(G.successors(node)))
    if ins:
        parts.append(f"<- {listed(ins)}")
    if outs:
        parts.append(f"-> {listed(outs)}")
    return "  " + "  ".join(parts) if parts else ""


def render_node(G: nx.MultiDiGraph, node: str, *, value_chars: int = 240, show_gold: bool = True) -> str:
    """One node as a short block of text."""
    d = G.nodes[node]
    if d.get("kind") == "op":
        head = f"[{node}] {d['op']}"
        if d.get("predictor"):
            head += f" (LM: {d['predictor']})"
        if d.get("replayed"):
            head += f" (replayed: {d['replayed']})"
        lines = [head + _edges(G, node)]
        for name, value in (d.get("inputs") or {}).items():
            lines.append(f"    in  {name} = {short(value, value_chars)}")
        for name, value in (d.get("outputs") or {}).items():
            if name != "error":
                lines.append(f"    out {name} = {short(value, value_chars)}")
        if d.get("error"):
            lines.append(f"    ERROR {short(d['error'], value_chars)}")
        return "\n".join(lines)
    vtype = d.get("vtype", "var")
    if vtype == "memory":
        flag = ", DELETED" if d.get("deleted") else ""
        head = f"[{node}] memory v{d.get('version')}{flag}: {short(d.get('value'), value_chars)}"
    elif vtype == "turn":
        when = f", {d['timestamp']}" if d.get("timestamp") else ""
        head = f"[{node}] turn ({d.get('speaker')}{when}): {short(d.get('value'), value_chars)}"
    elif vtype == "question":
        head = f"[{node}] question: {short(d.get('value'), value_chars)}"
        if show_gold and d.get("gold") is not None:
            head += f" (gold: {short(d.get('gold'), 80)}; evidence: {', '.join(d.get('evidence') or []) or '-'})"
    elif vtype == "answer":
        head = f"[{node}] answer: {short(d.get('value'), value_chars)}"
        if d.get("error"):
            head += f" (error: {short(d['error'], 120)})"
    else:
        head = f"[{node}] {vtype}: {short(d.get('value'), value_chars)}"
    return head + _edges(G, node)


def render_subgraph(
    G: nx.MultiDiGraph,
    nodes: Iterable[str],
    budget_chars: int = 6000,
    *,
    value_chars: int = 240,
    show_gold: bool = True,
) -> list[str]:
    """The nodes (in graph order) rendered as text pages of at most `budget_chars` characters each; a block
    longer than a page is cut to fit. An empty node list gives no pages."""
    if budget_chars < 80:
        raise ValueError("budget_chars must be at least 80")
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for node in in_graph_order(G, nodes):
        block = render_node(G, node, value_chars=value_chars, show_gold=show_gold)
        if len(block) > budget_chars:
            block = block[: budget_chars - 4] + " ..."
        needed = len(block) + (1 if current else 0)
        if current and size + needed > budget_chars:
            pages.append("\n".join(current))
            current, size = [], 0
            needed = len(block)
        current.append(block)
        size += needed
    if current:
        pages.append("\n".join(current))
    return pages
