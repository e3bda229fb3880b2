"""Small stand-ins for the unit tests of the round's parts (gates, sources, stop policy): no LM is called."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.optimizers import LMBudget


@dataclass
class ScriptedEvaluator:
    """An evaluator whose accuracy is scripted per instruction of `predictor`; records the programs it ran."""

    predictor: str
    accuracy: dict[str, float]
    ran: list[Any] = field(default_factory=list)

    def evaluate(self, program: Any, cases: Any) -> Any:
        self.ran.append(program)
        instruction = dict(program.named_predictors())[self.predictor].signature.instructions
        return SimpleNamespace(accuracy=self.accuracy.get(instruction, 0.0))


def spend(usage: UsageTracker, calls: int, role: str = "task") -> None:
    for _ in range(calls):
        usage.record(role)


def budget(limit: int | None, spent: int = 0, deadline: float | None = None) -> LMBudget:
    """A budget of `limit` task calls with `spent` of them made."""
    usage = UsageTracker()
    out = LMBudget(usage, limit, ("task",), deadline)
    spend(usage, spent)
    return out
