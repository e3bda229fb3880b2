"""Which program configurations an optimizer evaluated, and how each scored on which example.

DSPy's optimizers keep their best program to themselves until `compile` returns. When the LM-call budget
stops one midway (`BudgetExhausted`), the adapter asks the score book instead: every `MemoryQA` prediction is
tagged with the fingerprint of the instructions and demos that produced it, every metric call records the
score under that fingerprint, and `best(valset)` is the configuration with the highest mean over the whole
valset (the same rule the optimizers apply), or None when none covered it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

import dspy

from memtrace_opt.memory.values import to_jsonable

__all__ = ["ScoreBook", "program_fingerprint", "FINGERPRINT_ATTR"]

FINGERPRINT_ATTR = "_memtrace_program"


def program_fingerprint(program: dspy.Module) -> str:
    parts = {
        name: [p.signature.instructions, to_jsonable([dict(d) for d in p.demos or []])]
        for name, p in program.named_predictors()
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


class ScoreBook:
    """Thread-safe: programs by fingerprint (first copy seen) and scores by (fingerprint, case id)."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.programs: dict[str, dspy.Module] = {}
        self.scores: dict[str, dict[str, float]] = {}
        self.first_seen: dict[str, int] = {}  # fingerprint -> LM calls spent when it first ran

    def note(self, program: dspy.Module) -> str:
        fingerprint = program_fingerprint(program)
        with self._lock:
            if fingerprint not in self.programs:
                self.programs[fingerprint] = program.deepcopy()
                self.first_seen[fingerprint] = self._clock() if self._clock is not None else 0
        return fingerprint

    def record(self, fingerprint: str, case_id: str, score: float) -> None:
        with self._lock:
            self.scores.setdefault(fingerprint, {})[case_id] = float(score)

    def wrap(self, metric: Callable[..., Any]) -> Callable[..., Any]:
        """`metric` that also records each score under the prediction's fingerprint."""

        def scored(example: Any, prediction: Any, *args: Any, **kwargs: Any) -> Any:
            result = metric(example, prediction, *args, **kwargs)
            fingerprint = getattr(prediction, FINGERPRINT_ATTR, None) if prediction is not None else None
            if fingerprint is not None:
                value = result.get("score") if isinstance(result, dspy.Prediction) else result
                self.record(fingerprint, str(example.get("case_id")), float(value or 0.0))
            return result

        return scored

    def calls_to_reach(self, program: dspy.Module) -> int | None:
        """LM calls spent when a program with `program`'s instructions and demos first ran, if it ever did."""
        with self._lock:
            return self.first_seen.get(program_fingerprint(program))

    def best(self, case_ids: Iterable[str]) -> tuple[dspy.Module, float] | None:
        """The evaluated program with the best mean score over all of `case_ids`, and that mean."""
        wanted = list(dict.fromkeys(case_ids))
        with self._lock:
            covered = [
                (sum(scores[c] for c in wanted) / len(wanted), fp)
                for fp, scores in self.scores.items()
                if wanted and all(c in scores for c in wanted)
            ]
            if not covered:
                return None
            mean, fingerprint = max(covered, key=lambda pair: pair[0])
            return self.programs[fingerprint], mean
