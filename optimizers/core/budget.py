"""The LM-call budget every optimizer runs under, so comparisons are at equal cost.

A budget counts the calls the shared `UsageTracker` records for the metered roles (task and reflection by
default; our optimizer also meters its attributor) since the budget was created that reached the model. Judge
calls are the metric's cost, the same for every optimizer, and are reported but not metered. A reply a cache
served (the reply cache, `memtrace_opt.lm.reply_cache`: a request sent before, by this run or by the warm-up a
comparison's rows share) reached no model and costs nothing; `cached()` counts them apart.

`BudgetExhausted` derives from BaseException on purpose: DSPy's evaluators catch `Exception` per example and
would score a spent budget as a wrong answer and go on; a BaseException stops the optimizer where it stands,
and the baseline adapter returns the best program it had evaluated (see `baselines.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memtrace_opt.lm.usage import RoleUsage, UsageTracker

__all__ = ["BudgetExhausted", "LMBudget", "DEFAULT_ROLES", "guard_lm"]

DEFAULT_ROLES = ("task", "reflection")


class BudgetExhausted(BaseException):  # noqa: N818 - a control signal, like KeyboardInterrupt
    """The LM-call budget is spent; raised before a call that would exceed it."""


@dataclass
class LMBudget:
    """`limit` LM calls (None: unlimited) of `roles`, counted on `usage` from the moment of creation, and
    optionally a `deadline` on the run's clock (`now`, `run_for`) after which no call is left either.
    `others` (workers sharing one optimization, `crew.py`): the calls the other workers made meanwhile."""

    usage: UsageTracker
    limit: int | None = None
    roles: tuple[str, ...] = DEFAULT_ROLES
    deadline: float | None = None
    others: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        self._start = self.usage.snapshot()

    def _delta(self, roles: Iterable[str]) -> RoleUsage:
        now = self.usage.snapshot()
        calls = prompt = completion = hits = 0
        seconds = 0.0
        for role in roles:
            after, before = now.get(role, RoleUsage()), self._start.get(role, RoleUsage())
            calls += after.calls - before.calls
            hits += after.cache_hits - before.cache_hits
            prompt += after.prompt_tokens - before.prompt_tokens
            completion += after.completion_tokens - before.completion_tokens
            seconds += after.seconds - before.seconds
        return RoleUsage(calls=calls, prompt_tokens=prompt, completion_tokens=completion, seconds=seconds,
                         cache_hits=hits)

    def now(self) -> float:
        """The run's clock, on `time.monotonic`'s scale: the wall clock plus the model time the replies charged
        again took when an earlier sitting paid for them (`UsageTracker.replayed_seconds`), so a run resumed
        across sittings spends its seconds, as its calls, as it would have in one. `deadline` is on it."""
        return time.monotonic() + self.usage.replayed_seconds()

    def run_for(self, seconds: float | None) -> LMBudget:
        """This budget, with its deadline `seconds` from now on its clock (None: no deadline)."""
        self.deadline = None if seconds is None else self.now() + seconds
        return self

    def spent(self) -> int:
        """Metered LM calls that reached the model since the budget was created (by every worker sharing it)."""
        return self.own() + (self.others() if self.others is not None else 0)

    def own(self) -> int:
        """Metered LM calls this process sent to the model since the budget was created."""
        return self._delta(self.roles).live_calls

    def cached(self) -> int:
        """Metered LM calls a cache served since the budget was created (this process): no model was reached."""
        return self._delta(self.roles).cache_hits

    def tokens(self) -> int:
        """Prompt + completion tokens of the metered calls."""
        used = self._delta(self.roles)
        return used.prompt_tokens + used.completion_tokens

    def by_role(self) -> dict[str, int]:
        """LM calls per role since creation (every role, metered or not)."""
        now, start = self.usage.snapshot(), self._start
        return {role: u.calls - start.get(role, RoleUsage()).calls for role, u in sorted(now.items())}

    def left(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.spent())

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.now() >= self.deadline

    def exhausted(self) -> bool:
        return (self.limit is not None and self.spent() >= self.limit) or self.out_of_time()

    @property
    def bounded(self) -> bool:
        return self.limit is not None or self.deadline is not None

    def why_spent(self) -> str:
        """Why no call is left, "" while some are."""
        if self.out_of_time():
            return "the time budget is spent"
        if self.exhausted():
            return f"LM-call budget of {self.limit} spent ({self.spent()} calls)"
        return ""

    def can_afford(self, calls: int) -> bool:
        """False when no call is left, or fewer than `calls` (0: not known, never too few): work that needs
        `calls` LM calls does not start, and the calls go to what can finish."""
        if self.exhausted():
            return False
        left = self.left()
        return left is None or calls <= 0 or left >= calls

    def shortfall(self, calls: int) -> str:
        """Why work needing `calls` LM calls cannot start ("" when it can)."""
        if self.can_afford(calls):
            return ""
        return self.why_spent() or f"{self.left()} LM calls left, a validation takes at least {calls}"

    def stop_reason(self) -> str:
        """What stopped a run this budget cut: "time" past the deadline, else "budget"."""
        return "time" if self.out_of_time() else "budget"

    def check(self) -> None:
        """Raises BudgetExhausted when no call is left."""
        if why := self.why_spent():
            raise BudgetExhausted(why)


def _guarded_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    self._memtrace_budget.check()
    return super(type(self), self).__call__(*args, **kwargs)


async def _guarded_acall(self: Any, *args: Any, **kwargs: Any) -> Any:
    self._memtrace_budget.check()
    return await super(type(self), self).acall(*args, **kwargs)


def guard_lm(lm: Any, budget: LMBudget) -> Any:
    """A copy of `lm` (a dspy.LM) that raises BudgetExhausted instead of calling once `budget` is spent.

    The copy is of a subclass made for the purpose, so copies DSPy makes of it (`lm.copy(...)`) stay
    guarded; usage is still recorded where `lm` records it."""
    guarded_cls = type(f"Budgeted{type(lm).__name__}", (type(lm),), {"__call__": _guarded_call, "acall": _guarded_acall})
    guarded = lm.copy()
    guarded.__class__ = guarded_cls
    guarded._memtrace_budget = budget
    return guarded
