"""Which nodes a question's view keeps: its story, not the thousands of nodes around it."""

from __future__ import annotations

import re
import time
from pathlib import Path

from memtrace_opt.report import load_run, question_view, read_path
from memtrace_opt.report._subgraph import VERSION_ROLE, unit_versions


def _case(run, qid):
    case = next(c for c in run.cases if c["question_id"] == qid)
    blamed = [v["op_id"] for v in run.verdicts_by_case().get(case["case_id"], []) if v.get("op_id")]
    return case, blamed


def _view(run_dir: Path, qid: str, **kwargs):
    run = load_run(run_dir)
    case, blamed = _case(run, qid)
    graph = run.graph(case["graph"])
    return graph, question_view(graph, question_id=qid, evidence=case["evidence"], blamed=blamed, **kwargs), blamed


def test_view_holds_question_answer_evidence_blamed_op_and_version_chain(demo_run: Path) -> None:
    graph, view, blamed = _view(demo_run, "demo-q3")  # the bookshop memory deleted by a bad decision
    nodes = set(view.nodes)
    assert {"q:demo-q3", "ans:demo-q3", "turn:D1:4", "turn:D3:2"} <= nodes
    assert view.blamed == tuple(blamed) and blamed[0] in nodes
    assert graph.nodes[blamed[0]]["op"] == "mem0.update_decision"
    assert {"mem:m-3@1", "mem:m-3@2"} <= nodes  # the unit's life: written, then deleted
    writer = next(p for p in graph.predecessors("mem:m-3@2") if graph.nodes[p]["kind"] == "op")
    assert writer in nodes
    assert ("mem:m-3@1", writer, "input") in view.edges
    assert set(view.evidence_turns) == {"turn:D1:4", "turn:D3:2"}
    assert not view.missing_evidence and not view.truncated


def test_evidence_that_is_stored_but_never_retrieved_does_not_reach_the_answer(demo_run: Path) -> None:
    graph, view, blamed = _view(demo_run, "demo-q4")  # Marzipan the cat: stored, not retrieved
    cat = next(n for n, d in graph.nodes(data=True) if "Marzipan" in str(d.get("value")) and n.startswith("mem:"))
    assert cat in view.evidence_flow
    assert cat not in view.read_path
    assert not view.reaches_answer and not view.evidence_path
    assert graph.nodes[blamed[0]]["op"] == "mem0.retrieve" and blamed[0] in view.read_path


def test_evidence_path_runs_from_the_turn_to_the_answer_when_it_gets_there(demo_run: Path) -> None:
    _, view, _ = _view(demo_run, "demo-q5")  # cello: retrieved, answer wrong
    assert view.reaches_answer
    assert {"turn:D1:5", "ans:demo-q5"} <= view.evidence_path
    assert "q:demo-q5" not in view.evidence_path  # the question is not evidence


def test_big_conversation_views_stay_small_and_skip_unrelated_sessions(big_run: Path) -> None:
    run = load_run(big_run)
    graph = run.graph(run.cases[0]["graph"])
    assert graph.number_of_nodes() > 3000
    versions = unit_versions(graph)
    started = time.perf_counter()
    for case in run.cases:
        _, blamed = _case(run, case["question_id"])
        view = question_view(graph, question_id=case["question_id"], evidence=case["evidence"], blamed=blamed,
                             versions=versions)
        assert 5 <= len(view.nodes) <= 60, (case["question_id"], len(view.nodes))
        filler_turns = [n for n in view.nodes if re.match(r"turn:D1\d\d:", n)]
        assert not filler_turns  # the 300 unrelated sessions read these memories, but tell nothing here
    assert time.perf_counter() - started < 5


def test_cap_keeps_the_most_important_nodes_first(demo_run: Path) -> None:
    _, view, blamed = _view(demo_run, "demo-q6", max_nodes=7)
    assert len(view.nodes) == 7 and view.truncated
    assert {"q:demo-q6", "ans:demo-q6", "turn:D2:3", "turn:D2:4", "turn:D3:4", blamed[0]} <= set(view.nodes)


def test_missing_and_malformed_evidence_ids(demo_run: Path) -> None:
    run = load_run(demo_run)
    graph = run.graph(run.cases[0]["graph"])
    view = question_view(graph, question_id="demo-q1", evidence=["D9:9", "D1:3; D1:5"])
    assert view.missing_evidence == ("D9:9",)
    assert view.evidence_turns == ("turn:D1:3", "turn:D1:5")


def test_unknown_question_gives_an_empty_story_not_an_error(demo_run: Path) -> None:
    run = load_run(demo_run)
    graph = run.graph(run.cases[0]["graph"])
    view = question_view(graph, question_id="nope", evidence=["D1:1"], blamed=["op:999"])
    assert "turn:D1:1" in view.nodes and not view.read_path and view.blamed == ()


def test_read_path_is_retrieval_then_answer_in_order(demo_run: Path) -> None:
    run = load_run(demo_run)
    graph = run.graph(run.cases[0]["graph"])
    path = read_path(graph, "demo-q5")
    ops = [graph.nodes[n]["op"] for n in path if graph.nodes[n].get("kind") == "op"]
    assert ops == ["mem0.retrieve", "mem0.answer"]
    assert path[0] == "q:demo-q5" and path[-1] == "ans:demo-q5"


def test_versions_are_linked_even_without_an_input_edge(demo_run: Path) -> None:
    run = load_run(demo_run)
    graph = run.graph(run.cases[0]["graph"])
    for u, v, key in list(graph.edges(keys=True)):
        if u == "mem:m-3@1":
            graph.remove_edge(u, v, key)
    view = question_view(graph, question_id="demo-q3", evidence=["D1:4"])
    assert ("mem:m-3@1", "mem:m-3@2", VERSION_ROLE) in view.edges
