"""Failure routing: which predictors a round's failures are shown to. The seam between the traced minibatch
and the selector; the default runs attribution.

Contract of a `FailureRouting`:
- `route(evaluation, failures, predictors)` returns a `Blame` over `failures` (cases of `evaluation`): verdicts
  grouped by the predictor each is shown to, and the failures no prompt can fix; `predictors` are the
  program's predictor names, upstream first.
- It never changes the program and never raises for one case (an unexplained failure is counted as such).

`Attributed` (in the round: `attribute_failures` with the loop's attribution method) blames each failure on
its root-cause op. `EveryPredictor` is MemTrace's no-attribution ablation: no attributor call, every failure
goes to every prompt, each as the predictor's latest call on the path to the failed answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memtrace_opt.attribution import Verdict, error_type_for_op
from memtrace_opt.optimizers.evaluation.blame import UNATTRIBUTED, Blame
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.evidence import GraphCache, op_event, predictor_calls

__all__ = ["EVERY_PREDICTOR", "EveryPredictor", "FailureRouting"]

EVERY_PREDICTOR = "every_predictor"  # the verdicts' method: no attribution


class FailureRouting(Protocol):
    def route(self, evaluation: EvalResult, failures: Sequence[CaseResult], predictors: Sequence[str]) -> Blame: ...


@dataclass(frozen=True)
class EveryPredictor:
    """Every failure shown to every predictor that served its answer (module docstring)."""

    def route(self, evaluation: EvalResult, failures: Sequence[CaseResult], predictors: Sequence[str]) -> Blame:
        graphs = GraphCache(evaluation)
        blame = Blame()
        unexplained = 0
        for case in failures:
            found = False
            for predictor in predictors:
                seq = next(iter(predictor_calls(graphs.get(case.conversation_key), case.case_id, predictor)), None)
                event = op_event(evaluation, case.conversation_key, seq) if seq is not None else None
                if event is None:
                    continue
                verdict = Verdict(case.case_id, EVERY_PREDICTOR, error_type_for_op(event.op, event.outputs, event.role),
                                  f"op:{seq}", event.op, predictor, "no attribution: every failure goes to every prompt",
                                  0.0)
                blame.verdicts.append(verdict)
                blame.by_predictor.setdefault(predictor, []).append(verdict)
                found = True
            unexplained += not found
        blame.not_fixable = {UNATTRIBUTED: unexplained} if unexplained else {}
        return blame
