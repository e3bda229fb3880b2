"""The round plan and the round record in the study: both round-trip byte for byte; a newer plan is a clear error."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers import Candidate, RoundPlan
from memtrace_opt.optimizers.loop.records import CandidateRecord, PhaseCost, RoundPhase, RoundRecord

ANSWER = "answer.predict"
DEMOS = [{"question": "When?", "answer": "12 March 2034"}]
PLAN = RoundPlan(
    round=1, minibatch=("q1", "q2"), minibatch_score=0.5, minibatch_ops={ANSWER: 2}, blame_counts={ANSWER: 1},
    not_fixable={}, chosen_predictor=ANSWER, previous_instruction="Answer.",
    candidates=(Candidate.of(ANSWER, "Answer briefly."), Candidate.of(ANSWER, "Answer.", DEMOS, "demos")),
    evidence={"findings": [{"pattern": "date_form", "cases": ["q1"]}]}, verdicts=({"case_id": "q1", "round": 1},),
)


def test_the_plan_round_trips_byte_for_byte():
    written = PLAN.to_dict()
    assert written["schema_version"] == 3 and RoundPlan.from_dict(written) == PLAN
    again = RoundPlan.from_dict(json.loads(json.dumps(written))).to_dict()
    assert json.dumps(again, sort_keys=True) == json.dumps(written, sort_keys=True)
    assert PLAN.findings == [{"pattern": "date_form", "cases": ["q1"]}]


def test_a_newer_plan_is_a_clear_error():
    with pytest.raises(MemtraceError, match="schema_version 4"):
        RoundPlan.from_dict({**PLAN.to_dict(), "schema_version": 4})


def test_a_cut_round_round_trips_with_its_phases_and_says_where_it_was_cut():
    record = RoundRecord(
        3, blame_counts={ANSWER: 2}, chosen_predictor=ANSWER, previous_instruction="Answer.",
        candidates=[CandidateRecord.of(Candidate.of(ANSWER, "Answer briefly."), status="not_validated",
                                       why="not validated: cut short", rungs=[{"calls": 4, "fixed": 1}])],
        lm_calls=12, cached_calls=3, seconds=40.5,
        phases=[PhaseCost(RoundPhase.PLAN, 1.0, 0, 0.9), PhaseCost(RoundPhase.VALIDATION, 30.0, 10, 38.0, 10, 2)],
        cut={"phase": "validation", "why": "cut short: the time budget is spent"},
    )
    data = json.loads(json.dumps(record.to_dict()))
    assert data["phase"] == "validation" and data["why"].startswith("cut short")  # where the report reads them
    assert RoundRecord.from_dict(data) == record and RoundRecord.from_dict(data).phase is RoundPhase.VALIDATION
    assert [p["phase"] for p in data["phases"]] == ["plan", "validation"]
