"""A round the budget cut short: what it had learned by then, so that nothing it spent its calls on is lost.

A round records its plan in the study (`round:N`) only once its proposals are in (`rounds.py`). Until then each
step's result goes into the round's `RoundSoFar` as the step ends: the blame (with the failures no prompt can fix)
and the chosen predictor, the findings, the repairs' counts, the local set's summary, and the phase the round is
in. When the LM-call budget or the clock cuts the round, `InterruptedRound` is what it reached, the manifest's
`optimizer.interrupted`:

    {round, phase, why, lm_calls, seconds, chosen_predictor, candidates: [{instruction, minibatch_score[, demos]
     [, local][, why]}][, blame_counts, not_fixable][, findings][, repairs][, local_set]}

`phase` is where the cut came (`RoundPhase`); `lm_calls` and `seconds` are what this run spent on the round up to
it. Each part of the plan is written only once the round reached it, in the form a finished round's record gives
it (`RoundRecord`: `repairs` is `RepairCounts.to_dict()`, `local_set` is `LocalSet.summary()`); `chosen_predictor`
is null until a predictor is chosen. A record written before the phase was kept (no `phase`, `lm_calls` or
`seconds`) reads with those None and its `blame_counts` as written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from memtrace_opt.optimizers.loop.plan import RoundPlan

__all__ = ["RoundPhase", "RoundSoFar", "InterruptedRound"]


class RoundPhase(str, Enum):
    """The steps of a round, in order (`rounds.py`, `trials.py`)."""

    PLAN = "plan"  # tracing the minibatch, attributing its failures, choosing the predictor
    REPAIRS = "repairs"  # replaying the chosen predictor's blamed calls repaired
    LOCAL_SET = "local set"  # tracing the training questions for the predictor's local set
    PROPOSALS = "proposals"  # the candidate sources proposing
    CANDIDATES = "candidates"  # scoring the candidates (local objective, local check, minibatch)
    VALIDATION = "validation"  # validating the best of them on the valset


@dataclass
class RoundSoFar:
    """What round `round` has learned in this run so far, each part set as its step ends (None: not reached)."""

    round: int
    calls_before: int  # the optimization's metered LM calls when the round started
    started: float = field(default_factory=time.perf_counter)
    phase: RoundPhase = RoundPhase.PLAN
    blame_counts: dict[str, int] | None = None
    not_fixable: dict[str, int] | None = None
    chosen_predictor: str | None = None
    findings: list[dict[str, Any]] | None = None
    repairs: dict[str, int] | None = None
    local_set: dict[str, Any] | None = None

    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def planned(self, plan: RoundPlan, local_set: Mapping[str, Any] | None) -> None:
        """Every part of the recorded `plan` (this run's, or one an earlier run recorded), with its local set's
        `local_set` summary; the round goes on to its candidates."""
        self.blame_counts, self.not_fixable = dict(plan.blame_counts), dict(plan.not_fixable)
        self.chosen_predictor, self.findings = plan.chosen_predictor, plan.findings
        self.repairs = dict(plan.repair_counts) or None
        self.local_set = dict(local_set) if local_set else None
        self.phase = RoundPhase.CANDIDATES


@dataclass(frozen=True)
class InterruptedRound:
    """How far a round got before the budget cut it short (module doc)."""

    round: int
    why: str
    phase: RoundPhase | None = None  # None: a record written before the phase was kept
    lm_calls: int | None = None
    seconds: float | None = None
    chosen_predictor: str | None = None
    blame_counts: dict[str, int] | None = None
    not_fixable: dict[str, int] | None = None
    findings: list[dict[str, Any]] | None = None
    repairs: dict[str, int] | None = None
    local_set: dict[str, Any] | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, so_far: RoundSoFar, why: str, lm_calls: int, candidates: Sequence[Mapping[str, Any]] = ()) -> InterruptedRound:
        """The record of a round cut short with `so_far` reached, `lm_calls` spent on it, its plan's `candidates`."""
        return cls(so_far.round, why, so_far.phase, lm_calls, so_far.seconds(), so_far.chosen_predictor,
                   so_far.blame_counts, so_far.not_fixable, so_far.findings, so_far.repairs, so_far.local_set,
                   [dict(c) for c in candidates])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"round": self.round}
        if self.phase is not None:
            out["phase"] = self.phase.value
        out["why"] = self.why
        if self.lm_calls is not None:
            out["lm_calls"] = self.lm_calls
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 2)
        out["chosen_predictor"] = self.chosen_predictor
        parts = {"blame_counts": self.blame_counts, "not_fixable": self.not_fixable, "findings": self.findings,
                 "repairs": self.repairs, "local_set": self.local_set}
        for key, value in parts.items():
            if value is not None:
                out[key] = [dict(f) for f in value] if isinstance(value, list) else dict(value)
        out["candidates"] = [dict(c) for c in self.candidates]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InterruptedRound:
        def counts(key: str) -> dict[str, int] | None:
            value = data.get(key)
            return None if value is None else {str(k): int(v) for k, v in value.items()}

        return cls(
            round=int(data["round"]),
            why=str(data.get("why") or ""),
            phase=RoundPhase(data["phase"]) if data.get("phase") else None,
            lm_calls=int(data["lm_calls"]) if data.get("lm_calls") is not None else None,
            seconds=float(data["seconds"]) if data.get("seconds") is not None else None,
            chosen_predictor=data.get("chosen_predictor"),
            blame_counts=counts("blame_counts"),
            not_fixable=counts("not_fixable"),
            findings=[dict(f) for f in data["findings"]] if data.get("findings") is not None else None,
            repairs=counts("repairs"),
            local_set=dict(data["local_set"]) if data.get("local_set") is not None else None,
            candidates=[dict(c) for c in data.get("candidates") or []],
        )
