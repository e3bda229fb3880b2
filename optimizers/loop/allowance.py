"""What a round may spend and what it spent: its `Allowance` (its share of the calls and seconds left, its
validation's reserve), the `Meter` of the metered roles over a span, and its `Phases` as they run (each priced and
measured: the manifest's `phases`). The engine's bookkeeping; no round step sees it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from memtrace_opt import progress
from memtrace_opt.lm.usage import RoleUsage
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.loop.pricing import Price
from memtrace_opt.optimizers.loop.records import PhaseCost, RoundPhase

__all__ = ["Allowance", "Meter", "Phases"]

log = logging.getLogger(__name__)


@dataclass
class Allowance:
    """What a round may spend: its share of the calls and seconds left (None: no limit), with `reserve` held back
    for its validation. `shortfall` says why a price does not fit ("" when it does)."""

    budget: LMBudget
    calls: int | None
    seconds: float | None
    start_calls: int
    reserve: Price = field(default_factory=Price)
    started: float = field(init=False)  # when made, on the budget's clock (`LMBudget.now`)

    def __post_init__(self) -> None:
        self.started = self.budget.now()

    def shortfall(self, price: Price, *, reserved: bool = True, share: bool = True) -> str:
        """Why work priced `price` cannot start: past the budget or the clock, or (with `share`) past the round's
        share, with (with `reserved`) the validation's reserve held back."""
        if why := self.budget.why_spent():
            return why
        need = price + self.reserve if reserved else price
        whose = " to the round" if share else ""
        calls = self._calls_left(share)
        if calls is not None and need.calls > calls:
            return f"{calls} LM calls left{whose}, it needs {need.calls}"
        seconds = self._seconds_left(share)
        if seconds is not None and need.seconds is not None and need.seconds > seconds:
            return f"{seconds:.0f} s left{whose}, it needs about {need.seconds:.0f} s"
        return ""

    def widen(self, least: Price) -> None:
        """A share of at least `least` (calls and seconds: what one round that can tell anything needs)."""
        if self.calls is not None:
            self.calls = max(self.calls, least.calls)
        if self.seconds is not None and least.seconds is not None:
            self.seconds = max(self.seconds, least.seconds)

    def reach(self, price: Price) -> None:
        """A share wide enough that work priced `price`, with the reserve held back, fits after what the round has
        spent so far (what it needs to tell anything, where the round's earlier phases spent the share it was
        widened to for it); the budget and the clock still bound it."""
        spent = Price(self.budget.spent() - self.start_calls, self.budget.now() - self.started)
        self.widen(spent + price + self.reserve)

    def left(self) -> Price:
        """The round's share left, less the reserve (0 for a dimension with no limit's share: None calls)."""
        calls, seconds = self._calls_left(True), self._seconds_left(True)
        return Price(max(0, (calls if calls is not None else 10**9) - self.reserve.calls),
                     None if seconds is None else max(0.0, seconds - (self.reserve.seconds or 0.0)))

    def _calls_left(self, share: bool) -> int | None:
        hard = self.budget.left()
        if not share or self.calls is None:
            return hard
        mine = self.calls - (self.budget.spent() - self.start_calls)
        return mine if hard is None else min(hard, mine)

    def _seconds_left(self, share: bool) -> float | None:
        hard = None if self.budget.deadline is None else self.budget.deadline - self.budget.now()
        if not share or self.seconds is None:
            return hard
        mine = self.seconds - (self.budget.now() - self.started)
        return mine if hard is None else min(hard, mine)


class Meter:
    """The metered roles' usage over a span: LM calls that reached the model, calls a cache served, tokens, and
    seconds on the budget's clock."""

    def __init__(self, budget: LMBudget) -> None:
        self.budget = budget
        self.start = budget.usage.snapshot()
        self.started = budget.now()

    def cost(self, phase: RoundPhase, estimate: Price | None) -> PhaseCost:
        now = self.budget.usage.snapshot()
        total = RoleUsage()
        for role in self.budget.roles:
            after, before = now.get(role, RoleUsage()), self.start.get(role, RoleUsage())
            total = RoleUsage(total.calls + after.calls - before.calls,
                              total.prompt_tokens + after.prompt_tokens - before.prompt_tokens,
                              total.completion_tokens + after.completion_tokens - before.completion_tokens,
                              0.0, total.cache_hits + after.cache_hits - before.cache_hits)
        return PhaseCost(phase, None if estimate is None else estimate.seconds,
                         None if estimate is None else estimate.calls, self.budget.now() - self.started,
                         total.live_calls, total.cache_hits, total.prompt_tokens, total.completion_tokens)


@dataclass
class Phases:
    """The phases of one round as they run: each priced and measured (`PhaseCost`), a phase run twice (two
    validations) added up."""

    budget: LMBudget
    number: int = 0
    costs: dict[RoundPhase, PhaseCost] = field(default_factory=dict)
    current: RoundPhase = RoundPhase.PLAN

    @contextlib.contextmanager
    def run(self, phase: RoundPhase, estimate: Price | None = None) -> Iterator[None]:
        outer, self.current = self.current, phase
        if phase is not RoundPhase.VALIDATION:  # the validation says so itself, with its steps
            progress.stage(f"round {self.number}: {phase.value}")
        meter = Meter(self.budget)
        failed = True
        try:
            yield
            failed = False
        finally:
            self.add(meter.cost(phase, estimate))
            if not failed:  # a cut keeps the phase it came in
                self.current = outer

    def skip(self, phase: RoundPhase, why: str, estimate: Price | None = None) -> None:
        """`phase` (or a part of it) not run, and why; its estimate is what it would have cost."""
        log.info("round %d: %s skipped: %s", self.number, phase.value, why)
        self.add(PhaseCost(phase, None if estimate is None else estimate.seconds,
                           None if estimate is None else estimate.calls, skipped=why), ran=False)

    def add(self, cost: PhaseCost, *, ran: bool = True) -> None:
        held = self.costs.get(cost.phase)
        if held is None:
            self.costs[cost.phase] = cost
            return
        if not ran:  # a part skipped: its reason said, its price not counted in what the phase was priced at
            why = "; ".join(w for w in (held.skipped, cost.skipped) if w)
            self.costs[cost.phase] = replace(held, skipped=why)
            return

        def plus(a: float | int | None, b: float | int | None) -> Any:
            return None if a is None and b is None else (a or 0) + (b or 0)

        self.costs[cost.phase] = PhaseCost(
            cost.phase, plus(held.estimated_seconds, cost.estimated_seconds), plus(held.estimated_calls, cost.estimated_calls),
            held.seconds + cost.seconds, held.calls + cost.calls, held.cached + cost.cached,
            held.prompt_tokens + cost.prompt_tokens, held.completion_tokens + cost.completion_tokens,
            "; ".join(w for w in (held.skipped, cost.skipped) if w))

    def ordered(self) -> list[PhaseCost]:
        return [self.costs[p] for p in RoundPhase if p in self.costs]
