"""What a memory program will ask its model on a data slice: a dry run under an instant scripted fake LM.

The program runs over every conversation (write path, then each question, then the judge where asked) against
`memtrace_opt.testing`'s fake engine with the built-in systems' skills: no tracing, no files, no real model.
Each call is counted by the prompt's words and the scripted reply's words, with the call's reply cap; `Rates`
turn the counts into seconds. Any `MemoryProgram` (a user's own too) can be counted this way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.data import Conversation, Question
from memtrace_opt.estimate._rates import Rates, words
from memtrace_opt.lm.chat_prompt import call_shape
from memtrace_opt.testing.fake_lm import FakeEngine, fake_lm

__all__ = ["CallCost", "Cost", "ConversationWork", "Work", "count_work"]


@dataclass(frozen=True)
class CallCost:
    """One LM call of the dry run: which prompt (its shape, `chat_prompt.call_shape`: its output fields), its
    prompt's words, the scripted reply's words and the call's reply cap in tokens (None: none)."""

    operation: str
    prompt_words: int
    reply_words: int
    reply_cap: int | None = None


@dataclass(frozen=True)
class Cost:
    """LM calls, tokens and seconds at given rates; costs add up (`+`) and scale (`*`)."""

    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    seconds: float = 0.0

    @classmethod
    def of(cls, calls: Iterable[CallCost], rates: Rates) -> Cost:
        total = cls()
        for call in calls:
            prompt, reply = rates.tokens(call.prompt_words, call.reply_words, call.reply_cap, call.operation)
            total += cls(1, prompt, reply, rates.call_seconds(call.prompt_words, call.reply_words, call.reply_cap,
                                                              call.operation))
        return total

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.calls + other.calls, self.prompt_tokens + other.prompt_tokens,
                    self.completion_tokens + other.completion_tokens, self.seconds + other.seconds)

    def __mul__(self, factor: float) -> Cost:
        return Cost(self.calls * factor, self.prompt_tokens * factor, self.completion_tokens * factor,
                    self.seconds * factor)


@dataclass(frozen=True)
class ConversationWork:
    """The dry run of one conversation: its write path's calls, each question's read-path calls and judge calls."""

    sample_id: str
    sessions: int
    write: tuple[CallCost, ...]
    answers: Mapping[str, tuple[CallCost, ...]]
    judged: Mapping[str, tuple[CallCost, ...]] = field(default_factory=dict)

    def read(self, question_ids: Iterable[str] | None = None) -> list[CallCost]:
        ids = self.answers if question_ids is None else question_ids
        return [call for qid in ids for call in self.answers.get(qid, ())]

    def judge(self, question_ids: Iterable[str] | None = None) -> list[CallCost]:
        ids = self.judged if question_ids is None else question_ids
        return [call for qid in ids for call in self.judged.get(qid, ())]


@dataclass(frozen=True)
class Work:
    """The dry run of a slice, by conversation id."""

    conversations: Mapping[str, ConversationWork]

    def write(self, sample_ids: Iterable[str]) -> list[CallCost]:
        return [call for sid in sample_ids if sid in self.conversations for call in self.conversations[sid].write]

    def read(self, conversations: Sequence[Conversation]) -> list[CallCost]:
        """The read-path calls of `conversations`' questions (each cut to a split's questions)."""
        return [call for c in conversations if c.sample_id in self.conversations
                for call in self.conversations[c.sample_id].read(q.question_id for q in c.questions)]

    def judge(self, conversations: Sequence[Conversation]) -> list[CallCost]:
        return [call for c in conversations if c.sample_id in self.conversations
                for call in self.conversations[c.sample_id].judge(q.question_id for q in c.questions)]

    def operations(self) -> dict[str, list[CallCost]]:
        """Every call by its operation (output fields)."""
        found: dict[str, list[CallCost]] = {}
        for work in self.conversations.values():
            for call in [*work.write, *work.read()]:
                found.setdefault(call.operation, []).append(call)
        return found


class _CountingEngine(FakeEngine):
    """The fake engine, counting each call into `bucket`."""

    bucket: list[CallCost]
    default_cap: int | None = None

    def complete(self, request: Any) -> Any:
        response = super().complete(request)
        with self._lock:
            call = self.calls[-1]
        reply = int(response.usage.output_tokens or 0)  # the fake engine counts words
        cap = getattr(request.config, "max_tokens", None) or self.default_cap
        self.bucket.append(CallCost(call_shape(call.messages), words(m["content"] for m in call.messages), reply, cap))
        return response


def count_work(program: Any, conversations: Sequence[Conversation], *, judge: bool = False,
               reply_cap: int | None = None) -> Work:
    """Dry-run `program` (a copy) over `conversations` under an instant scripted fake LM; `judge`: the LLM
    judge grades each answer too (abstention questions are scored by rule, as in a run). `reply_cap`: the cap of
    a call that sets none (the task role's `max_tokens`)."""
    from memtrace_opt.metrics import LLMJudge
    from memtrace_opt.testing.skills import default_skills

    engine = _CountingEngine(skills=default_skills())
    engine.bucket, engine.default_cap = [], reply_cap
    lm = fake_lm(engine=engine, name=f"fake/dry-run-{uuid.uuid4().hex[:8]}")
    copy = program.deepcopy()
    grader = LLMJudge() if judge else None
    found: dict[str, ConversationWork] = {}
    with dspy.context(lm=lm, callbacks=[]):
        for conversation in conversations:
            state = copy.new_state(conversation)
            copy.memorize(conversation, state)
            write, engine.bucket = engine.bucket, []
            answers: dict[str, tuple[CallCost, ...]] = {}
            judged: dict[str, tuple[CallCost, ...]] = {}
            for question in conversation.questions:
                answer = _answer(copy, question, state)
                answers[question.question_id], engine.bucket = tuple(engine.bucket), []
                if grader is not None and not question.abstention:
                    grader.judge_question(question, answer, lm=lm)
                    judged[question.question_id], engine.bucket = tuple(engine.bucket), []
            found[conversation.sample_id] = ConversationWork(conversation.sample_id, len(conversation.sessions),
                                                             tuple(write), answers, judged)
    return Work(found)


def _answer(program: Any, question: Question, state: Any) -> str:
    try:
        prediction = program.respond(question, state)
    except Exception:  # noqa: BLE001 - as in a run: one question's failure leaves the others
        return ""
    return str(prediction.get("answer") or "") if prediction is not None else ""
