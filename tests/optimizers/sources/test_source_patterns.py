"""The pattern source: the slots the reflection LM left go to the diagnosed patterns' rules."""

from __future__ import annotations

from types import SimpleNamespace

from memtrace_opt.optimizers import Candidate, PatternSource, ProposalEvidence, SourceRequest
from memtrace_opt.optimizers.core.evidence import Finding
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, diagnose, learned_patterns
from memtrace_opt.optimizers.sources.replies import with_rules

ANSWER = "answer.predict"
CURRENT = "Answer the question."
FIRST, SECOND = PATTERNS[1], PATTERNS[2]


def request(slots: int, instruction: str = CURRENT) -> SourceRequest:
    evidence = ProposalEvidence(predictor=ANSWER, op_name="mem0.answer", instruction=instruction,
                                findings=(Finding(FIRST, ("q1", "q2")), Finding(SECOND, ("q3",))))
    return SourceRequest(1, program=SimpleNamespace(), predictor=ANSWER, evidence=evidence,
                         minibatch=SimpleNamespace(), memo=SimpleNamespace(), slots=slots)


def test_the_slots_left_get_the_rules_most_cases_first():
    found = PatternSource().propose(request(slots=3), [Candidate.of(ANSWER, "Answer briefly.")])
    assert [c.instruction for c in found] == [with_rules(CURRENT, FIRST.rule), with_rules(CURRENT, SECOND.rule)]
    assert [c.origin for c in found] == [f"pattern:{FIRST.name}", f"pattern:{SECOND.name}"]


def test_no_slot_left_no_rule_and_no_repeat():
    taken = [Candidate.of(ANSWER, "Answer briefly.")]
    assert PatternSource().propose(request(slots=1), taken) == []
    repeated = [Candidate.of(ANSWER, with_rules(CURRENT, FIRST.rule))]
    assert [c.origin for c in PatternSource().propose(request(slots=3), repeated)] == [f"pattern:{SECOND.name}"]


def test_a_demos_candidate_takes_no_slot():
    demos = [Candidate.of(ANSWER, CURRENT, [{"question": "q", "answer": "a"}], "demos")]
    assert len(PatternSource().propose(request(slots=1), demos)) == 1


def test_a_rule_the_instruction_has_is_not_proposed():
    found = PatternSource().propose(request(slots=3, instruction=with_rules(CURRENT, FIRST.rule)), [])
    assert [c.origin for c in found] == [f"pattern:{SECOND.name}"]


def test_learned_patterns_give_their_own_rules_and_only_the_patterns_they_hold():
    # the findings as the diagnosis makes them: the blamed cases whole, tested with the general patterns
    cases = [("q1", "24 May 2031", "last week", "", "last week"), ("q2", "Fencing, Archery", "Fencing", "", "Fencing")]
    evidence = ProposalEvidence(predictor=ANSWER, op_name="mem0.answer", instruction=CURRENT,
                                findings=tuple(diagnose(cases)))
    req = SourceRequest(1, program=SimpleNamespace(), predictor=ANSWER, evidence=evidence,
                        minibatch=SimpleNamespace(), memo=SimpleNamespace(), slots=3)
    learned = learned_patterns(["7 May 2031", "a kite"])  # named dates, no gold lists items
    found = PatternSource(learned).propose(req, [])
    date_rule = next(p.rule for p in learned if p.name == "date_form")
    assert [(c.instruction, c.origin) for c in found] == [(with_rules(CURRENT, date_rule), "pattern:date_form")]
    assert '"14 October 2031"' in date_rule
    assert PatternSource(()).propose(req, []) == []  # no patterns: nothing
