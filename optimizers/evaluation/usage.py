"""Where an optimizer's LM calls are counted.

LMs built by `memtrace_opt.lm.Models` are `RoleLM`s: each call is recorded in their shared `UsageTracker`
under the role. A plain `dspy.LM` records nothing, so for those a DSPy callback counts calls by LM object
(role by identity; unknown LM objects, e.g. copies an optimizer made of the task LM, count as "task").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from memtrace_opt.lm.usage import UsageTracker

__all__ = ["CallCounter", "usage_of", "counting"]


class CallCounter(BaseCallback):
    """Records one call per LM start in `usage`, under the role of the LM object (default "task")."""

    def __init__(self, usage: UsageTracker, roles: Mapping[int, str]) -> None:
        self.usage = usage
        self.roles = dict(roles)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.usage.record(self.roles.get(id(instance), "task"))


def usage_of(lms: Mapping[str, Any]) -> UsageTracker | None:
    """The tracker all the given LMs (role -> LM) report to, or None if any of them reports nowhere."""
    trackers = {id(getattr(lm, "usage", None)): getattr(lm, "usage", None) for lm in lms.values() if lm is not None}
    if len(trackers) == 1:
        tracker = next(iter(trackers.values()))
        return tracker if isinstance(tracker, UsageTracker) else None
    return None


@contextlib.contextmanager
def counting(lms: Mapping[str, Any], usage: UsageTracker | None = None) -> Iterator[UsageTracker]:
    """Yields the tracker that sees the LMs' calls: their own, or a fresh one fed by a `CallCounter`
    attached for the duration of the block."""
    own = usage if usage is not None else usage_of(lms)
    if own is not None:
        yield own
        return
    tracker = UsageTracker()
    counter = CallCounter(tracker, {id(lm): role for role, lm in lms.items() if lm is not None})
    existing = list(dspy.settings.get("callbacks") or [])
    with dspy.context(callbacks=[*existing, counter]):
        yield tracker
