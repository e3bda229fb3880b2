"""Helpers for the memory-system tests: small conversations and a callback that records which operations ran
(and what they returned). Imported by the tests as a plain module (tests have no packages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dspy.utils.callback import BaseCallback

from memtrace_opt.data import Conversation, Question, Session, Turn
from memtrace_opt.memory.ops import Operation


@dataclass
class OpCall:
    op_name: str
    inputs: dict[str, Any]
    outputs: Any = None
    exception: Exception | None = None


@dataclass
class OpRecorder(BaseCallback):
    """Collects every Operation call in start order: `names` and `calls` (with outputs once ended)."""

    calls: list[OpCall] = field(default_factory=list)
    _open: dict[str, OpCall] = field(default_factory=dict)

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        if isinstance(instance, Operation):
            call = OpCall(instance.op_name, dict(inputs))
            self.calls.append(call)
            self._open[call_id] = call

    def on_module_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        call = self._open.pop(call_id, None)
        if call is not None:
            call.outputs, call.exception = outputs, exception

    @property
    def names(self) -> list[str]:
        return [call.op_name for call in self.calls]

    def of(self, op_name: str) -> list[OpCall]:
        return [call for call in self.calls if call.op_name == op_name]

    def clear(self) -> None:
        self.calls.clear()


def make_conversation(sessions: list[tuple[str, list[tuple[str, str]]]], questions: list[Question] | None = None,
                      sample_id: str = "tiny") -> Conversation:
    """A conversation from [(date_time, [(speaker, text), ...]), ...]."""
    built = []
    for s, (date_time, turns) in enumerate(sessions, start=1):
        built.append(Session(
            index=s,
            date_time=date_time,
            turns=tuple(Turn(f"D{s}:{t}", speaker, text, s, date_time) for t, (speaker, text) in enumerate(turns, start=1)),
        ))
    speakers = tuple(dict.fromkeys(turn.speaker for session in built for turn in session.turns))
    return Conversation(sample_id, speakers, tuple(built), tuple(questions or ()), "test")


def make_question(text: str, answer: str = "x", qid: str = "q1", evidence: tuple[str, ...] = ()) -> Question:
    return Question(qid, text, answer, "single-hop", 4, evidence)


TINY_SESSIONS = [
    ("10:00 am on 1 May, 2023", [
        ("Alice", "I adopted a grey kitten named Pepper from the rescue downtown."),
        ("Bob", "Pepper sounds adorable, kittens from the rescue make great pets."),
        ("Alice", "Pepper already climbs the bookshelf in the living room every morning."),
    ]),
    ("4:30 pm on 20 May, 2023", [
        ("Bob", "I started rowing lessons at the lake club near the harbour."),
        ("Alice", "Rowing at the lake club sounds like great exercise for the summer."),
        ("Bob", "The rowing coach says my stroke improved a lot this week."),
    ]),
]
