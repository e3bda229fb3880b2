"""A user's four-op memory program in two forms that do the same work: `StringNotes` passes the conversation and
the notes around as plain strings (the natural first version), `TypedNotes` as `Turn` and `MemoryUnit` values.
`HiddenNotes` reads the session from the state instead of taking it as an input: no lineage can be found.

An LM writes one note per session (`notes.write`: the default fake LM's fact skill serves its Signature), a
store op saves it, a retrieve op returns every note, an answer op answers from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dspy

from memtrace_opt.data import Question, Session, Turn
from memtrace_opt.memory.ops import LMOperation, Operation
from memtrace_opt.memory.store import MemoryUnit
from memtrace_opt.programs import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import display_date, format_turns, question_text


@dataclass(frozen=True)
class NotesConfig(ProgramConfig):
    embedder: str = "hash"


class WriteNote(dspy.Signature):
    """Write down the facts these messages state."""

    new_messages: str = dspy.InputField()
    session_date: str = dspy.InputField()
    facts: list[str] = dspy.OutputField()


class AnswerFromNotes(dspy.Signature):
    """Answer the question from the notes given as context."""

    context: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def note_line(text: str, timestamp: str | None) -> str:
    return f"[{display_date(timestamp)}]\n- {text}"


class StringWrite(LMOperation):
    op_name = "notes.write"
    signature = WriteNote

    def run(self, session: str, date: str) -> dspy.Prediction:
        reply = self.ask(new_messages=session, session_date=date)
        return dspy.Prediction(note=" ".join(reply.facts or []))


class TypedWrite(LMOperation):
    op_name = "notes.write"
    signature = WriteNote

    def run(self, turns: Sequence[Turn], date: str) -> dspy.Prediction:
        reply = self.ask(new_messages=format_turns(turns), session_date=date)
        return dspy.Prediction(note=" ".join(reply.facts or []))


class HiddenWrite(LMOperation):
    """Reads the session it writes about from the state: nothing in its inputs says which one."""

    op_name = "notes.write"
    signature = WriteNote

    def run(self, state: MemoryState) -> dspy.Prediction:
        session: Session = state.extra["session"]
        reply = self.ask(new_messages=format_turns(session.turns), session_date=display_date(session.date_time))
        return dspy.Prediction(note=" ".join(reply.facts or []))


class StoreNote(Operation):
    op_name = "notes.store"
    writes_store = True

    def run(self, note: str, timestamp: str | None, state: MemoryState) -> dspy.Prediction:
        if not note:
            return dspy.Prediction(unit=None)
        return dspy.Prediction(unit=state.store.add(note, kind="note", timestamp=timestamp))


class StringRetrieve(Operation):
    op_name = "notes.retrieve"

    def run(self, question: str, state: MemoryState) -> dspy.Prediction:
        return dspy.Prediction(notes=[note_line(u.text, u.timestamp) for u in state.store.active()])


class TypedRetrieve(Operation):
    op_name = "notes.retrieve"

    def run(self, question: Question, state: MemoryState) -> dspy.Prediction:
        return dspy.Prediction(notes=state.store.read(state.store.active()))


class StringAnswer(LMOperation):
    op_name = "notes.answer"
    signature = AnswerFromNotes

    def run(self, question: Question, notes: Sequence[str]) -> dspy.Prediction:
        return dspy.Prediction(answer=self.ask(context="\n".join(notes), question=question_text(question)).answer)


class TypedAnswer(LMOperation):
    op_name = "notes.answer"
    signature = AnswerFromNotes

    def run(self, question: Question, notes: Sequence[MemoryUnit]) -> dspy.Prediction:
        context = "\n".join(note_line(u.text, u.timestamp) for u in notes)
        return dspy.Prediction(answer=self.ask(context=context, question=question_text(question)).answer)


class StringNotes(MemoryProgram):
    name = "notes"
    Config = NotesConfig

    def __init__(self, config: NotesConfig | None = None) -> None:
        super().__init__(config)
        self.write, self.store = StringWrite(), StoreNote()
        self.retrieve, self.answer = StringRetrieve(), StringAnswer()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        note = self.write(session=format_turns(session.turns), date=display_date(session.date_time)).note
        self.store(note=note, timestamp=session.date_time, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        notes = self.retrieve(question=question.question, state=state).notes
        return self.answer(question=question, notes=notes)


class TypedNotes(StringNotes):
    def __init__(self, config: NotesConfig | None = None) -> None:
        super().__init__(config)
        self.write, self.retrieve, self.answer = TypedWrite(), TypedRetrieve(), TypedAnswer()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        note = self.write(turns=list(session.turns), date=display_date(session.date_time)).note
        self.store(note=note, timestamp=session.date_time, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        notes = self.retrieve(question=question, state=state).notes
        return self.answer(question=question, notes=notes)


class HiddenNotes(TypedNotes):
    def __init__(self, config: NotesConfig | None = None) -> None:
        super().__init__(config)
        self.write = HiddenWrite()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        state.extra["session"] = session
        note = self.write(state=state).note
        self.store(note=note, timestamp=session.date_time, state=state)
