"""The trace hook: a DSPy callback plus a store observer that turn one conversation run into events.

Lineage comes from DSPy's `ACTIVE_CALL_ID` context variable, never from a "current op" global: inside
`on_*_start` it holds the caller's call id, and inside an operation's body (where the store reports its
writes and reads) it holds the id of the innermost module call. The tracer maps every active module call id
to its nearest enclosing operation, so a `dspy.Predict` inside an op, the LM call it makes and the store
writes it causes are all tied to that op, in whatever thread they run. Several tracers (one per
conversation) can run at once in different threads: DSPy's callbacks are per-context settings.

    tracer = Tracer(program, sink)
    state = program.new_state(conversation)
    with tracer.attached(state):
        program.memorize(conversation, state)
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.callback import ACTIVE_CALL_ID, BaseCallback

from memtrace_opt.memory.ops import ACTIVE_REPLAY, LMOperation, Operation
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import StoreEvent
from memtrace_opt.memory.values import canonical_json, to_jsonable
from memtrace_opt.tracing.events import EventSink, LMCallEvent, OpEvent, StoreRecord

__all__ = ["Tracer", "OpFailure", "predictor_names"]

log = logging.getLogger(__name__)

_HISTORY_SCAN = 64  # how far back an LM's history is searched for the entry of a call that just ended


@dataclass(frozen=True)
class OpFailure:
    """An operation call that raised or returned fallback outputs with `error` set."""

    seq: int
    op: str
    error: str


@dataclass
class _OpCall:
    call_id: str
    seq: int
    op: str
    parent: str | None
    predictor: str | None
    instructions: str | None
    inputs: dict[str, Any]
    content_key: str
    writes_store: bool
    lm_backed: bool
    started_at: float
    role: str | None = None


@dataclass
class _LMCall:
    op: str | None
    model: str
    messages: list[dict[str, Any]]
    lm: Any
    started: float


def predictor_names(program: dspy.Module) -> dict[int, str]:
    """id(predictor) -> its dotted name in `program.named_predictors()`."""
    return {id(predictor): name for name, predictor in program.named_predictors()}


class Tracer(BaseCallback):
    """Records the operations, LM calls and store events of ONE conversation run into `sink`.

    Contract: never raises into the program (DSPy logs callback errors; store observers must not raise);
    thread-safe; assigns `seq` in call-start order, from 0. `answer_op(question_id)` is the call id of the
    last answering op (role "answers", or named `*.answer`) whose `question` input named that question.
    """

    def __init__(self, program: dspy.Module, sink: EventSink) -> None:
        self.sink = sink
        self._names = predictor_names(program)
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._ops: dict[str, _OpCall] = {}
        self._enclosing: dict[str, str | None] = {}  # active call id -> nearest enclosing op call id
        self._lm: dict[str, _LMCall] = {}
        self._answer_ops: dict[str, str] = {}
        self.op_counts: Counter[str] = Counter()
        self.failures: list[OpFailure] = []
        self.lm_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reused: Counter[str] = Counter()
        self.rerun: Counter[str] = Counter()

    # attaching ---------------------------------------------------------------------------------------
    @contextmanager
    def attached(self, state: Any = None) -> Iterator[Tracer]:
        """Within the block, DSPy calls in this context report to the tracer (ahead of any callbacks already
        set) and so does `state.store` if a state is given."""
        existing = [cb for cb in (dspy.settings.get("callbacks") or []) if cb is not self]
        store = getattr(state, "store", None)
        with dspy.context(callbacks=[self, *existing]):
            if store is not None:
                store.subscribe(self)
            try:
                yield self
            finally:
                if store is not None:
                    store.unsubscribe(self)

    def answer_op(self, question_id: str) -> str | None:
        return self._answer_ops.get(question_id)

    def _nearest(self, call_id: str | None) -> str | None:
        return None if call_id is None else self._enclosing.get(call_id)

    # modules -----------------------------------------------------------------------------------------
    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        parent = self._nearest(ACTIVE_CALL_ID.get())
        if not isinstance(instance, Operation):
            self._enclosing[call_id] = parent
            return
        kwargs = dict(inputs.get("kwargs") or {})
        if inputs.get("args"):
            kwargs["args"] = list(inputs["args"])
        jsonable = to_jsonable(kwargs)
        instructions = instance.instruction
        if type(instance).content_key is Operation.content_key:
            # == Operation.content_key(kwargs), without converting the already-JSON inputs a second time
            parts = [instance.op_name, instructions, instance._demos(), jsonable]
            key = hashlib.sha256(canonical_json(parts).encode()).hexdigest()
        else:
            key = instance.content_key(kwargs)
        predictor = self._names.get(id(instance.predict)) if isinstance(instance, LMOperation) else None
        call = _OpCall(
            call_id=call_id,
            seq=next(self._seq),
            op=instance.op_name or type(instance).__name__,
            parent=parent,
            predictor=predictor,
            instructions=instructions,
            inputs=jsonable,
            content_key=key,
            writes_store=bool(instance.writes_store),
            role=instance.role.value if instance.role is not None else None,
            lm_backed=isinstance(instance, LMOperation),
            started_at=time.time(),
        )
        with self._lock:
            self._ops[call_id] = call
            self._enclosing[call_id] = call_id

    def on_module_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        with self._lock:
            self._enclosing.pop(call_id, None)
            call = self._ops.pop(call_id, None)
        if call is None:
            return
        ended = time.time()
        replayed = getattr(outputs, "_memtrace_replayed", None) if outputs is not None else None
        out = to_jsonable(outputs) if outputs is not None else None
        if out is not None and not isinstance(out, dict):
            out = {"output": out}
        error = None
        if exception is not None:
            error = f"{type(exception).__name__}: {exception}"
        elif out is not None and isinstance(out.get("error"), str) and out["error"]:
            error = out["error"]
        self.sink.emit(
            OpEvent(
                call_id=call.call_id,
                seq=call.seq,
                op=call.op,
                parent_call_id=call.parent,
                predictor=call.predictor,
                instructions=call.instructions,
                inputs=call.inputs,
                outputs=out,
                error=error,
                started_at=call.started_at,
                ended_at=ended,
                replayed=replayed,
                content_key=call.content_key,
                writes_store=call.writes_store,
                role=call.role,
            )
        )
        question_id = _question_of(call) if answers(call.op, call.role) else None
        with self._lock:
            self.op_counts[call.op] += 1
            if error is not None:
                self.failures.append(OpFailure(call.seq, call.op, error))
            if replayed:
                self.reused[call.op] += 1
            elif call.lm_backed and ACTIVE_REPLAY.get() is not None:
                self.rerun[call.op] += 1
            if question_id is not None:
                self._answer_ops[question_id] = call.call_id

    # LM calls ----------------------------------------------------------------------------------------
    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        op = self._nearest(ACTIVE_CALL_ID.get())
        messages = inputs.get("messages")
        if messages is None and inputs.get("prompt") is not None:
            messages = [{"role": "user", "content": inputs["prompt"]}]
        call = _LMCall(op, str(getattr(instance, "model", "?")), to_jsonable(messages or []), instance, time.perf_counter())
        with self._lock:
            self._lm[call_id] = call
            self._enclosing[call_id] = op

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        seconds = 0.0
        with self._lock:
            self._enclosing.pop(call_id, None)
            call = self._lm.pop(call_id, None)
        if call is None:
            return
        prompt_tokens, completion_tokens, cached, paid = _usage(call.lm, outputs)
        seconds = time.perf_counter() - call.started if paid is None else paid
        self.sink.emit(
            LMCallEvent(
                call_id=call_id,
                op_call_id=call.op,
                model=call.model,
                messages=call.messages,
                response=_response_text(outputs),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                seconds=round(seconds, 6),
                cached=cached,
                error=None if exception is None else f"{type(exception).__name__}: {exception}",
            )
        )
        with self._lock:
            self.lm_calls += 1
            self.prompt_tokens += prompt_tokens or 0
            self.completion_tokens += completion_tokens or 0

    # the store ---------------------------------------------------------------------------------------
    def on_store_event(self, event: StoreEvent) -> None:
        try:
            op = self._nearest(ACTIVE_CALL_ID.get())
            if op is None and event.action != "read":
                log.warning("store %s of %s outside any operation", event.action, event.unit.ref)
            self.sink.emit(
                StoreRecord(
                    op_call_id=op,
                    action=event.action,
                    unit=_unit_dict(event.unit),
                    previous=_unit_dict(event.previous) if event.previous is not None else None,
                    store_id=event.store_id,
                )
            )
        except Exception:  # noqa: BLE001 - an observer must never break the store
            log.exception("tracer failed to record a store event")


def _unit_dict(unit: Any) -> dict[str, Any]:
    data = unit.to_dict()
    if data.get("metadata"):
        data["metadata"] = to_jsonable(data["metadata"])
    return data


def answers(op_name: str, role: str | None) -> bool:
    """Whether an op writes the answer to its question: it declares so (role "answers"), or, declaring no role,
    its name ends in ".answer" (the naming rule before ops declared roles)."""
    return role == OpRole.ANSWERS.value if role is not None else op_name.endswith(".answer")


def _question_of(call: _OpCall) -> str | None:
    question = call.inputs.get("question")
    if isinstance(question, dict) and isinstance(question.get("$question"), str):
        return question["$question"][2:]
    return None


def _response_text(outputs: Any) -> str | None:
    if not outputs:
        return None
    first = outputs[0] if isinstance(outputs, list) else outputs
    if isinstance(first, dict):
        return str(first.get("text"))
    return str(first)


def _usage(lm: Any, outputs: Any) -> tuple[int | None, int | None, bool, float | None]:
    """(prompt tokens, completion tokens, cached, seconds paid) of the LM call that returned `outputs`, from the
    LM's history entry for it (found by identity; None counts when history is off). Seconds paid: a reply an
    earlier sitting paid for, charged again (`lm.usage`), is the live call it was then, with its seconds; else
    None (measured here)."""
    history = getattr(lm, "history", None)
    if not history or outputs is None:
        return None, None, False, None
    try:
        entry = next((e for e in reversed(history[-_HISTORY_SCAN:]) if e.get("outputs") is outputs), None)
    except Exception:  # noqa: BLE001 - a concurrent trim of the history list
        entry = None
    if entry is None:
        return None, None, False, None
    usage = entry.get("usage") or {}
    paid = entry.get("seconds")
    if usage:
        return (_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")), False,
                float(paid) if isinstance(paid, int | float) else None)
    original = getattr(entry.get("response"), "usage", None)  # a cache hit keeps the original usage here
    if original is None:
        return None, None, False, None
    get = original.get if isinstance(original, dict) else lambda k: getattr(original, k, None)
    prompt = get("input_tokens") if get("input_tokens") is not None else get("prompt_tokens")
    completion = get("output_tokens") if get("output_tokens") is not None else get("completion_tokens")
    return _int(prompt), _int(completion), True, None


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None
