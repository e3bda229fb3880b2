"""The minibatch gate: a candidate replayed on the round's training minibatch (cached replay: only the ops
whose prompt changed reach the LM) earns a validation run when the acceptance rule says its score does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dspy

from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.decision import Decision
from memtrace_opt.optimizers.sources.base import Candidate

__all__ = ["MinibatchGate"]


@dataclass(frozen=True)
class MinibatchGate:
    """`cases` (the minibatch), on which the program scores `current`; `rule` decides."""

    evaluator: CachedEvaluator
    cases: Sequence[CaseRef]
    current: float
    rule: AcceptanceRule

    def score(self, program: dspy.Module, candidate: Candidate) -> float:
        return self.evaluator.evaluate(candidate.apply(program), self.cases).accuracy

    def decide(self, score: float) -> Decision:
        return self.rule.on_minibatch(self.current, score)
