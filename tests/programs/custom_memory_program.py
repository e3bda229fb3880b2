"""A user-defined memory program, loaded by import path in the registry tests (`custom_memory_program:KeywordMemory`)."""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from memtrace_opt.data import Question, Session
from memtrace_opt.memory.ops import Operation
from memtrace_opt.programs import MemoryProgram, MemoryState, ProgramConfig


@dataclass(frozen=True)
class KeywordConfig(ProgramConfig):
    embedder: str = "hash"
    top_k: int = 1


class StoreTurns(Operation):
    op_name = "keyword.store"
    writes_store = True

    def run(self, session: Session, state: MemoryState) -> dspy.Prediction:
        return dspy.Prediction(units=[state.store.add(t.text, source_turns=(t.dia_id,)) for t in session.turns])


class AnswerByLookup(Operation):
    op_name = "keyword.answer"

    def run(self, question: Question, state: MemoryState, k: int) -> dspy.Prediction:
        hits = state.store.read(h.unit for h in state.index.lexical(question.question, k))
        return dspy.Prediction(answer=hits[0].text if hits else "Not mentioned in the conversation")


class KeywordMemory(MemoryProgram):
    name = "keyword"
    Config = KeywordConfig

    def __init__(self, config: KeywordConfig | None = None) -> None:
        super().__init__(config)
        self.store_turns = StoreTurns()
        self.lookup = AnswerByLookup()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        self.store_turns(session=session, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        return self.lookup(question=question, state=state, k=self.config.top_k)


class NotAProgram:
    pass
