"""The module selector: which predictor a round rewrites, given the blame counts.

Contract of a `ModuleSelector`:
- `select(blame_counts, history)` returns one predictor name from `blame_counts` (a name with at least one
  blamed failure) or None when no predictor is blamed; it never names a predictor that was not blamed.
- `history` is the list of earlier rounds' chosen predictors with whether their rewrite was accepted, oldest
  first; a selector may use it to move on from a predictor whose rewrites keep failing.
- It is deterministic: the same counts and history give the same choice (resumed runs depend on it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ModuleSelector", "MostBlamed", "RoundOutcome"]


@dataclass(frozen=True)
class RoundOutcome:
    predictor: str | None
    accepted: bool


class ModuleSelector(Protocol):
    def select(self, blame_counts: Mapping[str, int], history: Sequence[RoundOutcome]) -> str | None: ...


@dataclass(frozen=True)
class MostBlamed:
    """The predictor with the most blamed failures (ties: the one first in `blame_counts` order, which
    `Blame.counts` gives upstream first). A predictor whose rewrites were rejected in `give_up_after` rounds
    since its last accepted one is tired: every blamed predictor that is not comes first, so rounds are not
    spent again and again on a prompt the reflection model cannot fix. When every blamed predictor is tired,
    the least rejected one is chosen (then the most blamed)."""

    give_up_after: int = 2

    def select(self, blame_counts: Mapping[str, int], history: Sequence[RoundOutcome]) -> str | None:
        ranked = [name for name, count in sorted(blame_counts.items(), key=lambda kv: -kv[1]) if count > 0]
        if not ranked:
            return None
        rejected = rejections_since_accepted(history)
        fresh = [name for name in ranked if rejected.get(name, 0) < self.give_up_after]
        if fresh:
            return fresh[0]
        return min(ranked, key=lambda name: rejected.get(name, 0))  # stable: ties keep the blame order


def rejections_since_accepted(history: Sequence[RoundOutcome]) -> dict[str, int]:
    """predictor -> rounds that chose it and rejected its rewrite since its last accepted one."""
    counts: dict[str, int] = {}
    for outcome in history:
        if outcome.predictor is None:
            continue
        counts[outcome.predictor] = 0 if outcome.accepted else counts.get(outcome.predictor, 0) + 1
    return counts
