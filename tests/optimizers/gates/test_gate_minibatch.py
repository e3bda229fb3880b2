"""The minibatch gate: the candidate replayed on the minibatch, and the acceptance rule's decision on it."""

from __future__ import annotations

from parts import ScriptedEvaluator

from memtrace_opt.optimizers import Candidate, Status, StrictImprovement, instructions_of
from memtrace_opt.optimizers.gates.minibatch import MinibatchGate
from memtrace_opt.programs.mem0 import Mem0Memory

EXTRACT = "extract_facts.predict"


def test_the_candidate_is_scored_applied_to_a_copy():
    program = Mem0Memory()
    before = instructions_of(program)[EXTRACT]
    evaluator = ScriptedEvaluator(EXTRACT, {"Better.": 0.75})
    gate = MinibatchGate(evaluator, cases=[], current=0.5, rule=StrictImprovement())
    assert gate.score(program, Candidate.of(EXTRACT, "Better.")).value == 0.75
    assert instructions_of(evaluator.ran[0])[EXTRACT] == "Better." and instructions_of(program)[EXTRACT] == before


def test_it_passes_a_gain_and_rejects_a_tie():
    gate = MinibatchGate(ScriptedEvaluator(EXTRACT, {}), cases=[], current=0.5, rule=StrictImprovement())
    passed, tied = gate.decide(0.6), gate.decide(0.5)
    assert passed.status is Status.PASSED and passed.why == "minibatch 0.600 vs current 0.500: validated"
    assert tied.status is Status.REJECTED and tied.why == "rejected: minibatch 0.500 does not beat the current 0.500"
    ties = MinibatchGate(ScriptedEvaluator(EXTRACT, {}), [], 0.5, StrictImprovement(validate_ties=True))
    assert ties.decide(0.5).status is Status.PASSED
