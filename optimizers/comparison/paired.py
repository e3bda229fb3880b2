"""How far a held-out accuracy change can be told from noise: two programs on the same questions, compared
question by question.

    paired = paired_delta(before={"q1": False, "q2": True}, after={"q1": True, "q2": True})
    paired.fixed, paired.broken, paired.delta, (paired.low, paired.high), paired.p_value

`fixed` are the questions wrong before and right after, `broken` the reverse; only these decide the change.
`low`..`high` is a paired bootstrap interval of the accuracy change (questions resampled with replacement, seeded,
so the same inputs give the same interval); `p_value` the exact two-sided sign test on the fixed and broken
questions (McNemar's exact test). On 20 questions a +10-point change is 2 questions: the interval shows that.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["PairedDelta", "paired_delta", "sign_test"]


@dataclass(frozen=True)
class PairedDelta:
    n: int  # questions in both runs
    fixed: tuple[str, ...]
    broken: tuple[str, ...]
    delta: float
    low: float
    high: float
    p_value: float
    level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fixed": list(self.fixed), "broken": list(self.broken)}

    def cells(self) -> tuple[str, str]:
        """The table's cells: `fixed / broken` and the interval with the p-value."""
        return (f"+{len(self.fixed)} / -{len(self.broken)}",
                f"[{self.low * 100:+.0f}, {self.high * 100:+.0f}] p={self.p_value:.2f}")


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided p-value of `wins` against `losses` when each is equally likely (1.0 with neither)."""
    if wins < 0 or losses < 0:
        raise ValueError("counts must be non-negative")
    trials = wins + losses
    if trials == 0:
        return 1.0
    tail = sum(math.comb(trials, i) for i in range(min(wins, losses) + 1)) / 2 ** trials
    return min(1.0, 2 * tail)


def paired_delta(before: Mapping[str, bool], after: Mapping[str, bool], *, resamples: int = 10_000,
                 level: float = 0.95, seed: int = 0) -> PairedDelta:
    """The change from `before` to `after` (question id -> correct) over the questions both hold."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, not {level}")
    ids = [q for q in before if q in after]
    fixed = tuple(q for q in ids if after[q] and not before[q])
    broken = tuple(q for q in ids if before[q] and not after[q])
    if not ids:
        return PairedDelta(0, (), (), 0.0, 0.0, 0.0, 1.0, level)
    diff = np.array([int(after[q]) - int(before[q]) for q in ids], dtype=float)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return PairedDelta(len(ids), fixed, broken, float(diff.mean()), float(low), float(high),
                       sign_test(len(fixed), len(broken)), level)
