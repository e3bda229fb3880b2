"""Metering the LM use of a block of code: every call (cache hits included, counted by a DSPy callback) and the
tokens of uncached calls (a DSPy usage tracker of its own, which rolls its entries up into the tracker outside on
exit, so metering a block hides nothing from an outer meter).

`attribute_case` meters a whole case; `CaseReplayer` meters each replay, so a case's cost can tell the attributor's
questions from the task model's replayed calls (`Cost`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

__all__ = ["Meter", "metering"]


@dataclass
class Meter:
    """LM use counted so far; `metering(meter)` adds each metered block's use to it as the block ends."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _CallCounter(BaseCallback):
    """Counts LM calls (cache hits included) made while it is among the active callbacks."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self.calls += 1


@contextlib.contextmanager
def metering(meter: Meter | None = None) -> Iterator[Meter]:
    """Meter the LM calls made inside the block into `meter` (a new one when None), also when the block raises.
    A call's count is the larger of the calls seen and the usage entries recorded (an LM that reports usage but
    skips callbacks still counts)."""
    meter = meter if meter is not None else Meter()
    counter = _CallCounter()
    callbacks = [*(dspy.settings.get("callbacks") or []), counter]
    with dspy.context(callbacks=callbacks), dspy.track_usage() as tracker:
        try:
            yield meter
        finally:
            entries = [entry for rows in tracker.usage_data.values() for entry in rows]
            meter.calls += max(counter.calls, len(entries))
            meter.prompt_tokens += sum(int(e.get("prompt_tokens") or 0) for e in entries)
            meter.completion_tokens += sum(int(e.get("completion_tokens") or 0) for e in entries)
