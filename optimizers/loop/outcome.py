"""`TrialOutcome`: what one job of a round found for a candidate, in one typed form, whichever worker ran it.

A job is a candidate's local scoring, its local check and minibatch, or (a share of) its validation. A worker
that runs a job for another (`crew.py`) sends `to_dict()`; the round reads every result back with `from_dict`, so
no code reads a result's keys by name. A job the LM-call budget stopped has `cut` (why), and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.optimizers.core.decision import Decision, Status

__all__ = ["Share", "TrialOutcome"]


@dataclass(frozen=True)
class Share:
    """One conversation's part of a validation: its correct answers among its cases."""

    correct: int
    cases: int


@dataclass(frozen=True)
class TrialOutcome:
    """A job's result (module doc). `local` holds the local check's or the local objective's counts; `rejected` the
    decision of a gate that turned the candidate down (it stands); `replayed` which calls its evaluations re-ran
    (`scoped.py`)."""

    worker: str = ""
    local: Mapping[str, Any] | None = None
    local_why: str = ""
    local_calls: int = 0
    rejected: Decision | None = None
    minibatch: float | None = None
    val: float | None = None
    replayed: Mapping[str, Any] = field(default_factory=dict)
    share: Share | None = None
    cut: str = ""

    @classmethod
    def stopped(cls, why: str) -> TrialOutcome:
        """A job the budget stopped."""
        return cls(cut=why or "the LM-call budget is spent")

    @property
    def score(self) -> float:
        """The number a shared job's trial is told (its validation, else its minibatch, else 0)."""
        return float(self.val if self.val is not None else self.minibatch if self.minibatch is not None else 0.0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"worker": self.worker, "score": self.score}
        if self.cut:
            return {**out, "budget": self.cut}
        if self.local is not None:
            out.update(local=dict(self.local), local_why=self.local_why, local_calls=self.local_calls)
        if self.rejected is not None:
            out.update(local_rejected=True, why=self.rejected.why, status=self.rejected.status.value)
        if self.minibatch is not None:
            out["minibatch_score"] = self.minibatch
        if self.val is not None:
            out["val_score"] = self.val
        if self.replayed:
            out["replayed"] = dict(self.replayed)
        if self.share is not None:
            out.update(correct=self.share.correct, cases=self.share.cases)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialOutcome:
        if data.get("budget"):
            return cls(worker=str(data.get("worker") or ""), cut=str(data["budget"]))
        rejected = (Decision.recorded(Status(data["status"]), str(data.get("why", "")))
                    if data.get("local_rejected") else None)
        share = Share(int(data["correct"]), int(data["cases"])) if "cases" in data else None
        minibatch, val = data.get("minibatch_score"), data.get("val_score")
        return cls(worker=str(data.get("worker") or ""),
                   local=dict(data["local"]) if data.get("local") is not None else None,
                   local_why=str(data.get("local_why") or ""), local_calls=int(data.get("local_calls") or 0),
                   rejected=rejected, minibatch=None if minibatch is None else float(minibatch),
                   val=None if val is None else float(val), replayed=dict(data.get("replayed") or {}), share=share)
