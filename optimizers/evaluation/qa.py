"""`MemoryQA`: a memory program as DSPy's optimizers expect it, `program(**example.inputs()) -> Prediction`.

    qa = MemoryQA(Mem0Memory())
    qa(conversation="conv-26@3f9a1c", question=question).answer

`forward(conversation, question)` memorizes the conversation (once) and answers the question. The memorized
state is cached per (conversation key, write-path fingerprint) in a `QAContext` held OUTSIDE the module's
state: the context is not a parameter (it is never saved) and deep copies share it (DSPy deep-copies programs
freely and runs one program object in many threads; a memorized state must survive both). The fingerprint covers the instructions and demos of the predictors the write
path uses (learned from the first memorization's trace) plus the task LM's name, so rewriting the answer
prompt reuses the state, while rewriting the extraction prompt memorizes again. Every run feeds the context's
replay memo (see `QAContext.replay`). Before any work, `forward` checks the
context's LM-call budget (`BudgetExhausted` stops the optimizer that called it), and with a score book
(`scorebook.py`) tags its prediction with the fingerprint of the program that made it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.data import Conversation, Question
from memtrace_opt.memory.values import to_jsonable
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.evaluation.examples import resolve_conversation, resolve_question
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo, lm_name
from memtrace_opt.optimizers.evaluation.scorebook import FINGERPRINT_ATTR, ScoreBook
from memtrace_opt.programs.base import MemoryProgram, MemoryState
from memtrace_opt.tracing import MemoryWriter, OpEvent, Tracer
from memtrace_opt.tracing.session import replay_active

__all__ = ["QAContext", "MemoryQA", "unwrap_memory"]



@dataclass
class _Memorized:
    state: MemoryState
    trace: list[Any]  # DSPy trace entries (predictor, inputs, outputs) of the write path's LM calls


@dataclass
class QAContext:
    """Shared by every copy of a MemoryQA: the replay memo, the cached states, the budget.

    With `replay=False` (the default, what DSPy's optimizers get) every call runs live, exactly as plain DSPy
    would, and its DSPy trace is complete: the write path's trace entries are recorded with the state and
    added to the caller's trace each time the state is reused. Traced runs still feed the memo. With
    `replay=True` both paths replay unchanged op calls from the memo (no trace entries for those).
    """

    memo: ReplayMemo = field(default_factory=ReplayMemo)
    budget: LMBudget | None = None
    replay: bool = False
    max_states: int = 64
    states: OrderedDict[tuple[str, str], _Memorized] = field(default_factory=OrderedDict)
    write_predictors: set[str] | None = None
    memorizations: int = 0
    book: ScoreBook | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _building: dict[str, threading.Lock] = field(default_factory=dict, repr=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> QAContext:
        return self  # every copy of a MemoryQA shares its context (DSPy deep-copies programs freely)

    def __copy__(self) -> QAContext:
        return self

    def fork(self, **changes: Any) -> QAContext:
        """A new context starting from this one's states and a copy of its memo (nothing shared after)."""
        with self._lock:
            other = QAContext(memo=self.memo.copy(), replay=self.replay, max_states=self.max_states,
                              states=OrderedDict(self.states), write_predictors=set(self.write_predictors or ()) or None)
        for name, value in changes.items():
            setattr(other, name, value)
        return other

    def _fingerprint(self, program: MemoryProgram, names: set[str]) -> str:
        predictors = dict(program.named_predictors())
        parts = {
            name: [predictors[name].signature.instructions, to_jsonable([dict(d) for d in predictors[name].demos or []])]
            for name in sorted(names)
            if name in predictors
        }
        text = json.dumps([lm_name(), sorted(names), parts], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _cached(self, program: MemoryProgram, key: str) -> _Memorized | None:
        names = self.write_predictors
        if names is None:
            return None
        found = self.states.get((key, self._fingerprint(program, names)))
        if found is not None:
            self.states.move_to_end((key, self._fingerprint(program, names)))
        return found

    def memorized(self, program: MemoryProgram, key: str, conversation: Conversation) -> _Memorized:
        """The memorized state of `conversation` under `program`'s write-path instructions (built once)."""
        with self._lock:
            found = self._cached(program, key)
            if found is not None:
                return found
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:
            with self._lock:  # another thread may have built it meanwhile
                found = self._cached(program, key)
                if found is not None:
                    return found
            memorized, used = self._memorize(program, key, conversation)
            with self._lock:
                self.write_predictors = (self.write_predictors or set()) | used
                self.states[(key, self._fingerprint(program, self.write_predictors))] = memorized
                while len(self.states) > self.max_states:
                    self.states.popitem(last=False)
                self.memorizations += 1
            return memorized

    def _memorize(self, program: MemoryProgram, key: str, conversation: Conversation) -> tuple[_Memorized, set[str]]:
        state = program.new_state(conversation)
        sink = MemoryWriter()
        tracer = Tracer(program, sink)
        model = lm_name()
        entries: list[Any] = []
        control = self.memo.control(key, model) if self.replay else None
        with dspy.context(trace=entries), tracer.attached(state), replay_active(control):
            program.memorize(conversation, state)
        self.memo.learn(key, sink.events, model)
        used = {e.predictor for e in sink.events if isinstance(e, OpEvent) and e.predictor}
        return _Memorized(state, list(entries)), used

    def respond(self, program: MemoryProgram, key: str, question: Question, state: MemoryState) -> dspy.Prediction:
        """The read path (the store is not observed: reads are not recorded)."""
        sink = MemoryWriter()
        tracer = Tracer(program, sink)
        model = lm_name()
        control = self.memo.control(key, model) if self.replay else None
        with tracer.attached(None), replay_active(control):
            prediction = program.respond(question, state)
        self.memo.learn(key, sink.events, model)
        return prediction


class MemoryQA(dspy.Module):
    """A memory program answering one question of one conversation per call (see the module docstring)."""

    def __init__(self, memory: MemoryProgram, context: QAContext | None = None) -> None:
        super().__init__()
        self.memory = memory
        self.context = context if context is not None else QAContext()

    def forward(self, conversation: Conversation | str, question: Question | Mapping[str, Any] | str) -> dspy.Prediction:
        ctx = self.context
        if ctx.budget is not None:
            ctx.budget.check()
        key, conv = resolve_conversation(conversation)
        asked = resolve_question(question, conv)
        fingerprint = ctx.book.note(self.memory) if ctx.book is not None else None
        memorized = ctx.memorized(self.memory, key, conv)
        trace = dspy.settings.trace
        if trace is not None and memorized.trace:
            trace.extend(memorized.trace)  # the write path's calls belong to this example's trace
        prediction = ctx.respond(self.memory, key, asked, memorized.state)
        result = dspy.Prediction(answer=str(prediction.get("answer") or ""))
        if fingerprint is not None:
            setattr(result, FINGERPRINT_ATTR, fingerprint)
        return result


def unwrap_memory(program: dspy.Module) -> MemoryProgram:
    """The memory program inside a MemoryQA, or the program itself."""
    inner = program.memory if isinstance(program, MemoryQA) else program
    if not isinstance(inner, MemoryProgram):
        raise TypeError(f"expected a MemoryProgram or a MemoryQA, got {type(program).__name__}")
    return inner
