"""The stop policy: plateau, rounds, LM calls and time; the budget's own feasibility test."""

from __future__ import annotations

import time
from dataclasses import replace

from parts import budget, spend

from memtrace_opt.optimizers import RoundRecord, StopPolicy, StopReason
from memtrace_opt.optimizers.loop.records import CandidateRecord, PhaseCost, RoundPhase


def record(accepted: bool) -> RoundRecord:
    return RoundRecord(1, {}, {}, "answer.predict", "Answer.", [], accepted, 0.5, 3)


def test_patience_rounds_without_a_change_stop_it_and_a_change_resets_the_count():
    policy, unbounded = StopPolicy(patience=2), budget(None)
    assert policy.after(record(False), unbounded) is None
    assert policy.after(record(True), unbounded) is None
    assert policy.after(record(False), unbounded) is None
    assert policy.after(record(False), unbounded) is StopReason.PLATEAU


def test_the_rounds_before_the_plateau_count_down_and_an_accepted_change_resets_them():
    policy, unbounded = StopPolicy(patience=3), budget(None)
    assert policy.rounds_before_plateau() == 3
    policy.after(record(False), unbounded)
    policy.after(record(False), unbounded)
    assert policy.rounds_before_plateau() == 1  # the last round the plateau allows
    policy.after(record(True), unbounded)
    assert policy.rounds_before_plateau() == 3


def test_a_round_whose_share_scored_no_candidate_or_paid_for_none_is_no_round_of_a_plateau():
    def unscored(why: str = "not scored: 24 LM calls left to the round, it needs 25") -> CandidateRecord:
        return CandidateRecord("Answer better.", None, None, False, why, status="not_validated")

    untested = RoundRecord(1, {}, {}, "extract.predict", "Extract.", [unscored(), unscored()], False, 0.5, 3)
    scored = RoundRecord(2, {}, {}, "extract.predict", "Extract.", [
        CandidateRecord("Extract more.", 0.25, None, False, "rejected: minibatch", status="rejected"),
        unscored()], False, 0.5, 3)
    assert untested.untested and not scored.untested and not record(False).untested  # no candidates: it counts
    unpaid = RoundRecord(4, {}, {}, "rag.retrieve", None, [], False, 0.5, 0, phases=[
        PhaseCost(RoundPhase.SETTINGS, estimated_calls=30, skipped="its slice of the round pays for no trial")])
    ran = replace(unpaid, phases=[PhaseCost(RoundPhase.SETTINGS, calls=12)])  # a trial ran and proposed nothing
    assert unpaid.untested and not ran.untested
    policy, unbounded = StopPolicy(patience=2), budget(None)
    assert policy.after(untested, unbounded) is None and policy.plateau == 0
    assert policy.after(scored, unbounded) is None and policy.plateau == 1
    assert policy.after(untested, unbounded) is None and policy.plateau == 1
    assert policy.after(scored, unbounded) is StopReason.PLATEAU


def test_the_budget_spent_or_cut_among_candidates_stops_it():
    assert StopPolicy(patience=5).after(record(True), budget(10, spent=10)) is StopReason.BUDGET
    assert StopPolicy(patience=5).after(record(True), budget(10, spent=2), cut=True) is StopReason.BUDGET
    late = budget(None, deadline=time.monotonic() - 1)
    assert StopPolicy(patience=5).after(record(True), late) is StopReason.TIME


def test_no_round_starts_that_could_not_validate_one_candidate():
    policy = StopPolicy(patience=2, least_validation=5)
    assert policy.before(1, budget(10, spent=5)) is None
    assert policy.before(1, budget(10, spent=6)) is StopReason.BUDGET
    assert policy.before(1, budget(None, deadline=time.monotonic() - 1)) is StopReason.TIME
    assert StopPolicy(patience=2).before(1, budget(10, spent=9)) is None  # the cost unknown: never stops work


def test_the_budgets_feasibility():
    left = budget(10)
    assert left.can_afford(10) and not left.can_afford(11) and left.can_afford(0)
    spend(left.usage, 4)
    assert left.shortfall(7) == "6 LM calls left, a validation takes at least 7" and left.shortfall(6) == ""
    assert left.stop_reason() == "budget"
