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
    `Blame.counts` gives upstream first). After `give_up_after` consecutive rejected rewrites of the same predictor, the next most blamed
    predictor is tried instead, if there is one."""

    give_up_after: int = 2

    def select(self, blame_counts: Mapping[str, int], history: Sequence[RoundOutcome]) -> str | None:
        ranked = [name for name, count in sorted(blame_counts.items(), key=lambda kv: -kv[1]) if count > 0]
        if not ranked:
            return None
        tired = _rejected_streak(history)
        if tired is not None and tired[1] >= self.give_up_after and len(ranked) > 1 and ranked[0] == tired[0]:
            return ranked[1]
        return ranked[0]


def _rejected_streak(history: Sequence[RoundOutcome]) -> tuple[str, int] | None:
    """(predictor, n) when the last n rounds all chose that predictor and rejected its rewrites."""
    streak = 0
    name: str | None = None
    for outcome in reversed(history):
        if outcome.accepted or outcome.predictor is None or (name is not None and outcome.predictor != name):
            break
        name = outcome.predictor
        streak += 1
    return (name, streak) if name is not None else None
