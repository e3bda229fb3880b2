"""Long-Context memory: the whole conversation is the memory, trimmed from the oldest end to fit the window.

Write path, per session: `long_context.ingest` stores each turn as a unit ("Speaker: text", dated by its
session), then `long_context.trim` deletes the oldest turns while the transcript is over the budget. Read
path: `long_context.retrieve` passes every live turn through, `long_context.answer` answers over them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import dspy

from memtrace_opt.data import Conversation, Question, Session, Turn
from memtrace_opt.embed import get_embedder
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.index import SearchIndex
from memtrace_opt.memory.ops import Operation
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryStore, MemoryUnit
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import (
    PROMPT_OVERHEAD_TOKENS,
    AnswerOp,
    estimate_tokens,
    format_units,
    turn_line,
)
from memtrace_opt.programs.tunable import tunable

__all__ = ["LongContextConfig", "LongContextMemory", "IngestTurns", "TrimOldest", "PassThrough", "transcript_tokens"]

log = logging.getLogger(__name__)

TURN_KIND = "turn"


@dataclass(frozen=True)
class LongContextConfig(ProgramConfig):
    """`context_tokens` is the transcript budget: an 8,192-token window less 1,024 for the reply and the
    prompt's own overhead. MemTrace trimmed at the 32,768-token window of gpt-4.1-mini."""

    context_tokens: int = tunable(8192 - 1024 - PROMPT_OVERHEAD_TOKENS, low=1024, high=8192 - 1024 - PROMPT_OVERHEAD_TOKENS,
                                  ops=("long_context.trim", "long_context.answer"),
                                  cost="a larger budget: longer answer prompts")
    embedder: str = "hash"  # nothing is searched; the index stays empty

    def __post_init__(self) -> None:
        if self.context_tokens < 64:
            raise ConfigError(f"long_context: context_tokens must be at least 64, got {self.context_tokens}")


def transcript_tokens(units: Sequence[MemoryUnit]) -> int:
    """Estimated tokens of the units as the answer op shows them."""
    return estimate_tokens(format_units(units)) if units else 0


class IngestTurns(Operation):
    """Stores each turn of a session as one dated unit."""

    op_name = "long_context.ingest"
    role = OpRole.FORMS
    writes_store = True

    def run(self, turns: Sequence[Turn], state: MemoryState) -> dspy.Prediction:
        units = [
            state.store.add(turn_line(turn), kind=TURN_KIND, timestamp=turn.timestamp, source_turns=(turn.dia_id,))
            for turn in turns
        ]
        return dspy.Prediction(units=units)


class TrimOldest(Operation):
    """Deletes the oldest turns until the transcript fits `budget_tokens`."""

    op_name = "long_context.trim"
    role = OpRole.DELETES
    writes_store = True

    def run(self, units: Sequence[MemoryUnit], budget_tokens: int, state: MemoryState) -> dspy.Prediction:
        kept = list(units)
        total = transcript_tokens(kept)
        cut = 0
        while cut < len(kept) and total > budget_tokens:
            # dropping one turn saves its line (and at most a date header): recompute cheaply per step
            cut += 1
            total = transcript_tokens(kept[cut:])
        dropped = [state.store.delete(unit.unit_id) for unit in kept[:cut]]
        if dropped:
            log.debug("long_context.trim dropped %d turns, %d tokens left", len(dropped), total)
        return dspy.Prediction(dropped=dropped, tokens=total)


class PassThrough(Operation):
    """Returns every live turn, oldest first: the whole remembered transcript is the context."""

    op_name = "long_context.retrieve"
    role = OpRole.RETRIEVES

    def run(self, question: Question, state: MemoryState) -> dspy.Prediction:
        return dspy.Prediction(units=state.store.read(state.store.active()))


class AnswerLongContext(AnswerOp):
    op_name = "long_context.answer"


class LongContextMemory(MemoryProgram):
    """The full-context baseline: remember every turn, forget the oldest past the window."""

    name = "long_context"
    Config = LongContextConfig

    def __init__(self, config: LongContextConfig | None = None) -> None:
        super().__init__(config)
        self.ingest = IngestTurns()
        self.trim = TrimOldest()
        self.retrieve = PassThrough()
        self.answer = AnswerLongContext()

    def new_state(self, conversation: Conversation) -> MemoryState:
        store = MemoryStore(store_id=f"{self.name}:{conversation.sample_id}")
        index = SearchIndex(store, get_embedder(self.config.embedder), accept=lambda unit: False)
        return MemoryState(conversation_id=conversation.sample_id, store=store, index=index)

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        self.ingest(turns=list(session.turns), state=state)
        self.trim(units=state.store.active(), budget_tokens=self.config.context_tokens, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        units = self.retrieve(question=question, state=state).units
        return self.answer(question=question, context=units)
