"""Graph exporters: node-link JSON (the native format), GraphML (scalar attributes only: dicts, lists and None
are JSON-encoded strings) and Graphviz DOT. Each returns text; deterministic for a given graph."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any, Protocol

import networkx as nx

from memtrace_opt.tracing.graph import graph_to_json
from memtrace_opt.tracing.render import short

__all__ = ["GraphExporter", "EXPORTERS", "export_graph", "to_graphml", "to_dot", "scalar_graph"]


class GraphExporter(Protocol):
    """Turns an evolution graph into the text of one file. Must not modify the graph."""

    def __call__(self, G: nx.MultiDiGraph) -> str: ...


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def _scalar_attrs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attribute dicts with non-scalars JSON-encoded; a key whose values have mixed types is encoded too."""
    encoded = [{k: _encode(v) for k, v in attrs.items()} for attrs in items]
    types: dict[str, set[type]] = {}
    for attrs in encoded:
        for k, v in attrs.items():
            types.setdefault(k, set()).add(type(v))
    mixed = {k for k, t in types.items() if len(t) > 1}
    if mixed:
        for attrs, original in zip(encoded, items, strict=True):
            for k in mixed & set(attrs):
                attrs[k] = json.dumps(original[k], sort_keys=True, ensure_ascii=False)
    return encoded


def scalar_graph(G: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy of `G` whose every attribute is a str, int, float or bool (what GraphML can hold)."""
    H = nx.MultiDiGraph()
    H.graph.update(_scalar_attrs([dict(G.graph)])[0])
    nodes = list(G.nodes(data=True))
    for (node, _), attrs in zip(nodes, _scalar_attrs([dict(d) for _, d in nodes]), strict=True):
        H.add_node(node, **attrs)
    edges = list(G.edges(keys=True, data=True))
    for (u, v, key, _), attrs in zip(edges, _scalar_attrs([dict(d) for *_, d in edges]), strict=True):
        H.add_edge(u, v, key=key, **attrs)
    return H


def to_graphml(G: nx.MultiDiGraph) -> str:
    buffer = io.BytesIO()
    nx.write_graphml(scalar_graph(G), buffer, encoding="utf-8")
    return buffer.getvalue().decode("utf-8")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(node: str, data: dict[str, Any]) -> str:
    if data.get("kind") == "op":
        return f"{node}\n{data.get('op')}" + ("\nERROR" if data.get("error") else "")
    if data.get("vtype") == "memory":
        return f"{node}{' (deleted)' if data.get('deleted') else ''}\n{short(data.get('value'), 60)}"
    return f"{node}\n{short(data.get('value'), 60)}"


_STYLE = {
    "op": 'shape=box, style="rounded,filled", fillcolor="#dbe9f6"',
    "turn": 'shape=note, style=filled, fillcolor="#f3f3f3"',
    "memory": 'shape=cylinder, style=filled, fillcolor="#e3f4dd"',
    "question": 'shape=hexagon, style=filled, fillcolor="#fdf1c7"',
    "answer": 'shape=doubleoctagon, style=filled, fillcolor="#fdf1c7"',
}


def to_dot(G: nx.MultiDiGraph) -> str:
    """Graphviz DOT: ops as boxes, turns as notes, memory versions as cylinders (red when deleted)."""
    title = f"{G.graph.get('system', '')} {G.graph.get('sample_id', '')}".strip() or "memtrace"
    lines = [f"digraph {_quote(title)} {{", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']
    for node, data in G.nodes(data=True):
        kind = "op" if data.get("kind") == "op" else data.get("vtype", "var")
        style = _STYLE.get(kind, 'shape=ellipse')
        if data.get("deleted") or (kind == "op" and data.get("error")):
            style += ', color="#c0392b"'
        lines.append(f"  {_quote(node)} [label={_quote(_label(node, data))}, {style}];")
    for u, v, key in G.edges(keys=True):
        lines.append(f"  {_quote(u)} -> {_quote(v)} [label={_quote(key)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


EXPORTERS: dict[str, Callable[[nx.MultiDiGraph], str]] = {
    "json": graph_to_json,
    "graphml": to_graphml,
    "dot": to_dot,
}


def export_graph(G: nx.MultiDiGraph, fmt: str) -> str:
    from memtrace_opt.errors import ConfigError

    try:
        exporter = EXPORTERS[fmt]
    except KeyError:
        raise ConfigError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORTERS)}") from None
    return exporter(G)
