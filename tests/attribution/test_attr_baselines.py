"""The Who&When baselines over the flat op log, with a deterministic fake attributor LM."""

from __future__ import annotations

import math

from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, GraphView, attribute_cases
from memtrace_opt.attribution.baselines import op_log
from memtrace_opt.testing.fake_lm import FakeEngine, Skill, fake_lm

CONFIG = AttributionConfig(embedder="hash")


def case_for(graph) -> FailedCase:
    question = {"question_id": QID, "question": QUESTION}
    return FailedCase(QID, question, GOLD, "Max", EVIDENCE, "test", "s1", graph=graph)


def run(method, graph, *skills):
    engine = FakeEngine(skills=list(skills))
    [verdict] = attribute_cases([case_for(graph)], method, lm=fake_lm(engine=engine), config=CONFIG)
    return verdict, engine


def test_all_at_once_reads_the_op_and_type_the_lm_names() -> None:
    built = build("mem0", "update")

    logs = []

    def blame(call):
        logs.append(call.inputs["op_log"])
        return {"reason": "it overwrote the name", "op_id": f"the culprit is {built.op_id}", "error_type": "UpdateError"}

    verdict, engine = run("all_at_once", built.graph, Skill(outputs=("op_id",), fn=blame))
    assert (verdict.op_id, verdict.error_type, verdict.op) == (built.op_id, "UpdateError", "mem0.update_decision")
    assert verdict.cost.lm_calls == 1 == len(engine.calls)
    assert f"{built.op_id} mem0.update_decision" in logs[0]


def test_all_at_once_with_an_op_the_graph_lacks_names_none() -> None:
    built = build("rag", "retrieval")
    skill = Skill(outputs=("op_id",), fn=lambda call: {"reason": "?", "op_id": "op:999", "error_type": "RetrievalError"})
    verdict, _ = run("all_at_once", built.graph, skill)
    assert verdict.error is None and verdict.op_id is None and verdict.confidence == 0.0
    assert "named no op" in verdict.reason


def test_all_at_once_keeps_the_log_within_its_budget() -> None:
    built = build("evermemos", "merge")
    sizes = []
    skill = Skill(outputs=("op_id",), fn=lambda call: sizes.append(len(call.inputs["op_log"])) or {"op_id": "op:0"})
    engine = FakeEngine(skills=[skill])
    attribute_cases([case_for(built.graph)], "all_at_once", lm=fake_lm(engine=engine),
                    config=AttributionConfig(embedder="hash", log_chars=1500))
    assert sizes and sizes[0] <= 1500


def decisive_when_lost(call):
    inputs, _, outputs = call.inputs["operation"].partition("OUTPUTS:")
    decisive = GOLD.lower() in inputs.lower() and GOLD.lower() not in outputs.lower()
    return {"reason": "lost" if decisive else "fine", "decisive": decisive}


def test_step_by_step_stops_at_the_first_decisive_op() -> None:
    built = build("rag", "extraction")
    verdict, engine = run("step_by_step", built.graph, Skill(outputs=("decisive",), fn=decisive_when_lost))
    assert (verdict.op_id, verdict.error_type) == ("op:0", "ExtractionError")
    assert len(engine.calls) == 1


def test_step_by_step_blames_the_answer_op_when_no_op_is_decisive() -> None:
    built = build("rag", "retrieval")
    skill = Skill(outputs=("decisive",), fn=lambda call: {"reason": "fine", "decisive": False})
    verdict, engine = run("step_by_step", built.graph, skill)
    _, ops = op_log(GraphView(built.graph), QID)
    assert verdict.op_id == ops[-1] and verdict.error_type == "ResponseError"
    assert len(engine.calls) == len(ops)


def test_binary_search_halves_to_the_op_the_lm_points_at() -> None:
    built = build("evermemos", "merge")
    target = f"{built.op_id} evermemos.merge"
    skill = Skill(outputs=("half",), fn=lambda call: {"reason": "", "half": "first" if target in call.inputs["first_half"] else "second"})
    verdict, engine = run("binary_search", built.graph, skill)
    _, ops = op_log(GraphView(built.graph), QID)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "RetrievalError")
    assert len(engine.calls) <= math.ceil(math.log2(len(ops)))


def test_random_is_seeded_per_case_and_picks_an_op_of_the_log() -> None:
    built = build("mem0", "deletion")
    _, ops = op_log(GraphView(built.graph), QID)
    first = attribute_cases([case_for(built.graph)], "random", config=CONFIG)[0]
    again = attribute_cases([case_for(built.graph)], "random", config=CONFIG)[0]
    assert first.op_id == again.op_id and first.op_id in ops
    picks = {attribute_cases([case_for(built.graph)], "random", config=AttributionConfig(seed=s))[0].op_id for s in range(12)}
    assert len(picks) > 1


def test_blame_response_always_blames_the_answer_op() -> None:
    built = build("long_context", "deletion")
    [verdict] = attribute_cases([case_for(built.graph)], "blame_response")
    assert verdict.op == "long_context.answer" and verdict.error_type == "ResponseError"
    assert verdict.cost.lm_calls == 0
