"""The shared answer op: what the LM sees (no gold answer), and how its reply becomes the answer."""

from __future__ import annotations

import dspy
import pytest
from memory_programs_kit import make_question

from memtrace_opt.memory.store import MemoryStore
from memtrace_opt.programs.common import ABSTAIN_ANSWER, clean_answer, format_units
from memtrace_opt.programs.rag import AnswerRAG
from memtrace_opt.testing import FakeEngine, Skill, fake_lm


def _units():
    store = MemoryStore()
    return [store.add("Theo adopted a beagle named Biscuit.", timestamp="10:15 am on 3 March, 2023"),
            store.add("Maya moved to Denver.", timestamp="2:05 pm on 9 July, 2023")]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Biscuit", "Biscuit"),
        ("None", ABSTAIN_ANSWER),
        ("unknown.", ABSTAIN_ANSWER),
        ("", ABSTAIN_ANSWER),
        ("N/A", ABSTAIN_ANSWER),
        ("No answer", ABSTAIN_ANSWER),
        ("The context does not mention a dog.", ABSTAIN_ANSWER),
        ("an unknown artist", "an unknown artist"),  # an answer that holds a decline word stays an answer
        ("None of them", "None of them"),
        ("Answer: Denver [[ ## completed ## ]]", "Denver"),
    ],
)
def test_reply_to_answer(reply, expected):
    engine = FakeEngine(skills=[Skill(("answer",), lambda call: {"answer": reply})])
    question = make_question("What is the name of Theo's dog?", "Biscuit")
    with dspy.context(lm=fake_lm(engine=engine)):
        out = AnswerRAG()(question=question, context=_units())
    assert out.answer == expected and out.error is None
    sent = engine.calls[0]
    assert sent.output_fields == ("answer",)
    assert sent.inputs["question"] == "What is the name of Theo's dog?"
    assert "Biscuit" not in sent.inputs["question"] and "D1" not in str(sent.inputs)  # no gold answer or evidence
    assert sent.inputs["context"] == format_units(_units())
    assert sent.inputs["context"].index("[Friday, 3 March 2023]") < sent.inputs["context"].index("Theo adopted")


def test_question_date_is_shown_when_known():
    engine = FakeEngine(skills=[Skill(("answer",), lambda call: {"answer": "x"})])
    question = make_question("What did I buy?", "x")
    question = type(question)(**{**question.to_dict(), "evidence": (), "question_date": "2023/05/20 (Sat) 02:21"})
    with dspy.context(lm=fake_lm(engine=engine)):
        AnswerRAG()(question=question, context=[])
    assert engine.calls[0].inputs["question"] == "What did I buy? (asked on Saturday, 20 May 2023)"
    assert engine.calls[0].inputs["context"] == "(empty)"


def test_context_comes_before_the_question_in_the_prompt():
    """A shared context prefix lets llama.cpp reuse its KV cache across questions."""
    from memtrace_opt.programs.common import AnswerQuestion

    assert list(AnswerQuestion.input_fields) == ["context", "question"]


def test_clean_answer():
    assert clean_answer("  Final answer:  11 April   2021 ") == "11 April 2021"
    assert clean_answer(None) == ""
