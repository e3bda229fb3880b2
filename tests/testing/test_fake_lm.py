from __future__ import annotations

import threading

import dspy
import pytest
from dspy.utils.exceptions import AdapterParseError, LMTimeoutError

from memtrace_opt.testing import (
    DEFAULT_SKILL,
    FakeCall,
    FakeEngine,
    FakeReply,
    FakeTimeout,
    Skill,
    fake_lm,
    use_fake_lm,
)


class Answer(dspy.Signature):
    """Answer the question from the context.

    Keep it short."""

    question: str = dspy.InputField()
    context: list[str] = dspy.InputField()
    answer: str = dspy.OutputField()
    confidence: float = dspy.OutputField()


class Facts(dspy.Signature):
    """Extract facts."""

    turn: str = dspy.InputField()
    facts: list[str] = dspy.OutputField()
    has_facts: bool = dspy.OutputField()
    count: int = dspy.OutputField()


def test_parses_a_real_predict_prompt():
    with use_fake_lm() as engine:
        dspy.Predict(Answer)(question="Where did Ysolde go?\n\nIn May.", context=["D1:1 Ysolde went to Oslo"])
    (call,) = engine.calls
    assert call.instruction == "Answer the question from the context.\n\nKeep it short."
    assert call.inputs == {"question": "Where did Ysolde go?\n\nIn May.", "context": '["D1:1 Ysolde went to Oslo"]'}
    assert call.output_fields == ("answer", "confidence")
    assert [m["role"] for m in call.messages] == ["system", "user"]
    assert "Respond with" in call.messages[-1]["content"]
    assert engine.counts == {DEFAULT_SKILL: 1}


def test_skill_outputs_are_rendered_so_dspy_parses_them():
    skill = Skill(outputs=("facts",), fn=lambda c: {"facts": [c.inputs["turn"], "x"], "has_facts": True, "count": 2})
    with use_fake_lm([skill]) as engine:
        pred = dspy.Predict(Facts)(turn="I adopted a cat")
    assert pred.facts == ["I adopted a cat", "x"]
    assert pred.has_facts is True and pred.count == 2
    assert engine.counts == {"facts": 1}


def test_default_placeholders_are_typed_and_deterministic():
    with use_fake_lm():
        first = dspy.Predict(Facts)(turn="a")
        again = dspy.Predict(Facts)(turn="a")
        other = dspy.Predict(Answer)(question="b", context=[])
    assert first.facts == [] and first.has_facts is False and isinstance(first.count, int)
    assert first.toDict() == again.toDict()
    assert other.answer.startswith("fake answer ") and 0.0 <= other.confidence <= 1.0


def test_instruction_decides_behaviour():
    def answer(call: FakeCall) -> dict[str, object]:
        good = "verbatim" in call.instruction
        return {"answer": "Oslo" if good else "somewhere", "confidence": 0.9}

    engine = FakeEngine(skills=[Skill(("answer",), answer)])
    vague = dspy.Predict(Answer)
    better = dspy.Predict(Answer.with_instructions("Quote the place verbatim from the context."))
    with use_fake_lm(engine=engine):
        assert vague(question="Where?", context=["Oslo"]).answer == "somewhere"
        assert better(question="Where?", context=["Oslo"]).answer == "Oslo"
    assert [c.instruction.startswith("Quote") for c in engine.calls] == [False, True]


def test_demos_come_before_the_request_and_are_not_parsed_as_inputs():
    predict = dspy.Predict(Answer)
    predict.demos = [dspy.Example(question="demo q", context=["demo"], answer="demo a", confidence=1.0)]
    with use_fake_lm() as engine:
        predict(question="real q", context=["real"])
    (call,) = engine.calls
    assert [m["role"] for m in call.messages] == ["system", "user", "assistant", "user"]
    assert call.inputs["question"] == "real q"
    assert "demo q" in call.messages[1]["content"]


def test_json_adapter_prompt_gets_a_json_reply():
    skill = Skill(("facts",), lambda c: {"facts": ["f1"], "has_facts": True, "count": 1})
    with use_fake_lm([skill]) as engine, dspy.context(adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Facts)(turn="t")
    assert pred.facts == ["f1"] and pred.count == 1
    assert engine.calls[0].inputs == {"turn": "t"}


def test_unparseable_reply_fails_the_adapter_after_its_json_fallback():
    def garbage(call: FakeCall) -> dict[str, object]:
        raise FakeReply("I cannot answer in that format.")

    with use_fake_lm([Skill(("answer",), garbage)]) as engine, pytest.raises(AdapterParseError):
        dspy.Predict(Answer)(question="q", context=[])
    assert engine.counts["answer"] == 2  # ChatAdapter, then its JSONAdapter fallback


def test_timeout_raises_the_error_a_server_timeout_raises():
    def slow(call: FakeCall) -> dict[str, object]:
        raise FakeTimeout("took too long")

    with use_fake_lm([Skill(("answer",), slow)]), pytest.raises(LMTimeoutError, match="took too long"):
        dspy.Predict(Answer)(question="q", context=[])


def test_timeout_is_retried_when_the_lm_retries():
    attempts = []

    def flaky(call: FakeCall) -> dict[str, object]:
        attempts.append(1)
        if len(attempts) < 2:
            raise FakeTimeout()
        return {"answer": "ok", "confidence": 1.0}

    lm = fake_lm([Skill(("answer",), flaky)], num_retries=2)
    with dspy.context(lm=lm):
        assert dspy.Predict(Answer)(question="q", context=[]).answer == "ok"
    assert len(attempts) == 2


def test_on_registers_skills_in_order_and_as_decorator():
    engine = FakeEngine()

    @engine.on(("answer", "confidence"), name="both")
    def both(call: FakeCall) -> dict[str, object]:
        return {"answer": "both", "confidence": 1.0}

    engine.on(("answer",), lambda c: {"answer": "single"})
    with use_fake_lm(engine=engine):
        assert dspy.Predict(Answer)(question="q", context=[]).answer == "both"
        assert dspy.Predict("question -> answer")(question="q").answer == "single"
    assert engine.counts == {"both": 1, "answer": 1}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # a raw message list, as another library sends one
def test_a_skill_claims_prompts_no_adapter_wrote_by_when():
    def raw(call: FakeCall) -> dict[str, object]:
        raise FakeReply('{"facts": ["Odalys keeps bees."]}')

    engine = FakeEngine([Skill((), raw, name="raw", when=lambda call: call.messages[-1]["content"].startswith("Input:"))])
    engine.on(("answer",), lambda c: {"answer": "adapter"})
    lm = fake_lm(engine=engine)
    assert lm(messages=[{"role": "user", "content": "Input:\nuser: Odalys: I keep bees."}]) == [
        '{"facts": ["Odalys keeps bees."]}']
    with dspy.context(lm=lm):  # an adapter's prompt is not claimed by the raw skill
        assert dspy.Predict("question -> answer")(question="Input: what?").answer == "adapter"
    assert engine.counts == {"raw": 1, "answer": 1}


def test_usage_counts_whitespace_tokens():
    lm = fake_lm([Skill(("answer",), lambda c: {"answer": "one two three"})])
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="q")
    usage = lm.history[-1]["usage"]
    assert usage["completion_tokens"] == len("[[ ## answer ## ]]\none two three\n\n[[ ## completed ## ]]".split())
    prompt = sum(len(m["content"].split()) for m in lm.engine.calls[0].messages)
    assert usage["prompt_tokens"] == prompt


def test_thread_safe_under_dspy_parallel():
    engine = FakeEngine(skills=[Skill(("answer",), lambda c: {"answer": c.inputs["question"].upper()})])
    predict = dspy.Predict("question -> answer")
    questions = [f"q{i}" for i in range(24)]
    with use_fake_lm(engine=engine):
        results = dspy.Parallel(num_threads=6)([(predict, {"question": q}) for q in questions])
    assert [r.answer for r in results] == [q.upper() for q in questions]
    assert engine.counts["answer"] == 24
    assert sorted(c.inputs["question"] for c in engine.calls) == sorted(questions)


def test_thread_safe_with_plain_threads():
    engine = FakeEngine()
    lm = fake_lm(engine=engine)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with dspy.context(lm=lm):
                for j in range(5):
                    dspy.Predict("question -> answer")(question=f"{i}-{j}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(engine.calls) == 40 and engine.counts[DEFAULT_SKILL] == 40
