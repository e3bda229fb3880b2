"""counterfactual: graphtrace candidates confirmed by executable replay with repaired outputs."""

from __future__ import annotations

from types import SimpleNamespace

import dspy
from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, attribute_cases
from memtrace_opt.attribution.counterfactual import ReplayContext

CONFIG = AttributionConfig(embedder="hash")


def case_for(graph) -> FailedCase:
    question = {"question_id": QID, "question": QUESTION, "answer": GOLD, "category": "single-hop"}
    return FailedCase(QID, question, GOLD, "Max", EVIDENCE, "test", "s1", graph=graph)


class FakeReplay:
    """Answers the gold answer when `saves(forced)` says the forced outputs would save it."""

    def __init__(self, saves) -> None:
        self.saves = saves
        self.calls: list[dict] = []

    def __call__(self, program, conversation, questions, record, *, instructions=None, forced=None):
        self.calls.append(dict(forced))
        answer = GOLD if forced and self.saves(forced) else "Max"
        return SimpleNamespace(answers={questions[0].question_id: answer})


class TaskReplay(FakeReplay):
    """A FakeReplay that, like a real one, asks the task model (the LM in context) once per replay."""

    def __call__(self, program, conversation, questions, record, *, instructions=None, forced=None):
        dspy.Predict("question -> answer")(question=questions[0].question)
        return super().__call__(program, conversation, questions, record, instructions=instructions, forced=forced)


def task_model():
    """A fake task model that answers every question 'Max'."""
    from memtrace_opt.testing import FakeEngine, Skill, fake_lm

    return fake_lm(engine=FakeEngine(skills=[Skill(outputs=("answer",), fn=lambda call: {"answer": "Max"})],
                                     model="fake-task"), name="fake/task")


def test_a_repaired_update_decision_is_confirmed_by_replay(attributor_lm) -> None:
    built = build("mem0", "deletion")
    seq = int(built.op_id[3:])

    def saves(forced):
        actions = forced.get(seq, {}).get("decisions", [])
        return bool(actions) and not any(a.get("event") == "DELETE" for a in actions)

    replay = FakeReplay(saves)
    context = ReplayContext(program=None, conversation=None, replay_fn=replay)
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda case: context)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "DeletionError")
    assert verdict.confidence == 0.95 and "replaying answers" in verdict.reason
    assert [list(c) for c in replay.calls] == [[], [seq]]  # the failure reproduced, then the repair
    assert {a["event"] for a in replay.calls[1][seq]["decisions"]} == {"NONE", "ADD"}


def test_retrieval_repair_adds_the_unit_that_held_the_information(attributor_lm) -> None:
    built = build("rag", "retrieval")
    seq = int(built.op_id[3:])
    replay = FakeReplay(lambda forced: any("Biscuit" in u["text"] for u in forced.get(seq, {}).get("units", [])))
    context = ReplayContext(program=None, conversation=None, replay_fn=replay)
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda case: context)
    assert (verdict.op_id, verdict.error_type, verdict.confidence) == (built.op_id, "RetrievalError", 0.95)
    assert replay.calls[1][seq]["units"][0]["$mem"] == "mem:chunk-1@1"


def test_an_unconfirmed_candidate_keeps_graphtrace_verdict_with_less_confidence(attributor_lm) -> None:
    built = build("evermemos", "extraction")
    replay = FakeReplay(lambda forced: False)
    context = ReplayContext(program=None, conversation=None, replay_fn=replay)
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm,
                                config=AttributionConfig(embedder="hash", max_replays=2),
                                replay_provider=lambda case: context)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "ExtractionError")
    assert verdict.confidence <= 0.5 and "unconfirmed" in verdict.reason
    assert 2 <= len(replay.calls) <= 3


def test_a_replay_that_does_not_reproduce_the_failure_confirms_nothing(attributor_lm) -> None:
    built = build("rag", "retrieval")
    context = ReplayContext(program=None, conversation=None, replay_fn=lambda *a, **k: SimpleNamespace(answers={QID: GOLD}))
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda case: context)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "RetrievalError")
    assert "does not reproduce the failure" in verdict.reason and verdict.confidence <= 0.5


def test_without_a_replay_context_the_verdict_is_marked_unconfirmed(attributor_lm) -> None:
    built = build("mem0", "update")
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm, config=CONFIG)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "UpdateError")
    assert verdict.method == "counterfactual" and "no replay context" in verdict.reason


def test_the_replays_task_calls_are_counted_apart_from_the_attributors(attributor_lm, attributor_engine) -> None:
    built = build("mem0", "deletion")
    task = task_model()
    context = ReplayContext(program=None, conversation=None, replay_fn=TaskReplay(lambda forced: False), lm=task)
    [verdict] = attribute_cases([case_for(built.graph)], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda case: context)
    assert len(verdict.replays) >= 2 and verdict.cost.replay_calls == len(verdict.replays) == len(task.engine.calls)
    assert verdict.cost.lm_calls == len(attributor_engine.calls)
    assert verdict.cost.replay_tokens > 0 and verdict.to_dict()["cost"]["replay_calls"] == verdict.cost.replay_calls


def test_counterfactual_on_a_real_replayed_mem0_run(attributor_lm, attributor_engine) -> None:
    """mem0 on the packaged sample with an extraction prompt that drops dated facts: the replay that puts the
    evidence back into op's facts answers correctly."""
    from memtrace_opt.data.loader import load_sample
    from memtrace_opt.metrics.score import score_answer
    from memtrace_opt.programs import make_program
    from memtrace_opt.testing import FakeEngine, fake_lm
    from memtrace_opt.testing.skills import default_skills
    from memtrace_opt.tracing import replay, trace_conversation

    conversation = load_sample().conversations[0]
    question = next(q for q in conversation.questions if q.answer == "Chemistry")
    program = make_program("mem0", {"embedder": "hash"})
    task = fake_lm(engine=FakeEngine(skills=default_skills()), name="fake/task")
    with dspy.context(lm=task):
        base = trace_conversation(program, conversation, [question])
        broken = replay(program, conversation, [question], base.events,
                        instructions={"extract_facts.predict": "Extract the personal facts from the new messages."})
    assert score_answer(question, base.answers[question.question_id]).correct_by_rule
    prediction = broken.answers[question.question_id]
    assert not score_answer(question, prediction).correct_by_rule
    case = FailedCase("mem0:q1", question, question.answer, prediction, question.evidence, "mem0",
                      conversation.sample_id, graph=broken.graph)
    context = ReplayContext(program=broken.program, conversation=conversation, record=broken.events, lm=task)
    before = len(task.engine.calls)
    [verdict] = attribute_cases([case], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda c: context)
    assert verdict.op == "mem0.extract_facts" and verdict.error_type == "ExtractionError"
    # the program's calls while replaying are the replays' part of the cost; the attributor's questions the rest
    assert verdict.cost.replay_calls == len(task.engine.calls) - before > 0
    assert verdict.cost.lm_calls == len(attributor_engine.calls)
    assert verdict.confidence == 0.95, verdict.reason
    assert "chemistry" in verdict.reason.lower()


def test_counterfactual_confirms_a_retrieval_fault_of_a_later_question(attributor_lm) -> None:
    """A search is forced by call order: the replay must ask the earlier questions again to reach it."""
    from memtrace_opt.data.loader import load_sample
    from memtrace_opt.metrics.score import score_answer
    from memtrace_opt.programs import make_program
    from memtrace_opt.testing import FakeEngine, fake_lm
    from memtrace_opt.testing.skills import default_skills
    from memtrace_opt.tracing import replay, trace_conversation

    conversation = load_sample().conversations[0]
    question = next(q for q in conversation.questions if q.question == "When did Maya move to Denver?")
    program = make_program("mem0", {"embedder": "hash"})
    task = fake_lm(engine=FakeEngine(skills=default_skills()), name="fake/task")
    with dspy.context(lm=task):
        base = trace_conversation(program, conversation)
    assert score_answer(question, base.answers[question.question_id]).correct_by_rule
    graph = base.graph()
    [search] = [op for op, d in graph.nodes(data=True) if d.get("op") == "mem0.retrieve"
                and f"q:{question.question_id}" in graph.predecessors(op)]
    outputs = graph.nodes[search]["outputs"]
    keep = [i for i, u in enumerate(outputs["units"]) if "Denver" not in u["text"]]
    forced = {"units": [outputs["units"][i] for i in keep], "scores": [outputs["scores"][i] for i in keep]}
    asked = conversation.questions[: conversation.questions.index(question) + 1]
    with dspy.context(lm=task):
        broken = replay(program, conversation, asked, base.events, forced={graph.nodes[search]["seq"]: forced})
    prediction = broken.answers[question.question_id]
    assert not score_answer(question, prediction).correct_by_rule
    case = FailedCase("mem0:q5", question, question.answer, prediction, question.evidence, "mem0",
                      conversation.sample_id, graph=broken.graph)
    seq = graph.nodes[search]["seq"]
    context = ReplayContext(program=program, conversation=conversation, record=broken.events, lm=task,
                            forced={seq: forced})
    [verdict] = attribute_cases([case], "counterfactual", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda c: context)
    assert (verdict.op, verdict.error_type, verdict.confidence) == ("mem0.retrieve", "RetrievalError", 0.95), verdict.reason
    assert verdict.op_id == search



def test_a_replays_task_tokens_do_not_spend_the_cases_attributor_budget(attributor_lm) -> None:
    """The asker's token limit is for the attributor's own questions: a replay on the task model leaves it whole,
    in counterfactual as in graphtrace's confirmation (both go through CaseReplayer.try_repair)."""
    from memtrace_opt.attribution._ask import Asker
    from memtrace_opt.attribution._graph import GraphView
    from memtrace_opt.attribution._replay import CaseReplayer
    from memtrace_opt.attribution.lineage import case_flow

    built = build("mem0", "deletion")
    case = case_for(built.graph)
    view = GraphView.of(built.graph)
    context = ReplayContext(program=None, conversation=None, replay_fn=TaskReplay(lambda forced: False),
                            lm=task_model())
    replayer = CaseReplayer(case, built.graph, view, case_flow(view, case, CONFIG), context)
    with dspy.context(lm=attributor_lm), Asker(max_calls=5, max_tokens=1) as asker:
        replay = replayer.try_repair(built.op_id, asker)
        assert replay is not None and not replay.correct
        assert asker.tokens == 0 and asker.can_ask()
    assert replayer.usage.calls == 1 and replayer.usage.prompt_tokens > 0
