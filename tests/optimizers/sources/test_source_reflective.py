"""The reflective source: the proposer's texts as candidates for the chosen predictor, with their origin."""

from __future__ import annotations

from types import SimpleNamespace

from memtrace_opt.optimizers import ProposalEvidence, ReflectiveSource, SourceRequest
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, diagnose, learned_patterns
from memtrace_opt.optimizers.sources.replies import with_rules

EXTRACT = "extract_facts.predict"
ANSWER = "answer.predict"
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


def test_the_proposer_sees_the_findings_in_the_learned_patterns_or_none():
    cases = [("q1", "24 May 2031", "last week", "", "last week")]
    evidence = ProposalEvidence(predictor=ANSWER, op_name="mem0.answer", instruction=CURRENT,
                                findings=tuple(diagnose(cases)))
    req = SourceRequest(1, program=SimpleNamespace(), predictor=ANSWER, evidence=evidence,
                        minibatch=SimpleNamespace(), memo=SimpleNamespace(), slots=2)
    learned = learned_patterns(["7 May 2031", "a kite"])
    rule = next(p.rule for p in learned if p.name == "date_form")
    seen = []

    class Appending:
        def propose(self, evidence, k):
            seen.append(evidence)
            return [with_rules(CURRENT, f.pattern.rule) for f in evidence.findings]

    found = ReflectiveSource(Appending(), learned).propose(req, [])
    assert [(c.instruction, c.origin) for c in found] == [(with_rules(CURRENT, rule), "pattern:date_form")]
    assert '"14 October 2031"' in seen[0].mistake()
    assert ReflectiveSource(Appending(), ()).propose(req, []) == []
    assert seen[1].findings == () and "nothing common found" in seen[1].mistake()
    assert ReflectiveSource(Appending()).propose(req, [])[0].instruction == with_rules(CURRENT, PATTERNS[2].rule)
