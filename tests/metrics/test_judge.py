"""The LLM judge under a scripted LM engine written here (no network, no model)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402
from dspy import lm15  # noqa: E402

from memtrace_opt.data import load_sample  # noqa: E402
from memtrace_opt.metrics import JudgeResult, LLMJudge, parse_verdict  # noqa: E402


class ScriptedEngine:
    """Replies with the given texts in order (repeating the last); records every request."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[lm15.Request] = []

    def complete(self, request: lm15.Request) -> lm15.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return lm15.Response(
            id=None,
            model="scripted-judge",
            message=lm15.Message.assistant([lm15.TextPart(reply)]),
            finish_reason="stop",
            usage=lm15.Usage(input_tokens=10, output_tokens=5, total_tokens=15),
        )

    def stream(self, request: lm15.Request):  # pragma: no cover - the judge never streams
        raise NotImplementedError

    def close(self) -> None:
        pass


def reply(verdict: str, reason: str = "Same city.") -> str:
    return f"[[ ## reason ## ]]\n{reason}\n\n[[ ## verdict ## ]]\n{verdict}\n\n[[ ## completed ## ]]"


def lm_for(engine: ScriptedEngine) -> dspy.LM:
    return dspy.LM("scripted/judge", engine=engine, cache=False)


def test_correct_verdict_and_the_prompt_it_saw() -> None:
    engine = ScriptedEngine(reply("CORRECT"))
    judge = LLMJudge()
    result = judge.judge("Where does Maya live?", "Denver", "She lives in Denver now.", lm=lm_for(engine))
    assert result == JudgeResult(correct=True, reason="Same city.")
    assert result.score == 1.0 and (judge.calls, judge.failures) == (1, 0)
    (request,) = engine.requests
    prompt = str(request.system) + "\n".join(m.text for m in request.messages)
    assert "Be generous" in prompt
    assert "Where does Maya live?" in prompt and "She lives in Denver now." in prompt and "Denver" in prompt
    assert dspy.settings.lm is None  # the LM was only in force inside the call


def test_wrong_and_lenient_verdict_spellings() -> None:
    judge = LLMJudge(lm=lm_for(ScriptedEngine(reply("WRONG", "Different city."), reply("Correct."))))
    assert judge.judge("q", "Denver", "Boston").correct is False
    assert judge.judge("q", "Denver", "Denver").correct is True  # "Correct." still parses
    assert (judge.calls, judge.failures) == (2, 0)


def test_unparseable_reply_is_a_counted_failure_not_a_crash() -> None:
    engine = ScriptedEngine("I think it is probably fine?")  # no fields, for chat and JSON attempts alike
    judge = LLMJudge()
    result = judge.judge("q", "Denver", "Denver", lm=lm_for(engine))
    assert result.correct is None and result.score is None
    assert result.error is not None and "AdapterParseError" in result.error
    assert (judge.calls, judge.failures) == (1, 1)


def test_unknown_verdict_word_and_engine_errors_are_failures() -> None:
    judge = LLMJudge(lm=lm_for(ScriptedEngine(reply("MAYBE"), RuntimeError("server went away"))))
    first = judge.judge("q", "g", "p")
    assert first.correct is None and "unrecognized verdict 'MAYBE'" in (first.error or "")
    second = judge.judge("q", "g", "p")
    assert second.correct is None and "server went away" in (second.error or "")
    assert judge.failures == 2


def test_judge_question_uses_the_abstention_gold() -> None:
    (conversation,) = load_sample().conversations
    adversarial = next(q for q in conversation.questions if q.abstention)
    engine = ScriptedEngine(reply("CORRECT", "Both decline."))
    result = LLMJudge().judge_question(adversarial, "Not mentioned.", lm=lm_for(engine))
    assert result.correct is True
    assert "Not mentioned in the conversation" in "\n".join(m.text for m in engine.requests[0].messages)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("CORRECT", True),
        ("correct.", True),
        ("**Correct**", True),
        ("WRONG", False),
        ("Incorrect", False),
        ("not correct", False),
        ("maybe", None),
        ("", None),
    ],
)
def test_parse_verdict(text: str, verdict: bool | None) -> None:
    assert parse_verdict(text) is verdict
