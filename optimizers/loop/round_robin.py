"""`RoundRobin`: the predictors in a fixed order, one a round, whatever the blame: GEPA's default component
order, the ablation that keeps every other part of our loop and drops the choice attribution makes.

    RoundRobin(order=("extract_facts.predict", "update_decision.predict", "answer.predict"))

Contract (an order-driven `ModuleSelector`): with an `order`, round after round it names the predictor after
the one the last round chose (the first when no round has run), blamed or not; the round then shows the
reflection LM that predictor's blamed calls, if any. Without an `order`, it cycles the blamed predictors in
their blame order instead. Deterministic: the same history gives the same choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memtrace_opt.optimizers.loop.selection import RoundOutcome

__all__ = ["RoundRobin"]


@dataclass(frozen=True)
class RoundRobin:
    order: tuple[str, ...] = ()

    def select(self, blame_counts: Mapping[str, int], history: Sequence[RoundOutcome]) -> str | None:
        names = list(self.order) or [name for name, count in blame_counts.items() if count > 0]
        if not names:
            return None
        last = next((outcome.predictor for outcome in reversed(history) if outcome.predictor), None)
        if last not in names:
            return names[0]
        return names[(names.index(last) + 1) % len(names)]
