"""The local set: a predictor's recorded calls that read a training question's evidence, each with its target."""

from __future__ import annotations

import json
from dataclasses import replace

import dspy
import pytest
from optfixtures import ANSWER, BAD_EXTRACT, DECIDE, EXTRACT

from memtrace_opt.memory import OpRole
from memtrace_opt.optimizers import CachedEvaluator, ReplayMemo, case_refs, make_examples, with_instruction
from memtrace_opt.optimizers.core.evidence import prompt_fields
from memtrace_opt.optimizers.core.repair import Repair
from memtrace_opt.optimizers.evaluation.local_set import LocalSet, build_local_set
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory, UpdateDecision


@pytest.fixture
def traced(fake_models, conversation):
    """The planted Mem0 program (no word about dates: the fake extractor drops dated facts), windows of 2 turns,
    traced on the toy conversation."""
    models, _ = fake_models
    program = with_instruction(Mem0Memory(Mem0Config(window_turns=2)), EXTRACT, BAD_EXTRACT)
    memo = ReplayMemo()
    evaluator = CachedEvaluator(AnswerMetric(), memo=memo, task_lm=models.task)
    with dspy.context(lm=models.task):
        result = evaluator.evaluate(program, case_refs(make_examples([conversation])))
    return program, result, memo


def test_extraction_calls_get_the_questions_whose_evidence_they_read_first(traced) -> None:
    program, result, memo = traced
    local = build_local_set(program, EXTRACT, result, memo)
    assert local.role is OpRole.FORMS
    assert len(local.calls) == 4 and local.size == 9  # each window of 2 turns read the evidence of 2-3 questions
    first = local.calls[0]
    assert {t.case_id.split(":")[1] for t in first.targets} == {"q-kitten-when", "q-kitten-name", "q-job"}
    # the planted fault: the facts with a date or number were dropped, so only the undated ones are carried
    carried = {t.case_id.split(":")[1] for c in local.calls for t, ok in zip(c.targets, c.seed_carried, strict=True) if ok}
    assert carried == {"q-job", "q-sister", "q-boat", "q-pottery"}
    assert local.seed_carried == 4
    assert local.bloat_limit >= 320 * 4  # the op's reply cap


def test_the_answer_op_gets_the_gold_answer_and_leaves_out_contexts_that_lack_it(traced) -> None:
    program, result, memo = traced
    local = build_local_set(program, ANSWER, result, memo)
    assert local.role is OpRole.ANSWERS
    assert all(len(c.targets) == 1 for c in local.calls)
    # four questions' facts (the ones told with a date) never reached the memory: no answer prompt can answer them
    assert local.excluded == {"input_lacks": 4} and len(local.calls) == 5
    assert local.seed_carried == sum(c.correct for c in result.cases)


def test_a_local_set_round_trips_and_a_repair_becomes_its_calls_target(traced) -> None:
    program, result, memo = traced
    local = build_local_set(program, EXTRACT, result, memo)
    assert LocalSet.from_dict(json.loads(json.dumps(local.to_dict()))) == local
    call = local.calls[0]
    case_id = call.targets[0].case_id
    repair = Repair(case_id, call.key.rsplit("/", 1)[-1], "mem0.extract_facts", EXTRACT, call.prompt, call.response,
                    {"facts": "[]"}, ("Alice adopted a kitten named Luna on 12 March 2034.",), "12 March 2034")
    repaired = local.with_repairs([repair])
    target = repaired.calls[0].targets[0]
    assert target.items == repair.added and repaired.calls[0].seed_carried[0] is False
    assert target.carried(OpRole.FORMS, ["On 12 March 2034 Alice adopted a kitten named Luna."])
    assert not target.carried(OpRole.FORMS, ["Alice adopted a kitten."])
    assert repaired.calls[1:] == local.calls[1:]


def test_the_targets_of_gold_error_cases_leave_the_set_and_are_counted(traced) -> None:
    program, result, memo = traced
    local = build_local_set(program, EXTRACT, result, memo)
    first = local.calls[0]
    gone = {t.case_id for t in first.targets}  # every target of the first call
    fewer = local.without(gone, "gold_error")
    assert fewer.size == local.size - len(first.targets) and fewer.excluded["gold_error"] == len(first.targets)
    assert first.key not in {c.key for c in fewer.calls}
    assert all(len(c.targets) == len(c.seed_carried) for c in fewer.calls)
    assert local.without(set(), "gold_error") is local


def test_an_op_without_a_local_target_gets_an_empty_set(traced) -> None:
    program, result, memo = traced
    assert build_local_set(program, "nope.predict", result, memo).calls == ()


def test_update_decision_live_after_applies_its_actions_to_what_it_was_shown() -> None:
    prompt = ("[[ ## existing_memories ## ]]\n"
              + json.dumps([{"id": "0", "text": "Ines plays the cello."}, {"id": "1", "text": "Ines lives in Graz."},
                            {"id": "2", "text": "Ines owns a blue canoe."}])
              + "\n\n[[ ## new_facts ## ]]\n" + json.dumps(["Ines moved to Linz.", "Ines sold the canoe."]))
    fields = prompt_fields(prompt)
    assert set(fields) == {"existing_memories", "new_facts"}
    actions = [{"event": "UPDATE", "id": "1", "text": "Ines lives in Linz."}, {"event": "DELETE", "id": "2", "text": ""},
               {"event": "ADD", "id": "", "text": "Ines sold her blue canoe."}, {"event": "NONE", "id": "9", "text": "x"}]
    live = UpdateDecision.live_after(fields, {"memory_actions": actions})
    assert live == ["Ines plays the cello.", "Ines lives in Linz.", "Ines sold her blue canoe."]
    assert UpdateDecision.live_after({"new_facts": "[]"}, {"memory_actions": []}) is None


def test_update_decision_calls_are_judged_by_what_they_leave_live(fake_models, conversation) -> None:
    """A second session repeats facts of the first: every decision shown a memory that holds a question's
    information gets its target, and keeping that memory live carries it."""
    models, _ = fake_models
    program = with_instruction(Mem0Memory(Mem0Config(window_turns=4)), EXTRACT, BAD_EXTRACT + " Keep every date.")
    memo = ReplayMemo()
    evaluator = CachedEvaluator(AnswerMetric(), memo=memo, task_lm=models.task)
    first = conversation.sessions[0]
    again = replace(first, index=3, turns=tuple(replace(t, dia_id=f"D3:{n}", session_index=3)
                                                 for n, t in enumerate(first.turns, start=1)))
    repeated = replace(conversation, sessions=(*conversation.sessions, again))
    with dspy.context(lm=models.task):
        result = evaluator.evaluate(program, case_refs(make_examples([repeated])))
    local = build_local_set(program, DECIDE, result, memo)
    assert local.role is OpRole.UPDATES and len(local.calls) == 2
    session2, session3 = local.calls
    # session 2's decision was given its own new facts and the memory of Bob's sister; session 3's every memory
    # of session 1 again: each decision shown a question's information must leave it live
    assert {t.case_id.split(":")[1] for t in session3.targets} >= {"q-kitten-when", "q-kitten-name", "q-job",
                                                                   "q-marathon-when", "q-sister"}
    assert "q-sister" in {t.case_id.split(":")[1] for t in session2.targets}
    assert local.seed_carried == local.size  # the fake decision keeps them (NONE) or ADDs the new ones
