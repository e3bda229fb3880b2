"""`memtrace graph ...`: follow a question through a run's evolution graph, or export the graph.

    memtrace graph show runs/r1 --question conv-26:q3 [--sample conv-26]
    memtrace graph export runs/r1 --format graphml [--sample conv-26] [--out g.graphml]

RUN is a run directory (graphs/*.json, cases.jsonl) or one graph file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import networkx as nx
import typer
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from memtrace_opt.cli import app
from memtrace_opt.errors import MemtraceError
from memtrace_opt.tracing import GRAPHS_DIR, answer_node, evidence_path, graph_file, load_graph, question_node
from memtrace_opt.tracing.export import EXPORTERS, export_graph
from memtrace_opt.tracing.render import short

__all__ = ["QuestionGraph", "find_question", "question_tree", "graph_paths", "export_run"]

graph_app = typer.Typer(help="Follow questions through evolution graphs; export graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")

_MAX_CHILDREN = 8
_MAX_DEPTH = 40


@dataclass(frozen=True)
class QuestionGraph:
    """A question located in a run: its graph, the graph's path and the gold evidence ids."""

    graph: nx.MultiDiGraph
    path: Path
    question_id: str
    evidence: tuple[str, ...]
    case: dict[str, Any] | None


def graph_paths(run: Path, sample: str | None = None) -> list[Path]:
    """The graph files of a run (or `run` itself when it is a graph file), optionally of one sample."""
    if run.is_file():
        return [run]
    if not run.is_dir():
        raise MemtraceError(f"{run}: no such run directory or graph file")
    if sample is not None:
        path = graph_file(run, sample)
        if not path.exists():
            raise MemtraceError(f"{run} has no graph for sample {sample!r} ({path.relative_to(run)} is missing)")
        return [path]
    paths = sorted((run / GRAPHS_DIR).rglob("*.json"))
    if not paths:
        raise MemtraceError(f"{run} holds no graphs ({GRAPHS_DIR}/*.json)")
    return paths


def _cases(run: Path) -> list[dict[str, Any]]:
    from memtrace_opt.rundir import read_jsonl

    return read_jsonl(run / "cases.jsonl") if run.is_dir() else []


def find_question(run: Path, question_id: str, sample: str | None = None) -> QuestionGraph:
    """The graph holding `question_id`: through cases.jsonl when the run has one, else by searching graphs."""
    for case in _cases(run):
        if case.get("question_id") != question_id or (sample is not None and case.get("sample_id") != sample):
            continue
        if case.get("graph"):
            path = run / case["graph"]
            return QuestionGraph(load_graph(path), path, question_id, tuple(case.get("evidence") or ()), case)
    found = []
    for path in graph_paths(run, sample):
        G = load_graph(path)
        if question_node(question_id) in G:
            found.append((path, G))
    if not found:
        raise MemtraceError(f"question {question_id!r} is in no graph of {run}")
    if len(found) > 1:
        raise MemtraceError(f"question {question_id!r} is in {len(found)} graphs; choose one with --sample")
    path, G = found[0]
    evidence = tuple(G.nodes[question_node(question_id)].get("evidence") or ())
    return QuestionGraph(G, path, question_id, evidence, None)


# the tree ---------------------------------------------------------------------------------------------
def node_label(G: nx.MultiDiGraph, node: str) -> str:
    """One rich-markup line for a node: its id, what it is, a short value, flags."""
    d = G.nodes[node]
    ident = f"[bold]{escape(node)}[/bold]"
    if d.get("kind") == "op":
        text = f"{ident} [cyan]{escape(str(d.get('op')))}[/cyan]"
        if d.get("predictor"):
            text += " [dim](LM)[/dim]"
        outputs = {k: v for k, v in (d.get("outputs") or {}).items() if k != "error"}
        if outputs and len(outputs) <= 2:
            text += " " + escape(short(outputs, 100))
        if d.get("error"):
            text += f" [red]error: {escape(short(d['error'], 100))}[/red]"
        return text
    vtype = d.get("vtype")
    value = escape(short(d.get("value"), 100))
    if vtype == "memory":
        flag = " [red]DELETED[/red]" if d.get("deleted") else ""
        return f"{ident} [green]memory v{d.get('version')}[/green]{flag} {value}"
    if vtype == "turn":
        return f"{ident} [magenta]{escape(str(d.get('speaker')))}[/magenta]: {value}"
    if vtype == "answer":
        return f"{ident} [yellow]answer[/yellow]: {value}"
    return f"{ident} [dim]{escape(str(vtype))}[/dim] {value}"


def _grow(G: nx.MultiDiGraph, branch: Tree, node: str, allowed: set[str] | None, seen: set[str], depth: int) -> None:
    children = [c for c in dict.fromkeys(G.successors(node)) if allowed is None or c in allowed]
    shown: list[str] = []
    drawn = 0
    for child in children:
        if child in seen:
            shown.append(child)
            continue
        if drawn == _MAX_CHILDREN:
            branch.add(f"[dim]... {len(children) - len(shown) - drawn} more[/dim]")
            break
        drawn += 1
        seen.add(child)
        sub = branch.add(node_label(G, child))
        if depth < _MAX_DEPTH:
            _grow(G, sub, child, allowed, seen, depth + 1)
    if shown:  # a DAG: these were drawn under an earlier branch
        branch.add("[dim]also -> " + ", ".join(escape(c) for c in shown[:_MAX_CHILDREN])
                   + (f", +{len(shown) - _MAX_CHILDREN} more" if len(shown) > _MAX_CHILDREN else "") + "[/dim]")


def question_tree(G: nx.MultiDiGraph, question_id: str, evidence: tuple[str, ...] | list[str] | None = None) -> Tree:
    """The route from each evidence turn to the answer (turn -> op -> memory versions -> retrieval ->
    answer); for a turn that never reaches the answer, where its information went (a few levels); then
    what the answering op was given."""
    q = G.nodes.get(question_node(question_id), {})
    ans = G.nodes.get(answer_node(question_id), {})
    root = Tree(
        f"[bold]{escape(question_id)}[/bold] {escape(short(q.get('value'), 160))}\n"
        f"gold: {escape(short(q.get('gold'), 80))}   answer: {escape(short(ans.get('value'), 80))}"
    )
    path = evidence_path(G, question_id, evidence)
    allowed = set(path.nodes)
    seen: set[str] = set()
    for turn in path.reached:
        branch = root.add(node_label(G, turn) + " [green]reaches the answer[/green]")
        seen.add(turn)
        _grow(G, branch, turn, allowed, seen, 0)
    for turn in path.unreached:
        if turn not in G:
            root.add(f"[bold]{escape(turn)}[/bold] [red]is not in the graph[/red]")
            continue
        branch = root.add(node_label(G, turn) + " [red]never reaches the answer[/red]; where it went:")
        _grow_limited(G, branch, turn, levels=4)
    answer_ops = [p for p in G.predecessors(answer_node(question_id))] if answer_node(question_id) in G else []
    for op in answer_ops:
        branch = root.add("what the answer op was given: " + node_label(G, op))
        for source in dict.fromkeys(G.predecessors(op)):
            branch.add(node_label(G, source))
    return root


def _grow_limited(G: nx.MultiDiGraph, branch: Tree, node: str, levels: int) -> None:
    if levels == 0:
        return
    children = list(dict.fromkeys(G.successors(node)))
    for index, child in enumerate(children):
        if index == _MAX_CHILDREN:
            branch.add(f"[dim]... {len(children) - _MAX_CHILDREN} more[/dim]")
            break
        _grow_limited(G, branch.add(node_label(G, child)), child, levels - 1)


@graph_app.command("show")
def show(
    run: Annotated[Path, typer.Argument(help="Run directory (or one graph file).")],
    question: Annotated[str, typer.Option("--question", "-q", help="Question id.")],
    sample: Annotated[Optional[str], typer.Option("--sample", help="Sample id, when several graphs hold the id.")] = None,  # noqa: UP045
) -> None:
    """Print the path from the evidence turns to the answer of one question."""
    found = find_question(run, question, sample)
    Console().print(question_tree(found.graph, question, found.evidence or None))


# export -----------------------------------------------------------------------------------------------
def export_run(run: Path, fmt: str, out: Path | None = None, sample: str | None = None) -> list[Path] | str:
    """Exports the run's graphs. One graph and no `out`: returns its text. One graph: writes `out`. Several
    graphs: writes one file each under the `out` directory (default `<run>/exports`); returns the paths."""
    if fmt not in EXPORTERS:
        raise MemtraceError(f"unknown format {fmt!r}: use one of {', '.join(EXPORTERS)}")
    paths = graph_paths(run, sample)
    if len(paths) == 1:
        text = export_graph(load_graph(paths[0]), fmt)
        if out is None:
            return text
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        return [out]
    folder = out if out is not None else run / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        stem = "__".join(path.relative_to(run / GRAPHS_DIR).with_suffix("").parts)  # nested graphs/a/b.json
        target = folder / f"{stem}.{fmt}"
        target.write_text(export_graph(load_graph(path), fmt), encoding="utf-8")
        written.append(target)
    return written


@graph_app.command("export")
def export(
    run: Annotated[Path, typer.Argument(help="Run directory (or one graph file).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="json, graphml or dot.")] = "json",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output file (a folder for several graphs).")] = None,  # noqa: UP045
    sample: Annotated[Optional[str], typer.Option("--sample", help="Export only this sample's graph.")] = None,  # noqa: UP045
) -> None:
    """Export evolution graphs as node-link JSON, GraphML or Graphviz DOT."""
    result = export_run(run, fmt, out, sample)
    if isinstance(result, str):
        typer.echo(result, nl=False)
        return
    console = Console(stderr=True)
    for path in result:
        console.print(f"wrote {path}")
