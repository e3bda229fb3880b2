"""graphtrace: structure first, then local questions to a (fake) attributor LM."""

from __future__ import annotations

import dspy
import pytest
from attr_graphs import ALL_CASES, EVIDENCE, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, attribute_cases, get_attributor

CONFIG = AttributionConfig(embedder="hash")


def case_for(graph, gold: str = "Biscuit", evidence=EVIDENCE) -> FailedCase:
    question = {"question_id": QID, "question": QUESTION, "answer": gold}
    return FailedCase(QID, question, gold, "Max", tuple(evidence), "test", "s1", graph=graph)


@pytest.mark.parametrize(("system", "fault"), ALL_CASES)
def test_graphtrace_finds_the_known_root_cause(system, fault, attributor_lm, attributor_engine) -> None:
    built = build(system, fault)
    [verdict] = attribute_cases([case_for(built.graph)], "graphtrace", lm=attributor_lm, config=CONFIG)
    assert verdict.error is None, verdict.error
    assert (verdict.op_id, verdict.error_type) == (built.op_id, built.error_type), verdict.reason
    assert verdict.confidence >= 0.7  # an LM judgement, not the structural fallback
    # few, small questions; the runner metered exactly the calls the engine saw
    assert 1 <= verdict.cost.lm_calls == len(attributor_engine.calls) <= 8
    assert verdict.cost.prompt_tokens + verdict.cost.completion_tokens <= 12_000
    assert attributor_engine.counts["supported"] == 0  # the evidence states the gold answer: nothing to ask


def test_graphtrace_blames_the_gold_answer_the_evidence_contradicts(attributor_lm, attributor_engine) -> None:
    built = build("mem0", "response")
    with dspy.context(lm=attributor_lm):
        verdict = get_attributor("graphtrace", CONFIG).attribute(case_for(built.graph, gold="Cookie"), built.graph)
    assert verdict.error_type == "GoldError" and verdict.op_id is None
    # asked once, last: only after every op on the information's path was judged to have done its job
    assert attributor_engine.counts["supported"] == 1
    assert "supported" in attributor_engine.calls[-1].output_fields and len(attributor_engine.calls) <= 8


def test_graphtrace_falls_back_to_structure_when_the_lm_fails(attributor_engine) -> None:
    from memtrace_opt.testing.fake_lm import FakeReply, Skill, fake_lm

    def unparseable(call):
        raise FakeReply("no fields here")

    engine = type(attributor_engine)(skills=[Skill(outputs=("faulty",), fn=unparseable),
                                             Skill(outputs=("supported",), fn=unparseable)])
    built = build("rag", "retrieval")
    [verdict] = attribute_cases([case_for(built.graph)], "graphtrace", lm=fake_lm(engine=engine), config=CONFIG)
    assert verdict.error is None
    assert (verdict.op_id, verdict.error_type) == (built.op_id, built.error_type)
    assert verdict.confidence <= 0.3 and "no usable judgement" in verdict.reason


def test_graphtrace_without_gold_evidence_skips_the_gold_check_when_an_op_is_faulty(
    attributor_lm, attributor_engine
) -> None:
    built = build("evermemos", "merge")
    [verdict] = attribute_cases([case_for(built.graph, evidence=())], "graphtrace", lm=attributor_lm, config=CONFIG)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, built.error_type)
    assert attributor_engine.counts["supported"] == 0


def test_an_abstention_question_is_the_answer_ops_fault_without_lm_calls(attributor_lm, attributor_engine) -> None:
    built = build("rag", "retrieval")
    question = {"question_id": QID, "question": QUESTION, "answer": "Not mentioned in the conversation",
                "abstention": True}
    case = FailedCase(QID, question, "Not mentioned in the conversation", "Max", EVIDENCE, "rag", "s1",
                      graph=built.graph)
    [verdict] = attribute_cases([case], "graphtrace", lm=attributor_lm, config=CONFIG)
    assert verdict.error_type == "ResponseError" and verdict.op == "rag.answer"
    assert verdict.cost.lm_calls == 0 == len(attributor_engine.calls)
