"""The demos source: nothing when demos are off; demos an earlier round offered are not offered again."""

from __future__ import annotations

from types import SimpleNamespace

from memtrace_opt.optimizers import (
    Candidate,
    DemoSettings,
    DemosSource,
    ProposalEvidence,
    RoundPlan,
    SourceRequest,
)
from memtrace_opt.optimizers.sources.demo_source import offered_before

ANSWER = "answer.predict"
DEMO = {"question": "When?", "answer": "May 2023"}


def plan(number: int, chosen: str, candidates) -> RoundPlan:
    return RoundPlan(number, (), 0.0, {}, {}, {}, chosen, "Answer.", tuple(candidates))


def test_demos_off_is_no_candidate_and_no_pool_traced():
    class NoEvaluator:
        def evaluate(self, *args):  # pragma: no cover - the test fails if the pool is traced
            raise AssertionError("the pool was traced with demos off")

    source = DemosSource(NoEvaluator(), DemoSettings(demos=0), pool=["case"])  # type: ignore[arg-type]
    evidence = ProposalEvidence(predictor=ANSWER, op_name="mem0.answer", instruction="Answer.")
    request = SourceRequest(1, SimpleNamespace(), ANSWER, evidence, SimpleNamespace(), SimpleNamespace(), 3)
    assert source.propose(request, []) == []


def test_offered_before_reads_the_earlier_plans_demos_candidates_of_the_predictor():
    other = {"question": "Who?", "answer": "Ann"}
    earlier = [
        plan(1, ANSWER, [Candidate.of(ANSWER, "Answer better."), Candidate.of(ANSWER, "Answer.", [DEMO], "demos")]),
        plan(2, "extract_facts.predict", [Candidate.of("extract_facts.predict", "X.", [other], "demos")]),
        plan(3, ANSWER, [Candidate.of(ANSWER, "Answer.", [DEMO, other], "demos")]),
    ]
    assert offered_before(earlier, ANSWER) == [DEMO, other]
    assert offered_before(earlier, "decide.predict") == []
