"""Trace one conversation run end to end: the entry point the runner calls.

    result = trace_conversation(program, conversation, conversation.questions, writer=EventWriter(path),
                                meta={"models": {"task": "fake/test"}, "run_id": "r1"})
    result.answers["q1"], result.graph()

The run emits `run_start`, one `turn` event per turn, runs the write path session by session (with
`on_session_done(i)` after session i, 0-based), then for each question a `question` event, the read path and an
`answer` event, and finally `run_end`. A question whose read path raises is recorded (answer "", `error` set)
and the others go on; an exception in the write path propagates (every event before it is already written).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dspy
import networkx as nx

from memtrace_opt import progress
from memtrace_opt.data import Conversation, Question
from memtrace_opt.memory.ops import ACTIVE_REPLAY, ReplayControl
from memtrace_opt.memory.values import to_jsonable
from memtrace_opt.tracing.events import (
    AnswerEvent,
    Event,
    EventSink,
    QuestionEvent,
    RunEnd,
    RunStart,
    TurnEvent,
)
from memtrace_opt.tracing.hook import OpFailure, Tracer

__all__ = ["TracedConversation", "trace_conversation", "program_instructions", "replay_active"]

log = logging.getLogger(__name__)

SessionDone = Callable[[int], None]
QuestionDone = Callable[[Question, str, "dspy.Prediction | None"], None]


@dataclass
class TracedConversation:
    """What one traced conversation run produced.

    `answers` / `errors` are keyed by question id (`errors` only for questions whose read path raised or
    whose answer op failed); `predictions` holds the read path's prediction (None where it raised).
    `reused_ops` counts op calls answered from a replay record (memo or forced), `rerun_ops` the LM-backed
    op calls that ran live during a replay (the cost of the change); both are 0 outside a replay, and
    `reused_by_op` / `rerun_by_op` break them down by op name.
    """

    sample_id: str
    answers: dict[str, str]
    predictions: dict[str, dspy.Prediction | None]
    errors: dict[str, str]
    events: list[Event]
    op_counts: dict[str, int]
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    failures: list[OpFailure]
    reused_ops: int
    rerun_ops: int
    reused_by_op: dict[str, int] = field(default_factory=dict)
    rerun_by_op: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def graph(self) -> nx.MultiDiGraph:
        """The evolution graph of this run (built from `events`)."""
        from memtrace_opt.tracing.graph import build_graph

        return build_graph(self.events)


class _Collect:
    """Keeps every event and forwards it to the caller's sink."""

    def __init__(self, sink: EventSink | None) -> None:
        self.sink = sink
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)  # list.append is atomic: threads inside one run may emit concurrently
        if self.sink is not None:
            try:
                self.sink.emit(event)
            except Exception:  # noqa: BLE001 - a broken sink must not kill the run; the events are kept
                log.exception("event sink failed on a %s event", event.type)


def program_instructions(program: dspy.Module) -> dict[str, str]:
    """Predictor name -> instruction text in force, for every predictor of `program`."""
    return {name: predictor.signature.instructions for name, predictor in program.named_predictors()}


@contextmanager
def replay_active(control: ReplayControl | None) -> Iterator[None]:
    """Makes `control` the active replay control for the block (no-op for None)."""
    if control is None:
        yield
        return
    token = ACTIVE_REPLAY.set(control)
    try:
        yield
    finally:
        ACTIVE_REPLAY.reset(token)


def _run_start(program: Any, conversation: Conversation, meta: dict[str, Any]) -> RunStart:
    meta = dict(meta)
    meta.pop("instructions", None)  # the program's own instructions in force are recorded below
    if "config" not in meta and "program" in meta:
        meta["config"] = meta.pop("program")
    config = getattr(program, "config", None)
    config_dict = config.to_dict() if config is not None and hasattr(config, "to_dict") else to_jsonable(config)
    return RunStart(
        system=str(meta.pop("system", None) or getattr(program, "name", "") or type(program).__name__),
        dataset=str(meta.pop("dataset", None) or conversation.dataset),
        sample_id=str(meta.pop("sample_id", None) or conversation.sample_id),
        models=to_jsonable(meta.pop("models", {}) or {}),
        instructions=program_instructions(program),
        config=to_jsonable(meta.pop("config", None) or config_dict or {}),
        meta=to_jsonable(meta),
        started_at=time.time(),
    )


def _memorize(program: Any, conversation: Conversation, state: Any, on_session_done: SessionDone | None) -> None:
    from memtrace_opt.programs.base import MemoryProgram

    if type(program).memorize is MemoryProgram.memorize:  # the default: session by session, then finish
        for index, session in enumerate(conversation.sessions):
            program.memorize_session(session, state)
            progress.advance(progress.SESSION)
            if on_session_done is not None:
                on_session_done(index)
        program.finish_memorize(state)
        return
    program.memorize(conversation, state)  # a program with its own write path loop
    progress.advance(progress.SESSION, len(conversation.sessions))
    if on_session_done is not None:
        for index in range(len(conversation.sessions)):
            on_session_done(index)


def trace_conversation(
    program: Any,
    conversation: Conversation,
    questions: Sequence[Question] | None = None,
    *,
    writer: EventSink | None = None,
    meta: dict[str, Any] | None = None,
    replay: ReplayControl | None = None,
    on_session_done: SessionDone | None = None,
    on_question_done: QuestionDone | None = None,
) -> TracedConversation:
    """Run `program` over `conversation` (write path, then each of `questions`, default all of the
    conversation's) with the trace hook attached; events go to `writer` (if given) and to the result.

    `meta` may set `system`, `dataset`, `sample_id`, `models` (by role) and `config` (or `program`: the
    program's config dict); `instructions` is ignored (the instructions in force are read from the program);
    any other key is kept under `run_start.meta`. `replay` makes a replay control active for the run (see `replay.py`).
    `on_question_done(question, answer, prediction)` is called after each answer event.
    """
    began = time.perf_counter()
    questions = list(conversation.questions if questions is None else questions)
    sink = _Collect(writer)
    tracer = Tracer(program, sink)
    sink.emit(_run_start(program, conversation, meta or {}))
    for turn in conversation.turns():
        sink.emit(
            TurnEvent(
                dia_id=turn.dia_id,
                speaker=turn.speaker,
                text=turn.text,
                session_index=turn.session_index,
                timestamp=turn.timestamp,
                image_caption=turn.image_caption,
            )
        )
    answers: dict[str, str] = {}
    predictions: dict[str, dspy.Prediction | None] = {}
    errors: dict[str, str] = {}
    state = program.new_state(conversation)
    with tracer.attached(state), replay_active(replay):
        _memorize(program, conversation, state, on_session_done)
        for question in questions:
            sink.emit(QuestionEvent(question.to_dict()))
            prediction: dspy.Prediction | None = None
            error: str | None = None
            try:
                prediction = program.respond(question, state)
                answer = " ".join(str(prediction.get("answer") or "").split()) if prediction is not None else ""
                if prediction is not None and prediction.get("error"):
                    error = str(prediction.get("error"))
            except Exception as exc:  # noqa: BLE001 - one question's failure must not stop the others
                log.warning("%s: read path failed for %s: %s", conversation.sample_id, question.question_id, exc)
                answer, error = "", f"{type(exc).__name__}: {exc}"
            qid = question.question_id
            answers[qid], predictions[qid] = answer, prediction
            if error is not None:
                errors[qid] = error
            sink.emit(AnswerEvent(qid, answer, tracer.answer_op(qid), error))
            progress.advance(progress.QUESTION)
            if on_question_done is not None:
                on_question_done(question, answer, prediction)
    sink.emit(
        RunEnd(ended_at=time.time(), ops=sum(tracer.op_counts.values()), lm_calls=tracer.lm_calls,
               failures=len(tracer.failures))
    )
    return TracedConversation(
        sample_id=conversation.sample_id,
        answers=answers,
        predictions=predictions,
        errors=errors,
        events=sink.events,
        op_counts=dict(tracer.op_counts),
        lm_calls=tracer.lm_calls,
        prompt_tokens=tracer.prompt_tokens,
        completion_tokens=tracer.completion_tokens,
        failures=list(tracer.failures),
        reused_ops=sum(tracer.reused.values()),
        rerun_ops=sum(tracer.rerun.values()),
        reused_by_op=dict(tracer.reused),
        rerun_by_op=dict(tracer.rerun),
        seconds=time.perf_counter() - began,
    )
