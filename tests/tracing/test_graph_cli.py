from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import dspy
import networkx as nx
import pytest
from rich.console import Console
from toy_memory import toy_conversation

from memtrace_opt.cli import main
from memtrace_opt.cli.graph_cmd import export_run, find_question, question_tree
from memtrace_opt.errors import MemtraceError
from memtrace_opt.tracing import (
    EventWriter,
    events_file,
    graph_file,
    load_graph,
    save_graph,
    trace_conversation,
)
from memtrace_opt.tracing.export import scalar_graph, to_dot


@pytest.fixture
def run_dir(tmp_path, toy_program, lm):
    """A run directory as the runner lays it out: events/, graphs/, cases.jsonl."""
    run = tmp_path / "run"
    cases = []
    for sample in ("toy-1", "toy-2"):
        conv = toy_conversation(sample)
        with dspy.context(lm=lm), EventWriter(events_file(run, sample)) as writer:
            result = trace_conversation(toy_program, conv, conv.questions, writer=writer)
        path = save_graph(result.graph(), graph_file(run, sample))
        for q in conv.questions:
            cases.append({"question_id": f"{sample}/{q.question_id}" if sample == "toy-2" else q.question_id,
                          "sample_id": sample, "graph": str(path.relative_to(run)), "evidence": list(q.evidence)})
    (run / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return run


def _cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def _render(tree) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(tree)
    return console.file.getvalue()


def test_show_follows_the_evidence_to_the_answer(run_dir):
    found = find_question(run_dir, "q-live")
    assert found.path.name == "toy-1.json" and found.evidence == ("D1:1", "D2:1")
    text = _render(question_tree(found.graph, "q-live", found.evidence))
    assert "turn:D1:1" in text and "reaches the answer" in text
    for expected in ("toy.extract", "toy.write", "mem:memory-1@1", "mem:memory-1@2", "toy.retrieve", "toy.answer",
                     "ans:q-live", "Alice lives in Paris"):
        assert expected in text
    assert text.index("toy.extract") < text.index("mem:memory-1@2") < text.index("ans:q-live")


def test_show_marks_lost_evidence_and_the_deleted_version(run_dir):
    found = find_question(run_dir, "q-dog", sample="toy-1")
    text = _render(question_tree(found.graph, "q-dog", found.evidence))
    assert "never reaches the answer" in text and "DELETED" in text


def test_show_without_cases_searches_the_graphs(run_dir):
    (run_dir / "cases.jsonl").unlink()
    with pytest.raises(MemtraceError, match="--sample"):
        find_question(run_dir, "q-live")  # both graphs hold q-live
    assert find_question(run_dir, "q-live", sample="toy-2").path.name == "toy-2.json"
    assert find_question(graph_file(run_dir, "toy-1"), "q-live").evidence == ("D1:1", "D2:1")
    with pytest.raises(MemtraceError, match="no graph"):
        find_question(run_dir, "q-missing")


def test_cli_show_and_errors(run_dir, capsys):
    assert _cli("graph", "show", str(run_dir), "--question", "q-live") == 0
    assert "ans:q-live" in capsys.readouterr().out
    assert _cli("graph", "show", str(run_dir / "nope"), "--question", "q-live") == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_export_formats(run_dir, tmp_path):
    G = load_graph(graph_file(run_dir, "toy-1"))
    text = export_run(run_dir, "json", sample="toy-1")
    assert text == graph_file(run_dir, "toy-1").read_text(encoding="utf-8")
    out = export_run(run_dir, "graphml", tmp_path / "g.graphml", sample="toy-1")
    back = nx.read_graphml(out[0], force_multigraph=True)
    assert set(back.nodes) == set(G.nodes) and back.number_of_edges() == G.number_of_edges()
    assert json.loads(back.nodes["op:0"]["outputs"]) == G.nodes["op:0"]["outputs"]
    assert back.nodes["mem:memory-2@2"]["deleted"] in (True, "true")
    ET.fromstring(out[0].read_bytes())  # well-formed XML
    dot = export_run(run_dir, "dot", sample="toy-1")
    assert dot.startswith('digraph "toy toy-1" {') and dot.rstrip().endswith("}")
    assert dot.count(" -> ") == G.number_of_edges() and '"mem:memory-2@2"' in dot and to_dot(G) == dot
    written = export_run(run_dir, "dot")  # several graphs: one file each under <run>/exports
    assert sorted(p.name for p in written) == ["toy-1.dot", "toy-2.dot"]
    with pytest.raises(MemtraceError, match="unknown format"):
        export_run(run_dir, "pdf", sample="toy-1")


def test_scalar_graph_encodes_every_non_scalar(run_dir):
    H = scalar_graph(load_graph(graph_file(run_dir, "toy-1")))
    scalars = (str, int, float, bool)
    assert all(isinstance(v, scalars) for v in H.graph.values())
    assert all(isinstance(v, scalars) for _, d in H.nodes(data=True) for v in d.values())
    assert all(isinstance(v, scalars) for *_, d in H.edges(keys=True, data=True) for v in d.values())


def test_cli_export_writes_a_file(run_dir, tmp_path, capsys):
    target = tmp_path / "out.graphml"
    assert _cli("graph", "export", str(run_dir), "--sample", "toy-1", "--format", "graphml", "--out", str(target)) == 0
    assert target.read_text(encoding="utf-8").startswith("<?xml")
