"""LM usage by model role: calls, tokens, seconds, cache hits and failures.

`RoleLM` is a `dspy.LM` that knows its role and reports every call to a shared `UsageTracker`.
Tokens come from DSPy's own usage hook: for the duration of one call the LM installs a per-call
`dspy.settings.usage_tracker` (thread- and task-local, so concurrent calls never mix), which DSPy
fills for real calls and skips for cache hits; whatever it records is passed on to any tracker
that was active before (e.g. a user's `dspy.track_usage()`). This works the same for LiteLLM
models, the embedded engine and the fake engine.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import dspy
from dspy.utils.usage_tracker import UsageTracker as DspyUsageTracker
from rich.table import Table


@dataclass(frozen=True)
class RoleUsage:
    """What one role's LM did. `calls` counts every call, cached or failed."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoleUsage:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class UsageTracker:
    """Thread-safe usage totals by role. Copies of an LM share it (deepcopy returns the same tracker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_role: dict[str, RoleUsage] = {}
        self.failure_streak = 0  # calls failed in a row, any role (a success or a cache hit resets it)

    def record(
        self,
        role: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        seconds: float = 0.0,
        cached: bool = False,
        failed: bool = False,
    ) -> None:
        with self._lock:
            old = self._by_role.get(role, RoleUsage())
            self._by_role[role] = replace(
                old,
                calls=old.calls + 1,
                prompt_tokens=old.prompt_tokens + prompt_tokens,
                completion_tokens=old.completion_tokens + completion_tokens,
                seconds=old.seconds + seconds,
                cache_hits=old.cache_hits + int(cached),
                failures=old.failures + int(failed),
            )
            self.failure_streak = self.failure_streak + 1 if failed else 0

    def snapshot(self) -> dict[str, RoleUsage]:
        with self._lock:
            return dict(self._by_role)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {role: usage.to_dict() for role, usage in sorted(self.snapshot().items())}

    def reset(self) -> None:
        with self._lock:
            self._by_role.clear()
            self.failure_streak = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> UsageTracker:
        return self


class _CallCapture(DspyUsageTracker):
    """DSPy's usage tracker for one LM call: notes whether DSPy reported usage, and passes it on."""

    def __init__(self, parent: Any) -> None:
        super().__init__()
        self.parent = parent
        self.reported = False
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        self.reported = True
        self.prompt_tokens += int(usage_entry.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage_entry.get("completion_tokens") or 0)
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)


class RoleLM(dspy.LM):
    """A `dspy.LM` for one model role; every call is recorded in `usage` under `role`.

    A call DSPy answered from its cache reports no usage and counts as a cache hit.
    """

    def __init__(self, model: str, *, role: str, usage: UsageTracker | None = None, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.role = role
        self.usage = usage if usage is not None else UsageTracker()

    def _finish(self, capture: _CallCapture, started: float, failed: bool) -> None:
        self.usage.record(
            self.role,
            prompt_tokens=capture.prompt_tokens,
            completion_tokens=capture.completion_tokens,
            seconds=time.perf_counter() - started,
            cached=not capture.reported and not failed,
            failed=failed,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        capture = _CallCapture(dspy.settings.usage_tracker)
        started, failed = time.perf_counter(), True
        try:
            with dspy.settings.context(usage_tracker=capture):
                result = super().__call__(*args, **kwargs)
            failed = False
            return result
        finally:
            self._finish(capture, started, failed)

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        capture = _CallCapture(dspy.settings.usage_tracker)
        started, failed = time.perf_counter(), True
        try:
            with dspy.settings.context(usage_tracker=capture):
                result = await super().acall(*args, **kwargs)
            failed = False
            return result
        finally:
            self._finish(capture, started, failed)


def usage_table(snapshot: dict[str, RoleUsage], title: str = "LM usage by role") -> Table:
    """A rich table of a tracker snapshot, one row per role plus a total."""
    table = Table(title=title)
    for column in ("role", "calls", "prompt tok", "completion tok", "seconds", "cache hits", "failures"):
        table.add_column(column, justify="left" if column == "role" else "right")
    total = RoleUsage()
    for role, u in snapshot.items():
        table.add_row(role, str(u.calls), str(u.prompt_tokens), str(u.completion_tokens),
                      f"{u.seconds:.1f}", str(u.cache_hits), str(u.failures))
        total = RoleUsage(*(a + b for a, b in zip(asdict(total).values(), asdict(u).values(), strict=True)))
    if len(snapshot) > 1:
        table.add_row("total", str(total.calls), str(total.prompt_tokens), str(total.completion_tokens),
                      f"{total.seconds:.1f}", str(total.cache_hits), str(total.failures), style="bold")
    return table
