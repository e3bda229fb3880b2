"""The validation gate: a candidate on the valset, accepted when the acceptance rule says its score improves
on the current program's; it does not start when the LM calls left cannot carry it there
(`Status.NOT_VALIDATED`: a resumed run with a larger budget validates it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dspy

from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.scoped import replayed_ops
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.objective import EvalScore

__all__ = ["ValidationGate"]


@dataclass(frozen=True)
class ValidationGate:
    """The validation objective: `cases` (the valset), on which the program scores `current`; `rule` decides,
    `budget` says whether a validation of at least the given LM calls can start."""

    evaluator: CachedEvaluator
    cases: Sequence[CaseRef]
    current: float
    rule: AcceptanceRule
    budget: LMBudget

    def unaffordable(self, calls: int) -> Decision | None:
        """The decision not to validate, when fewer than `calls` LM calls are left; None when it can start."""
        if why := self.budget.shortfall(calls):
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=why)
        return None

    def score(self, program: dspy.Module, candidate: Candidate) -> EvalScore:
        """The candidate's valset accuracy and which calls the validation (a full replay) re-ran."""
        result = self.evaluator.evaluate(candidate.apply(program), self.cases)
        return EvalScore(result.accuracy, replayed_ops(result, "full"))

    def decide(self, score: float) -> Decision:
        """The rule's decision on a valset accuracy of `score`."""
        return self.rule.on_valset(self.current, score)

    def check(self, program: dspy.Module, candidate: Candidate) -> tuple[EvalScore, Decision]:
        """The candidate's score and the rule's decision on it."""
        score = self.score(program, candidate)
        return score, self.decide(score.value)
