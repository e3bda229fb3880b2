"""`Decision`: what a gate (or the round's choice among candidates) decided about one candidate.

A decision is a `Status` and a reason: a template and the facts it names. Code asks the status; the reason is
rendered (`why`) only where a person reads it: the manifest, the report, the log. No code parses a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Decision", "Status"]


class Status(str, Enum):
    """Where a candidate stands after a gate, or after the round's choice."""

    PASSED = "passed"  # through this gate, on to the next
    REJECTED = "rejected"  # turned down by this gate
    ACCEPTED = "accepted"  # accepted on the valset: the program takes it
    NOT_VALIDATED = "not_validated"  # passed so far, but the LM calls left cannot take it to the valset
    OUTRANKED = "outranked"  # passed, but another candidate of the round goes first or is taken
    DEFERRED = "deferred"  # not validated alone: validated joined with another candidate


@dataclass(frozen=True)
class Decision:
    """`status` with the reason `reason.format(**facts)`; `ok` when the candidate goes on (or is taken)."""

    status: Status
    reason: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, status: Status, reason: str, **facts: Any) -> Decision:
        return cls(status, reason, facts)

    @classmethod
    def recorded(cls, status: Status, why: str) -> Decision:
        """A decision read back from the study, where its reason was stored rendered."""
        return cls(status, "{why}", {"why": why})

    @property
    def ok(self) -> bool:
        return self.status in (Status.PASSED, Status.ACCEPTED)

    @property
    def why(self) -> str:
        """The reason as a person reads it (the manifest records it verbatim)."""
        return self.reason.format(**self.facts)

    def also(self, reason: str, **facts: Any) -> Decision:
        """This decision with `reason` (its facts named apart from this one's) said after it."""
        return Decision(self.status, "{head}" + reason, {"head": self.why, **facts})

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "why": self.why}
