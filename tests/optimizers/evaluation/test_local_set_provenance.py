"""The local set counts an answer call only when it was shown a unit that descends from the question's evidence."""

from __future__ import annotations

import networkx as nx

from memtrace_opt.attribution import GraphView
from memtrace_opt.data import Question
from memtrace_opt.optimizers.evaluation.local_set import _shown_evidence


def test_an_answer_call_counts_only_when_shown_a_unit_from_the_evidence() -> None:
    """A context that holds the answer's words by coincidence (a unit formed from another turn) gives no target."""
    graph = nx.MultiDiGraph()
    for dia, text in (("D1:1", "Ines: I named my new kayak Pebble."), ("D1:2", "Ines: Pebble is also my aunt's cat.")):
        graph.add_node(f"turn:{dia}", kind="var", vtype="turn", value={"$turn": f"turn:{dia}", "text": text})
    for unit, dia in (("turn-1", "D1:1"), ("turn-2", "D1:2")):
        graph.add_node(f"mem:{unit}@1", kind="var", vtype="memory", value=f"text of {dia}", source_turns=[dia])
    graph.add_node("op:0", kind="op", op="notes.answer", seq=0, predictor="answer.predict", inputs={}, outputs={})
    graph.add_edge("mem:turn-2@1", "op:0", role="input")
    question = Question("q1", "What did Ines name her kayak?", "Pebble", "single-hop", None, ("D1:1",))
    assert not _shown_evidence(GraphView(graph), question, "op:0")
    graph.add_edge("mem:turn-1@1", "op:0", role="input")
    assert _shown_evidence(GraphView(graph), question, "op:0")
