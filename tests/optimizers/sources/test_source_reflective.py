"""The reflective source: the proposer's texts as candidates for the chosen predictor, with their origin."""

from __future__ import annotations

from types import SimpleNamespace

from memtrace_opt.optimizers import ProposalEvidence, ReflectiveSource, SourceRequest
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS
from memtrace_opt.optimizers.sources.replies import with_rules

EXTRACT = "extract_facts.predict"
CURRENT = "Extract the facts."


class Scripted:
    def __init__(self, texts):
        self.texts, self.asked = texts, []

    def propose(self, evidence, k):
        self.asked.append((evidence.predictor, k))
        return self.texts[:k]


def request(slots: int = 3) -> SourceRequest:
    evidence = ProposalEvidence(predictor=EXTRACT, op_name="mem0.extract_facts", instruction=CURRENT)
    return SourceRequest(1, program=SimpleNamespace(), predictor=EXTRACT, evidence=evidence,
                         minibatch=SimpleNamespace(), memo=SimpleNamespace(), slots=slots)


def test_each_text_is_a_candidate_for_the_chosen_predictor():
    pattern = PATTERNS[0]
    proposer = Scripted(["Extract every fact with its date.", with_rules(CURRENT, pattern.rule), "unused"])
    found = ReflectiveSource(proposer).propose(request(slots=2), [])
    assert proposer.asked == [(EXTRACT, 2)]
    assert [(c.predictor, c.origin, c.demos) for c in found] == [(EXTRACT, "reflection", None),
                                                                 (EXTRACT, f"pattern:{pattern.name}", None)]


def test_no_usable_reply_is_no_candidate():
    assert ReflectiveSource(Scripted([])).propose(request(), []) == []
