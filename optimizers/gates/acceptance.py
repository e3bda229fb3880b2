"""The acceptance rule: whether a candidate's scores earn it a validation run, and its acceptance.

Contract of an `AcceptanceRule`:
- `on_minibatch(current, candidate)` says whether a candidate's minibatch score earns it a validation run
  (validation is the expensive step): `Status.PASSED` or `Status.REJECTED`; `on_valset(current, candidate)`
  decides acceptance: `Status.ACCEPTED` or `Status.REJECTED`.
- Both return a `Decision` whose reason, rendered, is one line the manifest records verbatim.
- Acceptance is only ever decided on the valset, never on the minibatch the candidate was written for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.core.knobs import knob

__all__ = ["AcceptanceRule", "AcceptanceSettings", "Decision", "StrictImprovement"]


@dataclass(frozen=True)
class AcceptanceSettings:
    """The acceptance knobs: `min_val_gain` is the valset gain (accuracy, 0-1) a candidate must exceed (0: any
    gain); `min_val_questions` the net number of validation questions it must gain (answered right that were
    wrong, less the reverse), 2 by default: in our runs six accepted steps that gained exactly one validation
    question came to -6 held-out questions together; `validate_ties` sends a candidate that ties the current
    minibatch score to the valset too (acceptance still needs a valset gain)."""

    validate_ties: bool = knob(False, "Validate a candidate that ties the current minibatch score (acceptance "
                                      "still needs a validation gain).", flag="--validate-ties/--no-validate-ties")
    min_val_gain: float = knob(0.0, "Accept a candidate only if it beats the current validation accuracy by more "
                                    "than this (0-1; default 0); the larger of this and --min-val-questions applies.")
    min_val_questions: int = knob(2, "Accept a candidate only if it answers at least N more validation questions "
                                     "right than the current program, net (default 2: one-question gains were "
                                     "noise in our runs).")

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_val_gain < 1.0:
            raise ConfigError(f"optimizer: min_val_gain is an accuracy gain in [0, 1), got {self.min_val_gain}")
        if self.min_val_questions < 1:
            raise ConfigError(f"optimizer: min_val_questions must be >= 1, got {self.min_val_questions}")

    def min_delta(self, val_size: int) -> float:
        """The valset accuracy gain a candidate must exceed on `val_size` questions: `min_val_gain`, or less
        than `min_val_questions` questions' worth, whichever is larger."""
        return max(self.min_val_gain, (self.min_val_questions - 1) / max(1, val_size))

    def rule(self, val_size: int) -> StrictImprovement:
        return StrictImprovement(min_delta=self.min_delta(val_size), validate_ties=self.validate_ties)


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
            return Decision.of(Status.PASSED, "minibatch {candidate:.3f} vs current {current:.3f}: validated",
                               candidate=candidate, current=current)
        return Decision.of(Status.REJECTED, "rejected: minibatch {candidate:.3f} does not beat the current "
                           "{current:.3f}", candidate=candidate, current=current)

    def on_valset(self, current: float, candidate: float) -> Decision:
        margin = f" + {self.min_delta:.3f}" if self.min_delta else ""
        facts = {"candidate": candidate, "current": current, "margin": margin}
        if candidate - current > self.min_delta + (1e-9 if self.min_delta else 0.0):  # 6/20 - 5/20 is no more than 0.05
            return Decision(Status.ACCEPTED, "accepted: valset {candidate:.3f} > current {current:.3f}{margin}", facts)
        return Decision(Status.REJECTED, "rejected: valset {candidate:.3f} does not improve on the current "
                        "{current:.3f}{margin}", facts)
