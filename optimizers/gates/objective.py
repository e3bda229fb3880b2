"""The `CandidateObjective` seam: what a candidate prompt is scored on, and the score every objective gives.

Contract of a `CandidateObjective`:
- `score(program, candidate)` scores `candidate` (a prompt for the round's chosen predictor) against `program`, the
  current program, which it never changes; the score's `value` is what ranks candidates on this objective (higher
  is better) and `to_dict()` what the study and the manifest record.
- It never raises for a bad LM reply: a call that fails or does not parse scores as the op's failure would (it
  carries nothing, the answer is wrong). A spent budget propagates (`BudgetExhausted`).

The round's objectives: the local objective (`local_objective.py`: the chosen predictor's local set re-run), the
local check (`local_check.py`: its blamed calls re-run), the minibatch and the validation (`minibatch.py`,
`validation.py`: the program answering questions, with cached replay). A gate is an objective with a decision
rule (`decide` / `check`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import dspy

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.evaluation.scoped import ReplayedOps

__all__ = ["CandidateObjective", "EvalScore", "NetGain", "Score"]


class Score(Protocol):
    @property
    def value(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


class CandidateObjective(Protocol):
    def score(self, program: dspy.Module, candidate: Candidate) -> Score: ...


class NetGain:
    """A score counted against the seed on the same targets: `fixed` the seed missed, `lost` the seed had."""

    fixed: int
    lost: int

    @property
    def gain(self) -> int:
        """Targets gained net of those lost: what ranks candidates."""
        return self.fixed - self.lost

    @property
    def value(self) -> float:
        return float(self.gain)


@dataclass(frozen=True)
class EvalScore:
    """A candidate's accuracy on a set of questions and which LM-backed calls the evaluation re-ran."""

    accuracy: float
    replayed: ReplayedOps

    @property
    def value(self) -> float:
        return self.accuracy

    def to_dict(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "replayed": self.replayed.to_dict()}
