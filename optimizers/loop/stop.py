"""The stop policy the loop asks before and after each round: the rounds, the plateau, the LM calls, the clock.

Contract: `before(number, budget)` and `after(record, budget, cut)` return the `StopReason` that ends the run
(None: go on); they only read their inputs and count the plateau. The baseline always completes; the budget's
own feasibility test is `LMBudget.can_afford`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.loop.records import RoundRecord

__all__ = ["StopPolicy", "StopReason"]

log = logging.getLogger(__name__)


class StopReason(str, Enum):
    """Why the loop stopped (the manifest's `optimizer.stop_reason`)."""

    MAX_ROUNDS = "max_rounds"
    PLATEAU = "plateau"
    BUDGET = "budget"
    TIME = "time"

    @classmethod
    def spent(cls, budget: LMBudget) -> StopReason:
        return cls(budget.stop_reason())


@dataclass
class StopPolicy:
    """Stop after `patience` rounds in a row without an accepted change, when no call (or too few for the
    cheapest validation, `least_validation` calls) is left, or past the deadline; `MAX_ROUNDS` is the reason when
    the loop runs out of rounds. A round whose share of the budget scored none of its candidates, or paid for none
    (`RoundRecord.untested`), is no round of a plateau: the rounds after it get a larger share."""

    patience: int
    least_validation: int = 0
    plateau: int = 0

    def before(self, number: int, budget: LMBudget) -> StopReason | None:
        """Whether round `number` may start: not when no candidate of it could be validated (the calls are kept)."""
        if budget.exhausted():
            return StopReason.spent(budget)
        if not budget.can_afford(self.least_validation):
            log.info("round %d not started: %d LM calls left, a validation takes at least %d", number, budget.left(),
                     self.least_validation)
            return StopReason.BUDGET
        return None

    def rounds_before_plateau(self) -> int:
        """The rounds that may still run before the plateau stops the loop, the next one included, if none of them
        is accepted (an accepted change resets the count)."""
        return max(1, self.patience - self.plateau)

    def after(self, record: RoundRecord, budget: LMBudget, cut: bool = False) -> StopReason | None:
        """Whether the loop goes on after `record` (`cut`: the budget ran out among its candidates)."""
        if not record.untested:
            self.plateau = 0 if record.accepted else self.plateau + 1
        if cut or budget.exhausted():
            return StopReason.spent(budget)
        if self.plateau >= self.patience:
            return StopReason.PLATEAU
        return None
