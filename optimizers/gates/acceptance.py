"""The acceptance rule: whether a candidate instruction replaces the current one.

Contract of an `AcceptanceRule`:
- `on_minibatch(current, candidate)` says whether a candidate's minibatch score earns it a validation run
  (validation is the expensive step); `on_valset(current, candidate)` decides acceptance.
- Both return a `Decision` with a one-line `why` that the manifest records verbatim.
- Acceptance is only ever decided on the valset, never on the minibatch the candidate was written for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Decision", "AcceptanceRule", "StrictImprovement"]


@dataclass(frozen=True)
class Decision:
    ok: bool
    why: str


class AcceptanceRule(Protocol):
    def on_minibatch(self, current: float, candidate: float) -> Decision: ...

    def on_valset(self, current: float, candidate: float) -> Decision: ...


@dataclass(frozen=True)
class StrictImprovement:
    """Validate a candidate only if it beats the current program on the minibatch (or ties, with
    `validate_ties`); accept only a valset score above the current one by more than `min_delta`."""

    min_delta: float = 0.0
    validate_ties: bool = False

    def on_minibatch(self, current: float, candidate: float) -> Decision:
        if candidate > current or (self.validate_ties and candidate == current):
            return Decision(True, f"minibatch {candidate:.3f} vs current {current:.3f}: validated")
        return Decision(False, f"rejected: minibatch {candidate:.3f} does not beat the current {current:.3f}")

    def on_valset(self, current: float, candidate: float) -> Decision:
        margin = f" + {self.min_delta:.3f}" if self.min_delta else ""
        if candidate - current > self.min_delta + (1e-9 if self.min_delta else 0.0):  # 6/20 - 5/20 is no more than 0.05
            return Decision(True, f"accepted: valset {candidate:.3f} > current {current:.3f}{margin}")
        return Decision(False, f"rejected: valset {candidate:.3f} does not improve on the current {current:.3f}{margin}")
