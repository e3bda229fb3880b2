"""The minibatch gate: a candidate replayed on the round's training minibatch (cached replay: only the ops
whose prompt changed reach the LM) earns a validation run when the acceptance rule says its score does. With
`reuse` (a scoped replay, `evaluation/scoped.py`) only the candidate's calls on the evidence paths re-run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.scoped import replayed_ops
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.objective import EvalScore

__all__ = ["MinibatchGate"]


@dataclass(frozen=True)
class MinibatchGate:
    """The minibatch objective: `cases` (the minibatch), on which the program scores `current`; `rule` decides."""

    evaluator: CachedEvaluator
    cases: Sequence[CaseRef]
    current: float
    rule: AcceptanceRule

    def score(self, program: dspy.Module, candidate: Candidate,
              reuse: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> EvalScore:
        """The candidate's minibatch accuracy and which calls the run re-ran (scoped with `reuse`)."""
        applied = candidate.apply(program)
        result = (self.evaluator.evaluate(applied, self.cases) if reuse is None
                  else self.evaluator.evaluate(applied, self.cases, reuse=reuse))
        return EvalScore(result.accuracy, replayed_ops(result, "evidence" if reuse else "full"))

    def decide(self, score: float) -> Decision:
        return self.rule.on_minibatch(self.current, score)

    def check(self, program: dspy.Module, candidate: Candidate) -> tuple[EvalScore, Decision]:
        """The candidate's score and the rule's decision on it."""
        score = self.score(program, candidate)
        return score, self.decide(score.value)
