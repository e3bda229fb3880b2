"""The local objective: candidates scored by re-running the local set's calls, one LM call each."""

from __future__ import annotations

import json

import dspy
import pytest
from optfixtures import BAD_EXTRACT, EXTRACT, FIXED, make_models

from memtrace_opt.optimizers import CachedEvaluator, ReplayMemo, case_refs, make_examples, with_instruction
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.evaluation.local_set import build_local_set
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.gates.local_objective import DictReplyBook, LocalObjective, LocalScore
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory
from memtrace_opt.testing import Skill
from memtrace_opt.testing.skills import default_skills

COPY = "Copy every message."


def copy_window(call) -> dict:
    """A bloated extractor: with COPY in its instruction it writes each message out a dozen times."""
    if COPY not in call.instruction:
        raise LookupError
    return {"facts": [call.inputs.get("new_messages", "")] * 12}


@pytest.fixture
def setup(conversation):
    models, engine = make_models()
    skills = list(engine.skills)
    facts = next(s for s in default_skills() if s.outputs == ("facts",))

    def extract(call):
        try:
            return copy_window(call)
        except LookupError:
            return facts.fn(call)

    engine.skills[:] = [Skill(("facts",), extract, name="facts"), *skills]
    program = with_instruction(Mem0Memory(Mem0Config(window_turns=2)), EXTRACT, BAD_EXTRACT)
    memo = ReplayMemo()
    evaluator = CachedEvaluator(AnswerMetric(), memo=memo, task_lm=models.task)
    with dspy.context(lm=models.task):
        result = evaluator.evaluate(program, case_refs(make_examples([conversation])))
    local = build_local_set(program, EXTRACT, result, memo)
    return models, engine, program, local


def test_a_planted_fault_is_seen_and_the_fixing_instruction_gains(setup) -> None:
    models, _, program, local = setup
    with dspy.context(lm=models.task):
        objective = LocalObjective(local, program, models.task)
        seed = objective.score(program, Candidate.of(EXTRACT, BAD_EXTRACT))
        fixed = objective.score(program, Candidate.of(EXTRACT, FIXED))
    assert (seed.carried, seed.gain) == (4, 0) and seed.targets == 9
    assert (fixed.carried, fixed.fixed, fixed.lost, fixed.bloat) == (9, 5, 0, 0)
    assert fixed.beats(2) and not seed.beats(1)
    assert LocalScore.from_dict(json.loads(json.dumps(fixed.to_dict()))) == fixed


def test_a_demo_fixes_the_calls_it_was_not_built_from(setup) -> None:
    """A worked example whose facts hold a date fixes the fake extractor; scored on the calls it was not made
    from, it still gains."""
    models, _, program, local = setup
    source = local.calls[0]
    demo = {"session_date": "Monday, 13 March 2034", "earlier_messages": "(none)",
            "new_messages": "Alice: I adopted a kitten yesterday, her name is Luna.",
            "facts": json.dumps(["Alice adopted a kitten named Luna on 12 March 2034."])}
    candidate = Candidate(EXTRACT, BAD_EXTRACT, (demo,), "demos", built_from=(source.key,))
    with dspy.context(lm=models.task):
        score = LocalObjective(local, program, models.task).score(program, candidate)
    assert score.own_calls == 1 and score.calls == len(local.calls) - 1
    assert score.targets == local.size - len(source.targets)
    assert score.fixed >= 2 and score.lost == 0


def test_an_output_past_the_bloat_limit_carries_nothing(setup) -> None:
    models, _, program, local = setup
    with dspy.context(lm=models.task):
        score = LocalObjective(local, program, models.task).score(program, Candidate.of(EXTRACT, BAD_EXTRACT + " " + COPY))
    assert score.bloat == len(local.calls) and score.carried == 0 and score.lost == local.seed_carried


def test_a_resumed_scoring_makes_no_call_twice(setup) -> None:
    models, engine, program, local = setup
    book = DictReplyBook()
    with dspy.context(lm=models.task):
        first = LocalObjective(local, program, models.task, book).score(program, Candidate.of(EXTRACT, FIXED))
        calls = len(engine.calls)
        again = LocalObjective(local, program, models.task, book).score(program, Candidate.of(EXTRACT, FIXED))
    assert first.lm_calls == len(local.calls) and again.lm_calls == 0
    assert len(engine.calls) == calls
    assert (again.carried, again.fixed) == (first.carried, first.fixed)
