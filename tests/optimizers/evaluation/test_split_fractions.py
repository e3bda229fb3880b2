"""Whole conversations to splits by fractions: the closest totals there are, every split filled, the seed
deciding ties."""

from __future__ import annotations

import itertools
import random

import pytest

from memtrace_opt.optimizers.evaluation.split_fractions import assign_by_fractions


def distance(sizes, where, fractions) -> float:
    totals = [sum(s for s, k in zip(sizes, where, strict=True) if k == split) for split in range(len(fractions))]
    return sum(abs(t - f * sum(sizes)) for t, f in zip(totals, fractions, strict=True))


def optimum(sizes, fractions) -> float:
    return min(distance(sizes, where, fractions) for where in itertools.product(range(3), repeat=len(sizes))
               if len(set(where)) == 3)


@pytest.mark.parametrize("case", range(12))
def test_the_totals_are_the_closest_any_assignment_gets(case):
    rng = random.Random(case)
    sizes = [rng.randint(1, 260) for _ in range(rng.randint(3, 9))]
    fractions = rng.choice([(0.4, 0.3, 0.3), (0.5, 0.25, 0.25), (0.6, 0.2, 0.2), (0.2, 0.3, 0.5)])
    where = assign_by_fractions(sizes, fractions, seed=case)
    assert len(where) == len(sizes) and set(where) == {0, 1, 2}  # every split holds a conversation
    assert distance(sizes, where, fractions) == pytest.approx(optimum(sizes, fractions))


def test_every_split_gets_one_even_against_the_shares():
    assert sorted(assign_by_fractions([100, 1, 1], (0.4, 0.3, 0.3), seed=0)) == [0, 1, 2]


def test_many_single_question_conversations_split_exactly_and_quickly():
    where = assign_by_fractions([1] * 500, (0.4, 0.3, 0.3), seed=0)
    assert [where.count(k) for k in range(3)] == [200, 150, 150]


def test_the_seed_decides_ties_and_nothing_else():
    sizes = [5, 5, 5, 5, 10]
    first = assign_by_fractions(sizes, (0.4, 0.3, 0.3), seed=1)
    assert assign_by_fractions(sizes, (0.4, 0.3, 0.3), seed=1) == first
    seen = {tuple(assign_by_fractions(sizes, (0.4, 0.3, 0.3), seed=s)) for s in range(10)}
    assert len(seen) > 1
    best = optimum(sizes, (0.4, 0.3, 0.3))
    assert all(distance(sizes, w, (0.4, 0.3, 0.3)) == pytest.approx(best) for w in seen)


def test_a_search_cut_short_keeps_the_best_it_found():
    sizes = [random.Random(7).randint(1, 300) for _ in range(40)]
    where = assign_by_fractions(sizes, (0.4, 0.3, 0.3), seed=0, max_nodes=10)
    assert set(where) == {0, 1, 2} and distance(sizes, where, (0.4, 0.3, 0.3)) < 0.05 * sum(sizes)
