"""Repairs of blamed calls: confirmed by replay, kept only where the call lost the information (lineage test)."""

from __future__ import annotations

import dspy
from optfixtures import EXTRACT, make_models

from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator
from memtrace_opt.optimizers.evaluation.blame import attribute_failures
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.repairs import Repair, as_fact, confirmed_repairs


def _traced(planted, examples):
    models, _ = make_models()
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    with dspy.context(lm=models.task):
        result = evaluator.evaluate(planted, case_refs(examples))
        blame = attribute_failures(result, result.failed(), method="lineage",
                                   predictors=[n for n, _ in planted.named_predictors()])
    return evaluator, result, blame, models


def test_repairs_are_confirmed_by_replay_and_write_the_lost_turn_as_a_fact(planted, examples):
    evaluator, result, blame, models = _traced(planted, examples)
    with dspy.context(lm=models.task):
        found = confirmed_repairs(planted, EXTRACT, result, blame, evaluator, max_repairs=5)
    assert found.repairs and found.counts.kept == len(found.repairs) and found.counts.lm_calls > 0
    kitten = next(r for r in found.repairs if "kitten" in r.case_id)
    assert kitten.added == ("Alice adopted a kitten yesterday, her name is Luna. (8 May, 2023)",)  # a fact, not "Alice: I ..."
    demo = kitten.demo(dict(planted.named_predictors())[EXTRACT].signature)
    assert "Alice: I adopted a kitten" in demo["new_messages"] and kitten.added[0] in demo["facts"]
    assert Repair.from_dict(kitten.to_dict()) == kitten


def test_a_repair_the_replay_does_not_confirm_is_not_kept(planted, examples, monkeypatch):
    evaluator, result, blame, models = _traced(planted, examples)
    monkeypatch.setattr(evaluator, "metric", lambda question, answer: AnswerMetric()(question, "no idea"))
    with dspy.context(lm=models.task):
        found = confirmed_repairs(planted, EXTRACT, result, blame, evaluator, max_repairs=5)
    assert not found.repairs and found.counts.not_confirmed == found.counts.tried > 0


def test_a_confirmed_repair_of_a_call_that_already_held_the_fact_is_rejected_and_counted(planted, examples, monkeypatch):
    """The dog's breed: the replay saves the answer, but the call's own output held what the answer needed."""
    import memtrace_opt.attribution._evidence as needed_module

    evaluator, result, blame, models = _traced(planted, examples)
    monkeypatch.setattr(needed_module.NeededInfo, "holds", lambda self, text: True)
    with dspy.context(lm=models.task):
        found = confirmed_repairs(planted, EXTRACT, result, blame, evaluator, max_repairs=5)
    assert not found.repairs
    assert found.counts.lineage_rejected == found.counts.tried > 0 and found.counts.confirmed == found.counts.tried


def test_as_fact_names_the_speaker():
    assert as_fact("Bob", "I moved to Porto, my sister lives there.", "2:00 pm on 9 June, 2023") == \
        "Bob moved to Porto, Bob's sister lives there. (9 June, 2023)"
