"""The local check gate: a candidate with no blamed call to re-run passes without an LM call; the gate's
decision follows the check's counts."""

from __future__ import annotations

from memtrace_opt.optimizers import Candidate, Status
from memtrace_opt.optimizers.gates import local_check
from memtrace_opt.optimizers.gates.local_check import LocalCheckGate, LocalResult
from memtrace_opt.programs.mem0 import Mem0Memory

EXTRACT = "extract_facts.predict"


class NoLM:
    def __call__(self, *args, **kwargs):  # pragma: no cover - the test fails if it is called
        raise AssertionError("the local check called the LM with nothing to re-run")


def test_no_blamed_call_passes_without_a_call():
    result, decision = LocalCheckGate([], NoLM()).check(Mem0Memory(), Candidate.of(EXTRACT, "Better."))
    assert result.blamed == 0 and result.lm_calls == 0
    assert decision.status is Status.PASSED and decision.why == "local check skipped: no blamed call to re-run"


def test_it_rejects_a_candidate_that_fixes_no_more_than_it_breaks(monkeypatch):
    seen = []

    def scripted(program, predictor, instruction, cases, lm=None, demos=None):
        seen.append((predictor, instruction, demos))
        fixed = 1 if instruction == "Better." else 0
        return LocalResult(blamed=2, fixed=fixed, kept=1, broken=0, lm_calls=3)

    monkeypatch.setattr(local_check, "check_candidate", scripted)
    gate = LocalCheckGate([object()], NoLM())
    _, worse = gate.check(Mem0Memory(), Candidate.of(EXTRACT, "Worse."))
    _, better = gate.check(Mem0Memory(), Candidate.of(EXTRACT, "Better.", [{"a": "b"}], "demos"))
    assert worse.status is Status.REJECTED and worse.why.startswith("rejected by the local check: 0 of 2 blamed")
    assert better.status is Status.PASSED and better.why.startswith("local check passed: 1 of 2 blamed calls")
    assert seen[1] == (EXTRACT, "Better.", [{"a": "b"}])  # the candidate's own demos are re-run with it
