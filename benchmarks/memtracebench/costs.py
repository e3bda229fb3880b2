"""What a method's verdicts cost per case, the attributor's questions apart from the task model's replays.

A method that replays (graphtrace's confirmation, counterfactual) runs the case's conversation again on the task
model; those calls are the verdict's `cost.replay_calls`, never among its `lm_calls` (`Cost`). The cost target
(at most 8 LM calls and 12k tokens per case, median) is on the attributor's questions; the replays are reported
beside it, with how the upstream verdicts stood after them: confirmed (a repair's replay saved the answer),
rejected (`confirmed` false) or untested (null: no replay decided it).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution import GOLD, RESPONSE, Verdict

__all__ = ["CaseCosts", "Confirmation", "upstream"]


def upstream(verdict: Verdict) -> bool:
    """Whether `verdict` names an op before the answer (an error type other than ResponseError, the answer op's,
    and GoldError, which names no op): the verdicts a replay can confirm."""
    return verdict.error is None and verdict.op_id is not None and verdict.error_type not in (RESPONSE, GOLD)


@dataclass(frozen=True)
class Confirmation:
    """The upstream verdicts by their `confirmed`: True, False, None."""

    confirmed: int = 0
    rejected: int = 0
    untested: int = 0

    @property
    def upstream(self) -> int:
        return self.confirmed + self.rejected + self.untested

    @property
    def share(self) -> float:
        """The share of upstream verdicts a replay confirmed."""
        return self.confirmed / self.upstream if self.upstream else 0.0

    @classmethod
    def of(cls, verdicts: Sequence[Verdict]) -> Confirmation:
        found = [v.confirmed for v in verdicts if upstream(v)]
        return cls(found.count(True), found.count(False), sum(1 for c in found if c is None))

    def to_dict(self) -> dict[str, Any]:
        return {"true": self.confirmed, "false": self.rejected, "none": self.untested, "upstream": self.upstream,
                "share": round(self.share, 4)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Confirmation:
        data = data or {}
        return cls(int(data.get("true", 0)), int(data.get("false", 0)), int(data.get("none", 0)))

    def cell(self) -> str:
        """`share (true / false / none)`, as the tables show it."""
        return f"{self.share:.0%} ({self.confirmed} / {self.rejected} / {self.untested})"


def _median(values: list[int]) -> float:
    return statistics.median(values) if values else 0


@dataclass(frozen=True)
class CaseCosts:
    """Per case, over the verdicts given: the attributor's LM calls and tokens (median, total), the task model's
    replayed calls and tokens (median, total), and the upstream verdicts' confirmation."""

    cases: int = 0
    median_lm_calls: float = 0
    median_tokens: float = 0
    total_lm_calls: int = 0
    total_tokens: int = 0
    median_replay_calls: float = 0
    total_replay_calls: int = 0
    median_replay_tokens: float = 0
    total_replay_tokens: int = 0
    confirmation: Confirmation = field(default_factory=Confirmation)

    @property
    def replayed(self) -> bool:
        """Whether any replay ran a task-model call or decided a verdict (else the replay columns read `-`)."""
        c = self.confirmation
        return bool(self.total_replay_calls or c.confirmed or c.rejected)

    @classmethod
    def of(cls, verdicts: Sequence[Verdict]) -> CaseCosts:
        costs = [v.cost for v in verdicts]
        calls, tokens = [c.lm_calls for c in costs], [c.tokens for c in costs]
        replay_calls, replay_tokens = [c.replay_calls for c in costs], [c.replay_tokens for c in costs]
        return cls(len(costs), _median(calls), _median(tokens), sum(calls), sum(tokens), _median(replay_calls),
                   sum(replay_calls), _median(replay_tokens), sum(replay_tokens), Confirmation.of(verdicts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "median_lm_calls": self.median_lm_calls,
            "median_tokens": self.median_tokens,
            "total_lm_calls": self.total_lm_calls,
            "total_tokens": self.total_tokens,
            "median_replay_calls": self.median_replay_calls,
            "total_replay_calls": self.total_replay_calls,
            "median_replay_tokens": self.median_replay_tokens,
            "total_replay_tokens": self.total_replay_tokens,
            "confirmed": self.confirmation.to_dict(),
        }
