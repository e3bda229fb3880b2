"""Budgeted LM questions: at most `max_calls` calls and about `max_tokens` tokens per case; a call that fails
(unparseable reply, server error) is counted and answered with None, never raised."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import dspy

from memtrace_opt.attribution._evidence import Evidence
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._render import clip

__all__ = ["Asker", "evidence_text"]

log = logging.getLogger(__name__)


class Asker:
    """Use as a context manager around one case."""

    def __init__(self, max_calls: int, max_tokens: int) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.failures = 0
        self._scope: Any = None
        self._tracker: Any = None
        self._outer: Any = None

    def __enter__(self) -> Asker:
        self._outer = dspy.settings.usage_tracker
        self._scope = dspy.track_usage()
        self._tracker = self._scope.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._scope.__exit__(*exc)

    @property
    def tokens(self) -> int:
        if self._tracker is None:
            return 0
        rows = [e for entries in self._tracker.usage_data.values() for e in entries]
        return sum(int(e.get("prompt_tokens") or 0) + int(e.get("completion_tokens") or 0) for e in rows)

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """LM calls made inside are not charged to this case's budget (a replay on the task model); they still reach
        the usage tracker outside the case, where there is one."""
        with dspy.settings.context(usage_tracker=self._outer):
            yield

    def can_ask(self) -> bool:
        return self.calls < self.max_calls and self.tokens < self.max_tokens

    def ask(self, signature: type[dspy.Signature], **inputs: Any) -> dspy.Prediction | None:
        """One call of `signature`, or None when the budget is spent or the call failed."""
        if not self.can_ask():
            return None
        self.calls += 1
        try:
            return dspy.Predict(signature)(**inputs)
        except Exception as error:  # noqa: BLE001 - a failed question is a missing answer, not a crash
            self.failures += 1
            log.info("attributor LM call failed (%s: %s)", type(error).__name__, clip(str(error), 200))
            return None


def evidence_text(view: GraphView, evidence: Evidence, limit: int = 1200, most: int = 4) -> str:
    """The evidence turns as `[D1:3] speaker: text (date)` lines (gold turns, or the best pseudo turns)."""
    turns = list(evidence.turns) if evidence.source == "gold" else list(evidence.turns[:most])
    lines = [f"[{node[5:]}] {view.turn_line(node)}" for node in turns]
    per = max(120, limit // max(1, len(lines)))
    return clip("\n".join(clip(line, per) for line in lines), limit) or "(no evidence turns found)"
