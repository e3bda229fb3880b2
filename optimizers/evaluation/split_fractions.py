"""Whole conversations to splits by fractions: each split's question count as close to its share as can be.

    assign_by_fractions([120, 40, 90, 150], (0.4, 0.3, 0.3), seed=0) -> [2, 1, 1, 0]  (train 150, val 130, test 120)

An exact branch-and-bound search over the assignments (items largest first; an assignment is pruned once its
overshoot, which can only grow, or the shortfall the items left cannot fill reaches the best distance found),
started from a greedy assignment and stopped after `max_nodes` (the best found then stands: on hundreds of
conversations of one question each, as LongMemEval has, the greedy start is already exact). The seed orders the
items of equal size and the splits tried first, so it breaks ties (val and test with equal shares tie always).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["assign_by_fractions"]


def assign_by_fractions(sizes: Sequence[int], fractions: Sequence[float], seed: int,
                        max_nodes: int = 50_000) -> list[int]:
    """The split (an index into `fractions`) of each item of `sizes`, minimizing the summed distance of the
    splits' totals to their fractions of the whole; every split holds an item when there are enough items."""
    rng = random.Random(seed)
    ranks = list(range(len(sizes)))
    rng.shuffle(ranks)
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], ranks[i]))
    splits = list(range(len(fractions)))
    rng.shuffle(splits)
    targets = [f * sum(sizes) for f in fractions]
    best = _greedy(sizes, order, splits, targets)
    search = _Search(sizes, order, splits, targets, max_nodes)
    search.best, search.best_distance = list(best), _distance(sizes, best, targets)
    search.run(0, [0] * len(fractions), [0] * len(fractions), [0] * len(sizes))
    return search.best


def _distance(sizes: Sequence[int], where: Sequence[int], targets: Sequence[float]) -> float:
    totals = [0] * len(targets)
    for size, k in zip(sizes, where, strict=True):
        totals[k] += size
    return sum(abs(t - g) for t, g in zip(totals, targets, strict=True))


def _greedy(sizes: Sequence[int], order: Sequence[int], splits: Sequence[int], targets: Sequence[float]) -> list[int]:
    """Each item, largest first, to the split furthest below its target (an empty split first when the items
    left are only enough for the empty ones)."""
    where = [0] * len(sizes)
    totals, members = [0] * len(targets), [0] * len(targets)
    for position, item in enumerate(order):
        empty = [k for k in splits if members[k] == 0]
        choices = empty if len(empty) >= len(order) - position else list(splits)
        k = max(choices, key=lambda k: targets[k] - totals[k])  # the first of equals: the seeded order decides
        where[item], totals[k], members[k] = k, totals[k] + sizes[item], members[k] + 1
    return where


class _Search:
    """The depth-first branch and bound behind `assign_by_fractions` (its state between the recursive calls)."""

    def __init__(self, sizes: Sequence[int], order: Sequence[int], splits: Sequence[int], targets: Sequence[float],
                 max_nodes: int) -> None:
        self.sizes, self.order, self.splits, self.targets = sizes, order, splits, targets
        self.left = [sum(sizes[i] for i in order[p:]) for p in range(len(order) + 1)]  # sizes not yet placed
        self.nodes, self.max_nodes = 0, max_nodes
        self.best: list[int] = []
        self.best_distance = float("inf")

    def run(self, position: int, totals: list[int], members: list[int], where: list[int]) -> None:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            return
        over = sum(max(0.0, t - g) for t, g in zip(totals, self.targets, strict=True))
        short = sum(max(0.0, g - t) for t, g in zip(totals, self.targets, strict=True))
        if over + max(0.0, short - self.left[position]) >= self.best_distance - 1e-9:
            return
        if position == len(self.order):
            self.best, self.best_distance = list(where), over + short
            return
        empty = sum(1 for m in members if m == 0)
        item = self.order[position]
        for k in self.splits:
            if members[k] > 0 and empty >= len(self.order) - position:
                continue  # the items left must go to the empty splits
            totals[k] += self.sizes[item]
            members[k] += 1
            where[item] = k
            self.run(position + 1, totals, members, where)
            totals[k] -= self.sizes[item]
            members[k] -= 1
