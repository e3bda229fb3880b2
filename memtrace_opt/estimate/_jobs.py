"""A job's time estimate: the dry run's counts at this machine's rates, told at the start and kept in the manifest.

    rates, why = job_rates(models)                       # stored, known (fake), or measured now (embedded)
    estimate = run_estimate(work, conversations, judge=True, rates=rates)
    record = announce("run rag on sample: 1 conversation, 12 questions", estimate, why)   # -> manifest["estimate"]
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt import progress
from memtrace_opt.data import Conversation
from memtrace_opt.estimate._rates import Rates, RateStore, known_rates, measure_rates, model_key
from memtrace_opt.estimate._work import Cost, Work

__all__ = ["Estimate", "run_estimate", "job_rates", "announce", "plural", "NO_RATES"]

log = logging.getLogger(__name__)

NO_RATES = "no estimate: this machine's rates for {model} are not measured (run `memtrace doctor` once)"


@dataclass(frozen=True)
class Estimate:
    """How long a job should take: seconds in all and by part (in order), its LM calls and tokens, the rates
    it assumed."""

    seconds: float
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    rates: Rates
    parts: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, parts: Mapping[str, Cost], rates: Rates, seconds: float | None = None) -> Estimate:
        """The sum of `parts` (their seconds, or `seconds` when a budget caps the sum)."""
        total = sum(parts.values(), Cost())
        return cls(total.seconds if seconds is None else seconds, round(total.calls), round(total.prompt_tokens),
                   round(total.completion_tokens), rates, {name: cost.seconds for name, cost in parts.items()})

    def text(self) -> str:
        spelled = ", ".join(f"{name} {progress.clock_text(s)}" for name, s in self.parts.items() if s >= 0.5)
        source = {"doctor": "measured by `memtrace doctor`", "start": "measured just now",
                  "known": "the fake LM's set speed"}.get(self.rates.source, self.rates.source)
        return (f"estimate: about {progress.clock_text(self.seconds)}" + (f" ({spelled})" if spelled else "")
                + f"; {self.lm_calls} LM calls, {self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion "
                  f"tokens; the model {self.rates.describe()} ({source}, {self.rates.machine})")

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "lm_calls": self.lm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "parts": {name: round(s, 1) for name, s in self.parts.items()}, "rates": self.rates.to_dict()}


def plural(count: float, noun: str) -> str:
    """`plural(1, "round")` -> "1 round", `plural(3, "round")` -> "3 rounds"."""
    return f"{count:g} {noun}" if count == 1 else f"{count:g} {noun}s"


def run_estimate(work: Work, conversations: Sequence[Conversation], *, judge: bool, rates: Rates) -> Estimate:
    """`memtrace run` over `conversations`: every write path, every question, the judge where asked."""
    parts = {"memorize": Cost.of(work.write(c.sample_id for c in conversations), rates),
             "answer": Cost.of(work.read(conversations), rates)}
    if judge:
        parts["judge"] = Cost.of(work.judge(conversations), rates)
    return Estimate.of(parts, rates)


def job_rates(models: Any, *, store: RateStore | None = None, measure: bool = True) -> tuple[Rates | None, str]:
    """The task model's rates: a fake LM's known ones, else those stored for this machine, else (the embedded
    model, `measure`) measured now and stored; (None, why) when there are none."""
    lm = models.task
    known = known_rates(lm)
    if known is not None:
        return known, ""
    spec = models.roles.spec("task")
    key = model_key(spec)
    store = store or RateStore()
    stored = store.get(key)
    if stored is not None:
        return stored, ""
    if spec.kind != "embedded" or not measure:
        return None, NO_RATES.format(model=spec.model)
    try:
        with progress.phase("measuring the model's speed on this machine", counts=()):
            rates = measure_rates(_measuring_lm(spec), model=key, source="start")
        store.put(rates)
    except Exception as error:  # noqa: BLE001 - an estimate is a courtesy; the job goes on without one
        log.warning("could not measure %s's rates: %s", spec.model, error)
        return None, NO_RATES.format(model=spec.model)
    return rates, ""


def learn_replies(models: Any, *, store: RateStore | None = None) -> None:
    """Keeps how long the replies of `models`' live calls were since the last time, by role and call shape, into
    the stored rates of each role's model (`RateStore.learn`; the rates' module doc): later estimates price those
    calls at that length. Never raises: an estimate is a courtesy."""
    from memtrace_opt.lm.roles import ROLES

    store = store or RateStore()
    for role in ROLES:
        observed = models.usage.take_replies(role)
        if not observed:
            continue
        try:
            store.learn(model_key(models.roles.spec(role)), observed)
        except Exception as error:  # noqa: BLE001
            log.warning("reply lengths of the %s role not kept: %s", role, error)


def _measuring_lm(spec: Any) -> Any:
    """An LM for `spec` with its own usage tracker (the job's usage never counts it), uncached, the embedded
    engine's prefix cache off; an embedded model is the one the job loads."""
    from memtrace_opt.lm.roles import build_lm
    from memtrace_opt.lm.usage import UsageTracker

    plain = dataclasses.replace(spec, extra={**spec.extra, "cache": False, "prefix_cache_mb": 0})
    return build_lm(plain, "rates", usage=UsageTracker())


def announce(plan: str, estimate: Estimate | None, why: str = "") -> dict[str, Any]:
    """Tell the person watching what the job will do and how long it should take (the ETA measures against it);
    returns the manifest's `estimate`."""
    progress.note(plan)
    if estimate is None:
        progress.note(why or "no estimate")
        return {"seconds": None, "why": why}
    progress.note(estimate.text())
    progress.expect(progress.Expected(estimate.seconds, estimate.lm_calls))
    return estimate.to_dict()
