from __future__ import annotations

from typing import Any

import dspy
import pytest

from memtrace_opt.memory import ACTIVE_REPLAY, LMOperation, Operation, OperationFailed
from memtrace_opt.testing import FakeCall, FakeReply, FakeTimeout, Skill, use_fake_lm


class ShoutSig(dspy.Signature):
    """Repeat the text in capitals."""

    text: str = dspy.InputField()
    shout: str = dspy.OutputField()


class Shout(LMOperation):
    op_name = "test.shout"
    signature = ShoutSig

    def run(self, text: str) -> dspy.Prediction:
        try:
            return dspy.Prediction(shout=self.ask(text=text).shout)
        except OperationFailed as error:
            return dspy.Prediction(shout="", error=str(error))


class Count(Operation):
    op_name = "test.count"

    def run(self, words: list[str]) -> dspy.Prediction:
        return dspy.Prediction(count=len(words))


def test_unparseable_reply_is_retried_once_then_recorded_as_the_ops_failure():
    attempts: list[FakeCall] = []

    def garbled(call: FakeCall) -> dict[str, Any]:
        attempts.append(call)
        raise FakeReply("no fields here at all")

    with use_fake_lm([Skill(outputs=("shout",), fn=garbled)]):
        result = Shout()(text="hi")
    assert result.shout == ""
    assert "did not parse twice" in result.error and "test.shout" in result.error
    # DSPy's ChatAdapter falls back to its JSON adapter once per attempt: 2 attempts, each at most 2 calls.
    assert 2 <= len(attempts) <= 4


def test_retry_succeeds_when_the_second_reply_parses():
    replies = iter([FakeReply("garbage"), FakeReply("garbage"), {"shout": "HI"}])

    def flaky(call: FakeCall) -> dict[str, Any]:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    with use_fake_lm([Skill(outputs=("shout",), fn=flaky)]):
        result = Shout()(text="hi")
    assert result.shout == "HI" and result.get("error") is None


def test_server_timeout_becomes_a_recorded_failure_not_a_crash():
    def slow(call: FakeCall) -> dict[str, Any]:
        raise FakeTimeout("upstream timed out")

    with use_fake_lm([Skill(outputs=("shout",), fn=slow)]):
        result = Shout()(text="hi")
    assert result.shout == "" and "test.shout" in result.error


class Memo:
    def __init__(self, answers: dict[str, tuple[dict[str, Any], str]]) -> None:
        self.answers = answers
        self.keys: list[str] = []

    def lookup(self, op: Operation, key: str):
        self.keys.append(key)
        return self.answers.get(key)


def test_active_replay_answers_instead_of_running_and_marks_the_prediction():
    shout = Shout()
    key = shout.content_key({"text": "hi"})
    memo = Memo({key: ({"shout": "RECORDED"}, "memo")})
    token = ACTIVE_REPLAY.set(memo)
    try:
        with use_fake_lm([Skill(outputs=("shout",), fn=lambda call: {"shout": "LIVE"})]) as engine:
            hit = shout(text="hi")
            miss = shout(text="other")
    finally:
        ACTIVE_REPLAY.reset(token)
    assert hit.shout == "RECORDED" and hit._memtrace_replayed == "memo"
    assert miss.shout == "LIVE"
    assert len(engine.calls_for("shout")) == 1


def test_content_key_depends_on_instruction_and_inputs_only():
    a, b = Shout(), Shout()
    assert a.content_key({"text": "x"}) == b.content_key({"text": "x"})
    assert a.content_key({"text": "x"}) != a.content_key({"text": "y"})
    b.predict.signature = b.predict.signature.with_instructions("Whisper it.")
    assert a.content_key({"text": "x"}) != b.content_key({"text": "x"})
    assert a.instruction == "Repeat the text in capitals." and Count().instruction is None


def test_store_writing_ops_ignore_the_replay_control():
    class Write(Operation):
        op_name = "test.write"
        writes_store = True

        def run(self) -> dspy.Prediction:
            return dspy.Prediction(done=True)

    memo = Memo({})
    token = ACTIVE_REPLAY.set(memo)
    try:
        assert Write()().done is True
        assert Count()(words=["a", "b"]).count == 2
    finally:
        ACTIVE_REPLAY.reset(token)
    assert len(memo.keys) == 1  # only the non-writing op asked


@pytest.fixture(autouse=True)
def _no_replay_leak():
    yield
    assert ACTIVE_REPLAY.get() is None
