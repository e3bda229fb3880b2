"""Repairs of blamed calls: proposed by rule where the call lost the information (lineage test), with a demo form,
and confirmed on the predictor's own local calls, never by replaying a conversation."""

from __future__ import annotations

import json

import dspy
import pytest
from optfixtures import DECIDE, EXTRACT, make_models

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator
from memtrace_opt.optimizers.core.repair import Repair
from memtrace_opt.optimizers.evaluation.blame import attribute_failures
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.local_set import build_local_set
from memtrace_opt.optimizers.evaluation.repairs import as_fact, proposed_repairs
from memtrace_opt.optimizers.gates.local_objective import LocalObjective
from memtrace_opt.optimizers.loop.steps import confirm_repairs
from memtrace_opt.programs.mem0 import Mem0Memory
from memtrace_opt.testing import FakeEngine, FakeReply, Skill
from memtrace_opt.testing.skills import default_skills

CLARA = "marine biology"  # what Bob's sister studies: held by one memory, which the decision below destroys


def _traced(planted, examples, models=None):
    models = models or make_models()[0]
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    with dspy.context(lm=models.task):
        result = evaluator.evaluate(planted, case_refs(examples))
        blame = attribute_failures(result, result.failed(), method="lineage",
                                   predictors=[n for n, _ in planted.named_predictors()])
    return evaluator, result, blame, models


def test_repairs_write_the_lost_turn_as_a_fact_with_no_lm_call(planted, examples):
    evaluator, result, blame, models = _traced(planted, examples)
    before = models.usage.snapshot()["task"].calls
    found = proposed_repairs(planted, EXTRACT, result, blame, evaluator.memo, max_repairs=5)
    assert found.repairs and models.usage.snapshot()["task"].calls == before  # proposing them asks no model
    kitten = next(r for r in found.repairs if "kitten" in r.case_id)
    assert kitten.added == ("Alice adopted a kitten yesterday, her name is Luna. (13 March, 2034)",)  # a fact, not "Alice: I ..."
    demo = kitten.demo(dict(planted.named_predictors())[EXTRACT].signature)
    assert "Alice: I adopted a kitten" in demo["new_messages"] and kitten.added[0] in demo["facts"]
    assert Repair.from_dict(kitten.to_dict()) == kitten


def _confirmed(planted, examples, monkeypatch, *, scored=None):
    """The repairs of `planted`'s extraction confirmed on its local set, any conversation replay refused."""
    import sys

    import memtrace_opt.tracing

    def no_replay(*args, **kwargs):
        raise AssertionError("a repair is confirmed on the local calls, not by replaying a conversation")

    monkeypatch.setattr(sys.modules["memtrace_opt.tracing.replay"], "replay", no_replay)
    monkeypatch.setattr(memtrace_opt.tracing, "replay", no_replay)
    evaluator, result, blame, models = _traced(planted, examples)
    proposed = proposed_repairs(planted, EXTRACT, result, blame, evaluator.memo, max_repairs=5)
    local = build_local_set(planted, EXTRACT, result, evaluator.memo)
    objective = LocalObjective(local, planted, models.task)
    if scored is not None:
        monkeypatch.setattr(objective, "score", scored)
    with dspy.context(lm=models.task):
        return proposed, confirm_repairs(proposed, planted, EXTRACT, result, objective, first=len(local.calls))


def test_a_repair_is_confirmed_on_the_local_calls_with_no_conversation_replay(planted, examples, monkeypatch):
    proposed, (kept, scores) = _confirmed(planted, examples, monkeypatch)
    assert proposed.repairs and kept.repairs and kept.counts.kept == len(kept.repairs) == kept.counts.confirmed
    assert kept.counts.lm_calls == sum(s.lm_calls for s in scores) > 0  # the local calls re-run, nothing else
    assert all(s.fixed >= s.lost and s.own_calls >= 1 for s in scores)  # scored on the calls it was not made from


def test_a_repair_that_loses_more_than_it_carries_is_not_kept(planted, examples, monkeypatch):
    from memtrace_opt.optimizers.gates.local_objective import LocalScore

    def losing(program, candidate, first=None):
        return LocalScore(targets=4, carried=1, seed_carried=3, fixed=0, lost=2, bloat=0, calls=4, own_calls=1)

    proposed, (kept, _) = _confirmed(planted, examples, monkeypatch, scored=losing)
    assert proposed.repairs and not kept.repairs and kept.counts.not_confirmed == len(proposed.repairs)


def test_a_repair_of_a_call_that_already_held_the_fact_is_rejected_and_counted(planted, examples, monkeypatch):
    """The dog's breed: the call's own output held what the answer needed, so restating it teaches nothing."""
    import memtrace_opt.attribution._evidence as needed_module

    evaluator, result, blame, models = _traced(planted, examples)
    monkeypatch.setattr(needed_module.NeededInfo, "holds", lambda self, text: True)
    found = proposed_repairs(planted, EXTRACT, result, blame, evaluator.memo, max_repairs=5)
    assert not found.repairs
    assert found.counts.lineage_rejected == found.counts.tried > 0 and found.counts.confirmed == 0


def test_as_fact_names_the_speaker():
    assert as_fact("Bob", "I moved to Porto, my sister lives there.", "2:00 pm on 21 April, 2034") == \
        "Bob moved to Porto, Bob's sister lives there. (21 April, 2034)"


def _destroying(event: str, written: str = "strict"):
    """A fake decision LM that answers the Porto fact with an `event` (UPDATE with the fact's text, or DELETE, as
    the signature asks, with the memory's text) of the memory about Clara's studies, losing them; it first writes
    a NONE of an id the prompt never showed, which the op skips, and every other fact is an ADD. Its reply is
    indented JSON ("strict"), or the same with a trailing comma the adapter's parser mends ("mended")."""

    def decide(call):
        memories = json.loads(call.inputs["existing_memories"])
        clara = next((m for m in memories if CLARA in m["text"]), None)
        actions = [{"event": "NONE", "id": "7", "text": "a memory the prompt never showed"}]
        for fact in json.loads(call.inputs["new_facts"]):
            if clara is not None and "Porto" in fact:
                actions.append({"event": event, "id": clara["id"], "text": fact if event == "UPDATE" else clara["text"]})
            else:
                actions.append({"event": "ADD", "id": "", "text": fact})
        text = json.dumps(actions, ensure_ascii=False, indent=2)
        if written == "mended":
            text = text[:-2] + ",\n]"
        raise FakeReply(f"[[ ## memory_actions ## ]]\n{text}\n\n[[ ## completed ## ]]")

    engine = FakeEngine(skills=[Skill(("memory_actions",), decide, name="destroying-decision"), *default_skills()])
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)


def _decision_repairs(examples, models):
    program = Mem0Memory()
    evaluator, result, blame, models = _traced(program, examples, models)
    assert not next(c for c in result.cases if "q-sister" in c.case_id).correct  # the memory was lost
    return program, proposed_repairs(program, DECIDE, result, blame, evaluator.memo, max_repairs=5)


@pytest.mark.parametrize("event", ["UPDATE", "DELETE"])
def test_a_repair_that_keeps_a_destroyed_memory_is_written_back_as_a_none_of_the_id_the_lm_wrote(examples, event):
    program, found = _decision_repairs(examples, _destroying(event))
    assert found.counts.no_demo == 0 and len(found.repairs) == 1
    repair = found.repairs[0]
    assert "q-sister" in repair.case_id and repair.op == "mem0.update_decision"
    assert repair.added == ()  # a NONE adds nothing: the local check falls back to the gold answer
    demo = repair.demo(dict(program.named_predictors())[DECIDE].signature)
    recorded = repair.response.split("[[ ## memory_actions ## ]]")[1].split("[[ ## completed ## ]]")[0].strip()
    shown = {m["id"]: m["text"] for m in json.loads(demo["existing_memories"])}
    before, after = json.loads(recorded), json.loads(demo["memory_actions"])
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a]
    assert len(changed) == 1 and before[changed[0]]["event"] == event
    clara = before[changed[0]]["id"]
    assert after[changed[0]] == {"event": "NONE", "id": clara, "text": shown[clara]} and CLARA in shown[clara]
    # every other item byte for byte as the LM wrote it (indented), the NONE the only new text
    edited = json.dumps(after[changed[0]], ensure_ascii=False)
    head, _, tail = demo["memory_actions"].partition(edited)
    assert recorded.startswith(head) and recorded.endswith(tail) and "\n  {" in head
    assert json.loads(recorded[len(head):len(recorded) - len(tail)]) == before[changed[0]]
    assert "unit_id" not in demo["memory_actions"]  # the op's own unit ids never reach a demo


def test_a_changed_action_whose_written_item_is_not_certain_has_no_demo(examples):
    """The reply has a trailing comma: the adapter's parser mends it and the op reads the same actions, but the
    written list cannot be edited item by item, so the repair is counted, not proposed."""
    _, found = _decision_repairs(examples, _destroying("UPDATE", written="mended"))
    assert not found.repairs and found.counts.no_demo == 1 and found.counts.confirmed == 0
