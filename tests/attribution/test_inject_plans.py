"""MemTraceBench's fault plans on hand-built graphs: a skipped update, and the rule that keeps a case only when
its injected fault alone explains the failure."""

from __future__ import annotations

from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, GraphView
from memtrace_opt.attribution.lineage import case_flow
from memtrace_opt.benchmarks.memtracebench import BuildRequest
from memtrace_opt.benchmarks.memtracebench.build import _Builder
from memtrace_opt.benchmarks.memtracebench.inject import plan_injections
from memtrace_opt.data import Question

CONFIG = AttributionConfig(embedder="hash")
QUESTION_OBJ = Question(QID, QUESTION, GOLD, "single-hop", None, EVIDENCE)


def _flow(graph, prediction: str = GOLD):
    return case_flow(GraphView(graph), FailedCase(QID, QUESTION_OBJ, GOLD, prediction, EVIDENCE), CONFIG)


def test_a_skipped_update_drops_exactly_the_add_that_brought_the_fact_in() -> None:
    graph = build("mem0", "response").graph  # Biscuit is extracted, ADDed by op:2 and reaches the answer
    view = GraphView(graph)
    plans = plan_injections(view, _flow(graph), ["UpdateError"])
    skip = plans[0]
    assert (skip.error_type, skip.op_id, skip.op) == ("UpdateError", "op:2", "mem0.update_decision")
    recorded = view.attrs("op:2")["outputs"]["decisions"]
    forced = skip.forced["decisions"]
    assert len(forced) == len(recorded) - 1
    assert [a for a in recorded if a not in forced] == [{"event": "ADD", "text": "Alice adopted a beagle puppy named Biscuit"}]
    assert "skipped" in skip.how


def test_an_injection_is_kept_only_when_the_information_no_longer_reaches_the_answer(tmp_path) -> None:
    builder = _Builder(BuildRequest(systems=("mem0",), out=tmp_path, data="sample", embedder="hash"), None, None)
    intact = build("evermemos", "response").graph  # the information reaches the answer op
    lost = build("evermemos", "retrieval").graph  # retrieval returned no unit holding it
    [extraction] = [p for p in plan_injections(GraphView(intact), _flow(intact), ["ExtractionError"])][:1]
    [response] = plan_injections(GraphView(intact), _flow(intact), ["ResponseError"])
    assert not builder._decisive(GraphView(intact), QUESTION_OBJ, "Max", extraction)
    assert builder._decisive(GraphView(intact), QUESTION_OBJ, "Max", response)
    assert builder._decisive(GraphView(lost), QUESTION_OBJ, "Max", extraction)


def test_an_injection_is_not_kept_when_an_earlier_op_had_lost_the_information_too(tmp_path) -> None:
    from memtrace_opt.benchmarks.memtracebench.inject import Plan

    builder = _Builder(BuildRequest(systems=("evermemos",), out=tmp_path, data="sample", embedder="hash"), None, None)
    replayed = GraphView(build("evermemos", "extraction").graph)  # neither the episode (op:2) nor the event log (op:3) holds it
    at_event_log = Plan("ExtractionError", "op:3", "evermemos.extract_event_log", 3, {"events": []}, "dropped")
    at_episode = Plan("ExtractionError", "op:2", "evermemos.extract_episode", 2, {"episode": ""}, "dropped")
    assert not builder._decisive(replayed, QUESTION_OBJ, "Max", at_event_log)
    assert builder._decisive(replayed, QUESTION_OBJ, "Max", at_episode)


def test_a_deletion_deletes_every_unit_holding_the_fact_that_the_decision_was_shown() -> None:
    from attr_graphs import FACT_DOG, SESSION1, SESSION2, GraphBuilder, mem_list, turns

    b = GraphBuilder("mem0")
    facts = [FACT_DOG, "Alice's puppy Biscuit is a beagle", "Bob is learning the violin"]
    _, f = b.op("mem0.extract_facts", turns(SESSION1), {"facts": facts}, predictor="extract_facts.predict")
    _, d = b.op("mem0.update_decision", [f["facts"]], {"decisions": [{"event": "ADD", "text": x} for x in facts]},
                predictor="update_decision.predict")
    _, m = b.op("mem0.apply", [d["decisions"]], mems=[(f"fact-{i + 1}", 1, x, False) for i, x in enumerate(facts)])
    _, f2 = b.op("mem0.extract_facts", turns(SESSION2), {"facts": ["Alice's dog chewed her shoes"]},
                 predictor="extract_facts.predict")
    shown = [m["fact-1"], m["fact-2"], m["fact-3"]]
    _, s2 = b.op("mem0.search_similar", [f2["facts"], *shown], {"similar": mem_list(b.graph, shown)})
    keep = {"event": "NONE", "unit_id": "fact-3", "text": facts[2]}
    update = {"event": "UPDATE", "unit_id": "fact-1", "text": "Alice's dog Biscuit chewed her shoes"}
    decide, _ = b.op("mem0.update_decision", [*shown, f2["facts"], s2["similar"]], {"decisions": [update, keep]},
                     predictor="update_decision.predict")
    q = b.question()
    _, r = b.op("mem0.retrieve", [q, m["fact-1"], m["fact-2"]], {"memories": mem_list(b.graph, [m["fact-1"], m["fact-2"]])})
    b.op("mem0.answer", [q, r["memories"]], {"answer": GOLD}, predictor="answer.predict", answer_of=QID)

    [plan] = plan_injections(GraphView(b.graph), _flow(b.graph), ["DeletionError"])
    assert (plan.error_type, plan.op_id) == ("DeletionError", decide)
    forced = plan.forced["decisions"]
    # both holders of "Biscuit" deleted; the decision's own action on one of them replaced, the other kept
    assert sorted(a["unit_id"] for a in forced if a["event"] == "DELETE") == ["fact-1", "fact-2"]
    assert keep in forced and update not in forced


def test_a_deletion_is_not_kept_when_an_earlier_decision_had_overwritten_another_holder(tmp_path) -> None:
    from attr_graphs import FACT_DOG, SESSION1, SESSION2, GraphBuilder, mem_list, turns

    from memtrace_opt.benchmarks.memtracebench.inject import Plan

    b = GraphBuilder("mem0")
    facts = [FACT_DOG, "Alice's puppy Biscuit is a beagle"]
    _, f = b.op("mem0.extract_facts", turns(SESSION1), {"facts": facts}, predictor="extract_facts.predict")
    _, d = b.op("mem0.update_decision", [f["facts"]], {"decisions": [{"event": "ADD", "text": x} for x in facts]},
                predictor="update_decision.predict")
    _, m = b.op("mem0.apply", [d["decisions"]], mems=[("fact-1", 1, facts[0], False), ("fact-2", 1, facts[1], False)])
    _, f2 = b.op("mem0.extract_facts", turns(SESSION2), {"facts": ["Alice's dog chewed her shoes"]},
                 predictor="extract_facts.predict")
    overwrite = {"event": "UPDATE", "unit_id": "fact-1", "text": "Alice's dog chewed her shoes"}
    first, d2 = b.op("mem0.update_decision", [m["fact-1"], f2["facts"]], {"decisions": [overwrite]},
                     predictor="update_decision.predict")
    b.op("mem0.apply", [d2["decisions"], m["fact-1"]], mems=[("fact-1", 2, overwrite["text"], False)])
    delete = {"event": "DELETE", "unit_id": "fact-2", "text": facts[1]}
    second, d3 = b.op("mem0.update_decision", [m["fact-2"], f2["facts"]], {"decisions": [delete]},
                      predictor="update_decision.predict")
    _, m3 = b.op("mem0.apply", [d3["decisions"], m["fact-2"]], mems=[("fact-2", 2, facts[1], True)])
    q = b.question()
    _, r = b.op("mem0.retrieve", [q], {"memories": mem_list(b.graph, [])})
    b.op("mem0.answer", [q, r["memories"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)

    builder = _Builder(BuildRequest(systems=("mem0",), out=tmp_path, data="sample", embedder="hash"), None, None)
    view = GraphView(b.graph)
    at_second = Plan("DeletionError", second, "mem0.update_decision", view.seq(second), {}, "deleted")
    at_first = Plan("UpdateError", first, "mem0.update_decision", view.seq(first), {}, "overwrote")
    assert not builder._decisive(view, QUESTION_OBJ, "Max", at_second)  # fact-1 had lost it at `first` already
    assert builder._decisive(view, QUESTION_OBJ, "Max", at_first)
