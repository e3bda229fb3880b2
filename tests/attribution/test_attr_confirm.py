"""graphtrace's confirmation: a verdict on an upstream op is confirmed by replaying that op's repair; its repair
rejected, the next suspect is tried, and only a replay that saves the answer moves the verdict."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from attr_graphs import QID, build
from test_attr_counterfactual import FakeReplay, TaskReplay, case_for, task_model

from memtrace_opt.attribution import AttributionConfig, Replay, Verdict, attribute_cases
from memtrace_opt.attribution.counterfactual import ReplayContext
from memtrace_opt.testing.fake_lm import FakeEngine, Skill, fake_lm

CONFIG = AttributionConfig(embedder="hash")


@pytest.fixture
def blames_every_op():
    """An attributor LM that judges every op faulty: each suspect in turn is graphtrace's next verdict."""
    skills = [Skill(outputs=("faulty",), fn=lambda call: {"reason": "it lost the puppy's name", "faulty": True})]
    return fake_lm(engine=FakeEngine(skills=skills, model="fake-blames-all"), name="fake/blames-all")


def graphtrace(graph, lm, replay=None, config=CONFIG) -> Verdict:
    context = ReplayContext(program=None, conversation=None, replay_fn=replay) if replay is not None else None
    options = {"replay_provider": lambda case: context} if replay is not None else {}
    [verdict] = attribute_cases([case_for(graph)], "graphtrace", lm=lm, config=config, **options)
    return verdict


def test_a_repair_that_saves_the_answer_confirms_the_upstream_verdict(attributor_lm) -> None:
    built = build("mem0", "deletion")
    seq = int(built.op_id[3:])
    replay = FakeReplay(lambda forced: not any(a.get("event") == "DELETE" for a in forced[seq]["decisions"]))
    verdict = graphtrace(built.graph, attributor_lm, replay)
    assert (verdict.op_id, verdict.error_type, verdict.confirmed) == (built.op_id, "DeletionError", True)
    assert verdict.replays == (Replay(None, None, "Max", False), Replay(built.op_id, "mem0.update_decision", "Biscuit", True))
    assert verdict.confidence >= 0.9 and "confirmed: repairing mem0.update_decision" in verdict.reason
    assert [list(c) for c in replay.calls] == [[], [seq]]


def test_an_unconfirmed_suspect_gives_way_to_the_next_one_a_replay_confirms(blames_every_op) -> None:
    built = build("mem0", "deletion")  # suspects: the deleting decision, then the retrieval
    retrieve = next(op for op, d in built.graph.nodes(data=True) if d.get("op") == "mem0.retrieve")
    replay = FakeReplay(lambda forced: int(retrieve[3:]) in forced)
    verdict = graphtrace(built.graph, blames_every_op, replay)
    assert (verdict.op_id, verdict.error_type, verdict.confirmed) == (retrieve, "RetrievalError", True)
    assert [(r.op_id, r.correct) for r in verdict.replays] == [(None, False), (built.op_id, False), (retrieve, True)]


def test_when_no_repair_saves_the_answer_the_first_verdict_stands_unconfirmed(attributor_lm) -> None:
    built = build("evermemos", "extraction")  # one faulty suspect: the episode that lost the name
    replay = FakeReplay(lambda forced: False)
    verdict = graphtrace(built.graph, attributor_lm, replay)
    assert (verdict.op_id, verdict.error_type, verdict.confirmed) == (built.op_id, "ExtractionError", False)
    assert [(r.op_id, r.correct) for r in verdict.replays] == [(None, False), (built.op_id, False)]
    assert verdict.confidence <= 0.5 and "did not save the answer" in verdict.reason


@pytest.mark.parametrize(("system", "fault"), [("mem0", "deletion"), ("mem0", "update"), ("mem0", "extraction"),
                                             ("rag", "retrieval"), ("evermemos", "extraction")])
def test_replays_that_confirm_nothing_never_move_the_verdict(blames_every_op, system, fault) -> None:
    built = build(system, fault)
    structural = graphtrace(built.graph, blames_every_op, config=AttributionConfig(embedder="hash", confirm=False))
    verdict = graphtrace(built.graph, blames_every_op, FakeReplay(lambda forced: False))
    assert (verdict.op_id, verdict.error_type) == (structural.op_id, structural.error_type) == (built.op_id,
                                                                                                  built.error_type)
    assert verdict.confirmed is False and verdict.reason.startswith(f"{structural.reason} (unconfirmed: ")


def test_a_rejected_repair_keeps_the_verdict_when_the_next_suspect_cannot_be_replayed(blames_every_op) -> None:
    built = build("mem0", "extraction")  # suspects: the extraction that lost the name, then the retrieval
    verdict = graphtrace(built.graph, blames_every_op, FakeReplay(lambda forced: False))
    assert (verdict.op, verdict.error_type, verdict.confirmed) == ("mem0.extract_facts", "ExtractionError", False)
    assert [r.op_id for r in verdict.replays] == [None, built.op_id] and verdict.confidence <= 0.5
    assert "did not save the answer; mem0.retrieve cannot be repaired and forced" in verdict.reason


def test_a_rejected_suspect_does_not_give_way_to_the_answer_op(blames_every_op) -> None:
    built = build("rag", "retrieval")
    replay = FakeReplay(lambda forced: False)
    verdict = graphtrace(built.graph, blames_every_op, replay)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "RetrievalError")
    assert verdict.confirmed is False and [r.op_id for r in verdict.replays] == [None, built.op_id]
    assert "unconfirmed: replays with rag.retrieve" in verdict.reason


def test_at_most_max_replays_repaired_replays_a_case(blames_every_op) -> None:
    built = build("mem0", "deletion")
    replay = FakeReplay(lambda forced: False)
    verdict = graphtrace(built.graph, blames_every_op, replay, AttributionConfig(embedder="hash", max_replays=1))
    assert len(replay.calls) == 2  # the unchanged replay is not counted
    assert (verdict.op, verdict.confirmed) == ("mem0.update_decision", False) and "no replay left" in verdict.reason


def test_a_case_that_cannot_be_replayed_keeps_its_verdict_unconfirmed(attributor_lm) -> None:
    built = build("mem0", "deletion")
    plain = graphtrace(built.graph, attributor_lm)
    [no_context] = attribute_cases([case_for(built.graph)], "graphtrace", lm=attributor_lm, config=CONFIG,
                                   replay_provider=lambda case: None)
    assert plain.confirmed is None and plain.replays == ()
    assert (no_context.op_id, no_context.reason, no_context.confirmed, no_context.replays) == (
        plain.op_id, plain.reason, None, ())
    assert "confirmed" not in no_context.to_dict()


def test_a_replay_that_fails_or_does_not_reproduce_confirms_nothing(attributor_lm) -> None:
    built = build("mem0", "deletion")

    def broken(*args, **kwargs):
        raise RuntimeError("no program to replay")

    failed = graphtrace(built.graph, attributor_lm, broken)
    assert failed.error is None and failed.op_id == built.op_id and failed.confirmed is None
    assert "replay failed" in failed.reason
    correct = graphtrace(built.graph, attributor_lm, lambda *a, **k: SimpleNamespace(answers={QID: "Biscuit"}))
    assert correct.op_id == built.op_id and correct.confirmed is None
    assert "does not reproduce the failure" in correct.reason and len(correct.replays) == 1


def test_no_confirm_replays_nothing(attributor_lm) -> None:
    built = build("mem0", "deletion")
    replay = FakeReplay(lambda forced: True)
    verdict = graphtrace(built.graph, attributor_lm, replay, AttributionConfig(embedder="hash", confirm=False))
    assert replay.calls == [] and verdict.confirmed is None and verdict.op_id == built.op_id


def test_a_confirmed_verdict_round_trips_with_its_replays(attributor_lm) -> None:
    built = build("mem0", "deletion")
    verdict = graphtrace(built.graph, attributor_lm, FakeReplay(lambda forced: True))
    line = verdict.to_dict()
    assert line["confirmed"] is True and line["replays"][1]["op_id"] == built.op_id
    assert Verdict.from_dict(line).to_dict() == line


def test_the_replays_task_calls_are_counted_apart_from_the_attributors_questions(attributor_lm, attributor_engine) -> None:
    built = build("mem0", "deletion")
    plain = graphtrace(built.graph, attributor_lm)  # no replay: the attributor's questions alone
    asked = len(attributor_engine.calls)
    task = task_model()
    seq = int(built.op_id[3:])
    replay = TaskReplay(lambda forced: seq in forced)
    context = ReplayContext(program=None, conversation=None, replay_fn=replay, lm=task)
    [verdict] = attribute_cases([case_for(built.graph)], "graphtrace", lm=attributor_lm, config=CONFIG,
                                replay_provider=lambda case: context)
    assert verdict.confirmed is True and len(task.engine.calls) == 2  # the unchanged replay, then the repair
    assert verdict.cost.replay_calls == 2 and verdict.cost.replay_tokens > 0
    assert verdict.cost.lm_calls == len(attributor_engine.calls) - asked == plain.cost.lm_calls
    assert verdict.cost.tokens == plain.cost.tokens  # the same questions: no replay token among them
    assert Verdict.from_dict(verdict.to_dict()).cost == replace(verdict.cost, seconds=round(verdict.cost.seconds, 3))
