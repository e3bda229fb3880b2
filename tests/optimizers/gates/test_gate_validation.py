"""The validation gate: acceptance on the valset, and no validation the calls left cannot carry."""

from __future__ import annotations

from parts import ScriptedEvaluator, budget

from memtrace_opt.optimizers import Candidate, Status, StrictImprovement
from memtrace_opt.optimizers.gates.validation import ValidationGate
from memtrace_opt.programs.mem0 import Mem0Memory

EXTRACT = "extract_facts.predict"


def gate(limit: int | None = None, spent: int = 0, min_delta: float = 0.0) -> ValidationGate:
    evaluator = ScriptedEvaluator(EXTRACT, {"Better.": 0.7, "Same.": 0.5})
    return ValidationGate(evaluator, [], current=0.5, rule=StrictImprovement(min_delta=min_delta),
                          budget=budget(limit, spent))


def test_a_gain_is_accepted_and_no_gain_rejected():
    program = Mem0Memory()
    val, decision = gate().check(program, Candidate.of(EXTRACT, "Better."))
    assert val.value == 0.7 and decision.status is Status.ACCEPTED and decision.why == "accepted: valset 0.700 > current 0.500"
    val, decision = gate().check(program, Candidate.of(EXTRACT, "Same."))
    assert decision.status is Status.REJECTED and "does not improve on the current 0.500" in decision.why


def test_the_margin_is_part_of_the_decision():
    _, decision = gate(min_delta=0.25).check(Mem0Memory(), Candidate.of(EXTRACT, "Better."))
    assert decision.status is Status.REJECTED and decision.why.endswith("+ 0.250")


def test_a_validation_the_calls_left_cannot_carry_does_not_start():
    assert gate(limit=10, spent=2).unaffordable(8) is None  # exactly enough
    short = gate(limit=10, spent=3).unaffordable(8)
    assert short is not None and short.status is Status.NOT_VALIDATED
    assert short.why == "not validated: 7 LM calls left, a validation takes at least 8"
    spent = gate(limit=10, spent=10).unaffordable(0)
    assert spent is not None and spent.why == "not validated: LM-call budget of 10 spent (10 calls)"
    assert gate().unaffordable(10_000) is None  # no budget
