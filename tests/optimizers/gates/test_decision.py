"""`Decision`: a status that code asks, a reason rendered only where a person reads it."""

from __future__ import annotations

from memtrace_opt.optimizers import Decision, Status


def test_the_reason_is_rendered_from_its_facts():
    decision = Decision.of(Status.REJECTED, "rejected: minibatch {score:.3f}", score=0.25)
    assert decision.why == "rejected: minibatch 0.250" and not decision.ok
    assert decision.to_dict() == {"status": "rejected", "why": "rejected: minibatch 0.250"}


def test_ok_is_passed_or_accepted_only():
    oks = {status for status in Status if Decision.of(status, "").ok}
    assert oks == {Status.PASSED, Status.ACCEPTED}


def test_a_reason_said_after_another_keeps_the_status():
    first = Decision.of(Status.ACCEPTED, "accepted: valset {val:.3f}", val=0.5)
    both = first.also(", and above the demos alone ({rival:.3f})", rival=0.4)
    assert both.status is Status.ACCEPTED
    assert both.why == "accepted: valset 0.500, and above the demos alone (0.400)"


def test_a_recorded_reason_is_shown_as_it_was_stored():
    stored = Decision.recorded(Status.REJECTED, "rejected: valset {0.3} braces and all")
    assert stored.why == "rejected: valset {0.3} braces and all" and stored.status is Status.REJECTED
