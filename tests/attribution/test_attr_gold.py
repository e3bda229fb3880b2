"""GoldError by the judge role: an answer op that was shown the needed information and answered it in other words,
and, only when asked (`judge_evidence`), gold evidence turns that do not hold the gold answer."""

from __future__ import annotations

import dataclasses

import pytest
from attr_graphs import EVIDENCE, QID, QUESTION, build

from memtrace_opt.attribution import (
    AnswerJudge,
    AttributionConfig,
    FailedCase,
    LMAnswerJudge,
    attribute_cases,
)
from memtrace_opt.testing.fake_lm import FakeEngine, Skill, fake_lm

CONFIG = AttributionConfig(embedder="hash")
EVIDENCE_TEST = AttributionConfig(embedder="hash", judge_evidence=True)


class FakeJudge:
    """Says a text means the gold answer when `means_gold(text)`; records what it was asked."""

    def __init__(self, means_gold) -> None:
        self.means_gold = means_gold
        self.asked: list[tuple[str, str, str]] = []

    def means(self, question: str, gold: str, text: str) -> bool | None:
        self.asked.append((question, gold, text))
        return self.means_gold(text)


def case_for(graph, gold: str = "Biscuit", prediction: str = "Max", abstention: bool = False) -> FailedCase:
    question = {"question_id": QID, "question": QUESTION, "answer": gold, "category": "single-hop",
                "abstention": abstention}
    return FailedCase(QID, question, gold, prediction, EVIDENCE, "test", "s1", graph=graph)


def verdict_of(method: str, case: FailedCase, judge: AnswerJudge | None, lm=None, config=EVIDENCE_TEST):
    options = {"judge": judge} if judge is not None else {}
    [verdict] = attribute_cases([case], method, lm=lm, config=config, **options)
    return verdict


def says_only(means_gold):
    """The judge role on the scripted fake LM: CORRECT when `means_gold(prediction)`; the texts it was asked about."""
    asked: list[str] = []

    def grade(call):
        asked.append(call.inputs["prediction"])
        return {"reason": "compared", "verdict": "CORRECT" if means_gold(call.inputs["prediction"]) else "WRONG"}

    engine = FakeEngine(skills=[Skill(outputs=("verdict",), fn=grade)], model="fake-judge")
    return LMAnswerJudge(fake_lm(engine=engine, name="fake/judge")), asked


def test_the_fake_judge_is_an_answer_judge() -> None:
    assert isinstance(FakeJudge(bool), AnswerJudge)


def test_the_lm_judge_asks_the_judge_role_and_reads_its_verdict() -> None:
    def grade(call):
        return {"reason": "compared", "verdict": "CORRECT" if "Biscuit" in call.inputs["prediction"] else "WRONG"}

    judge = LMAnswerJudge(fake_lm(engine=FakeEngine(skills=[Skill(outputs=("verdict",), fn=grade)]), name="fake/judge"))
    assert isinstance(judge, AnswerJudge)
    assert judge.means(QUESTION, "Biscuit", "a beagle called Biscuit") is True
    assert judge.means(QUESTION, "Biscuit", "Max") is False


@pytest.mark.parametrize("method", ["lineage", "graphtrace"])
def test_gold_evidence_turns_that_do_not_hold_the_gold_answer_make_a_gold_error(method, attributor_lm) -> None:
    built = build("rag", "retrieval")
    judge = FakeJudge(lambda text: "Waffles" in text)  # the turns name the beagle Biscuit, never Waffles
    verdict = verdict_of(method, case_for(built.graph, gold="Waffles"), judge, attributor_lm)
    assert (verdict.error_type, verdict.op_id) == ("GoldError", None)
    assert verdict.reason.startswith("the gold evidence turns do not hold the gold answer")
    [(question, gold, shown)] = judge.asked
    assert (question, gold) == (QUESTION, "Waffles") and "a beagle named Biscuit" in shown


@pytest.mark.parametrize("method", ["lineage", "graphtrace"])
def test_the_judge_reads_the_gold_evidence_only_when_asked(method, attributor_lm) -> None:
    built = build("rag", "retrieval")
    judge, asked = says_only(lambda text: "Waffles" in text)  # the turns name the beagle Biscuit, never Waffles
    case = case_for(built.graph, gold="Waffles")
    default = verdict_of(method, case, judge, attributor_lm, config=CONFIG)
    assert default.error_type != "GoldError" and asked == []
    assert not AttributionConfig().judge_evidence
    asked_for = verdict_of(method, case, judge, attributor_lm)
    assert (asked_for.error_type, asked_for.op_id) == ("GoldError", None)
    assert len(asked) == 1 and "a beagle named Biscuit" in asked[0]


def test_by_default_the_judge_still_finds_an_answer_in_other_words() -> None:
    built = build("rag", "response")
    prediction = "her new beagle, the one called Biscuit-the-pup"
    judge, asked = says_only(lambda text: text == prediction)
    verdict = verdict_of("lineage", case_for(built.graph, prediction=prediction), judge, config=CONFIG)
    assert verdict.error_type == "GoldError" and verdict.reason.startswith("answered in other words")
    assert asked == [prediction]


def test_without_a_judge_a_gold_answer_the_turns_lack_is_not_guessed_at() -> None:
    built = build("rag", "retrieval")
    verdict = verdict_of("lineage", case_for(built.graph, gold="Waffles"), None)
    assert verdict.error_type != "GoldError"


def test_turns_the_judge_reads_as_saying_the_gold_answer_are_no_gold_error() -> None:
    built = build("rag", "retrieval")
    judge = FakeJudge(lambda text: True)  # e.g. an answer the turns imply without its words
    verdict = verdict_of("lineage", case_for(built.graph, gold="Waffles"), judge)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "RetrievalError") and len(judge.asked) == 1


def test_turns_that_hold_the_gold_answer_are_not_put_to_the_judge() -> None:
    built = build("rag", "retrieval")
    judge = FakeJudge(lambda text: False)
    verdict = verdict_of("lineage", case_for(built.graph), judge)
    assert judge.asked == [] and verdict.error_type == "RetrievalError"


@pytest.mark.parametrize("method", ["lineage", "graphtrace"])
def test_an_answer_in_other_words_is_a_gold_error(method, attributor_lm) -> None:
    built = build("rag", "response")  # the answer op was shown "a beagle named Biscuit"
    prediction = "her new beagle, the one called Biscuit-the-pup"
    judge = FakeJudge(lambda text: text == prediction)
    verdict = verdict_of(method, case_for(built.graph, prediction=prediction), judge, attributor_lm)
    assert (verdict.error_type, verdict.op_id) == ("GoldError", None)
    assert verdict.reason.startswith("answered in other words") and prediction in verdict.reason
    assert [text for _, _, text in judge.asked] == [prediction]


def test_an_answer_the_judge_rejects_stays_the_answer_ops_fault() -> None:
    built = build("rag", "response")
    judge = FakeJudge(lambda text: False)
    verdict = verdict_of("lineage", case_for(built.graph), judge)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, "ResponseError") and len(judge.asked) == 1


def test_an_answer_that_never_saw_the_information_is_not_put_to_the_judge() -> None:
    built = build("rag", "retrieval")  # the retrieval dropped it: nothing to say in other words
    judge = FakeJudge(lambda text: True)
    verdict = verdict_of("lineage", case_for(built.graph, prediction="Biscuit, I think"), judge)
    assert verdict.error_type == "RetrievalError" and judge.asked == []


def test_an_abstention_question_is_never_a_gold_error() -> None:
    built = build("rag", "response")
    judge = FakeJudge(lambda text: True)
    verdict = verdict_of("lineage", case_for(built.graph, gold="Not mentioned in the conversation", abstention=True),
                         judge)
    assert verdict.error_type == "ResponseError" and judge.asked == []


def test_the_flow_methods_open_a_case_alike_a_graph_gold_error_or_an_error_verdict() -> None:
    """`start_case`, the opening graphtrace and lineage share: the view and flow to work on, else the verdict that
    ends the case first (a GoldError, or an error verdict when the graph cannot be followed)."""
    import networkx as nx

    from memtrace_opt.attribution import Verdict
    from memtrace_opt.attribution.lineage import start_case

    built = build("rag", "retrieval")
    view, flow = start_case(case_for(built.graph), built.graph, CONFIG, FakeJudge(lambda text: False), "m")
    assert flow.root(view).op == built.op_id
    asked = dataclasses.replace(CONFIG, judge_evidence=True)  # the judge's test of the evidence, asked for
    gold = start_case(case_for(built.graph, gold="Waffles"), built.graph, asked, FakeJudge(lambda t: False), "m")
    assert isinstance(gold, Verdict) and (gold.method, gold.error_type) == ("m", "GoldError")
    broken = start_case(case_for(nx.MultiDiGraph()), nx.MultiDiGraph(), CONFIG, None, "m")
    assert isinstance(broken, Verdict) and broken.error and broken.method == "m"
