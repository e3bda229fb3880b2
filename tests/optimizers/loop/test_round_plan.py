"""The round plan in the study: schema_version 2 round-trips; a version-1 plan (written before candidates were
typed) is read into the same candidates, so a study an earlier release started resumes."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers import Candidate, RoundPlan

ANSWER = "answer.predict"
DEMOS = [{"question": "When?", "answer": "12 March 2034"}]
V1 = {  # `round:1` as an earlier release wrote it
    "round": 1, "minibatch": ["q1", "q2"], "minibatch_score": 0.5, "minibatch_ops": {ANSWER: 2},
    "blame_counts": {ANSWER: 1}, "not_fixable": {}, "chosen_predictor": ANSWER, "previous_instruction": "Answer.",
    "proposals": ["Answer briefly.", "Answer.\nWrite every date as day, month name and year."],
    "proposal_origins": ["reflection", "pattern:date_form"], "evidence": {"findings": [{"pattern": "date_form",
                                                                                        "cases": ["q1"]}]},
    "verdicts": [{"case_id": "q1", "round": 1}], "local_cases": [], "demos": DEMOS,
}


def test_a_version_1_plan_reads_into_typed_candidates():
    plan = RoundPlan.from_dict(V1)
    assert plan.candidates == (
        Candidate.of(ANSWER, "Answer briefly.", origin="reflection"),
        Candidate.of(ANSWER, "Answer.\nWrite every date as day, month name and year.", origin="pattern:date_form"),
        Candidate.of(ANSWER, "Answer.", DEMOS, "demos"),
    )
    assert plan.findings == [{"pattern": "date_form", "cases": ["q1"]}] and plan.minibatch == ("q1", "q2")


def test_the_keys_of_a_version_1_plans_candidates_are_those_it_was_run_under():
    """A trial is found by its key: the same text (and demos) give the key the earlier release computed."""
    import hashlib

    [_, _, demos] = RoundPlan.from_dict(V1).candidates
    content = "Answer." + "\x1f" + json.dumps(DEMOS, sort_keys=True, ensure_ascii=False)
    assert demos.key(1, "p") == f"r1:{ANSWER}:p:{hashlib.sha256(content.encode()).hexdigest()[:16]}"


def test_version_2_round_trips_byte_for_byte():
    written = RoundPlan.from_dict(V1).to_dict()
    assert written["schema_version"] == 2 and "proposals" not in written
    again = RoundPlan.from_dict(json.loads(json.dumps(written))).to_dict()
    assert json.dumps(again, sort_keys=True) == json.dumps(written, sort_keys=True)


def test_a_newer_plan_is_a_clear_error():
    with pytest.raises(MemtraceError, match="schema_version 3"):
        RoundPlan.from_dict({**V1, "schema_version": 3})
