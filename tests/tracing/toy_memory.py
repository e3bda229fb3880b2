"""A toy memory program and conversation for the tracing tests.

The toy program has every kind of operation the graph must show: an LM extraction (`toy.extract`), a store
writer that adds, updates and deletes (`toy.write`: a fact "UPDATE <unit>: <text>" updates, "DELETE <unit>"
deletes, anything else is added), a keyword retrieval over the store (`toy.retrieve`) and the LM answer
(`toy.answer`). The fake LM extracts one fact per transcript line and answers with the first context line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import dspy

from memtrace_opt.data import Conversation, Question, Session, Turn
from memtrace_opt.memory.index import tokenize
from memtrace_opt.memory.ops import LMOperation, Operation, OperationFailed
from memtrace_opt.memory.store import MemoryUnit
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import AnswerOp, format_turns
from memtrace_opt.testing import FakeCall, Skill


class ExtractSignature(dspy.Signature):
    """Write down every fact the messages state, one per message."""

    transcript: str = dspy.InputField()
    facts: list[str] = dspy.OutputField()


class ToyExtract(LMOperation):
    op_name = "toy.extract"
    signature = ExtractSignature

    def run(self, turns: Sequence[Turn]) -> dspy.Prediction:
        try:
            reply = self.ask(transcript=format_turns(turns))
        except OperationFailed as error:
            return dspy.Prediction(facts=[], error=str(error))
        return dspy.Prediction(facts=list(reply.facts or []), error=None)


class ToyWrite(Operation):
    op_name = "toy.write"
    writes_store = True

    def run(self, facts: Sequence[str], turns: Sequence[Turn], state: MemoryState) -> dspy.Prediction:
        sources = [t.dia_id for t in turns]
        written: list[MemoryUnit] = []
        for fact in facts:
            update = re.match(r"UPDATE (\S+): (.+)", fact)
            delete = re.match(r"DELETE (\S+)", fact)
            if update:
                written.append(state.store.update(update.group(1), update.group(2), source_turns=sources))
            elif delete:
                written.append(state.store.delete(delete.group(1)))
            else:
                written.append(state.store.add(fact, source_turns=sources, timestamp=turns[0].timestamp))
        return dspy.Prediction(units=written)


class ToyRetrieve(Operation):
    op_name = "toy.retrieve"

    def run(self, question: Question, state: MemoryState) -> dspy.Prediction:
        words = {w for w in tokenize(question.question) if len(w) >= 3}
        hits = [u for u in state.store.active() if words & set(tokenize(u.text))]
        return dspy.Prediction(units=state.store.read(hits))


class ToyAnswer(AnswerOp):
    op_name = "toy.answer"


class ToyMemory(MemoryProgram):
    name = "toy"
    Config = ProgramConfig

    def __init__(self, config: ProgramConfig | None = None) -> None:
        super().__init__(config or ProgramConfig(embedder="hash"))
        self.extract = ToyExtract()
        self.write = ToyWrite()
        self.retrieve = ToyRetrieve()
        self.answer = ToyAnswer()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        facts = self.extract(turns=list(session.turns)).facts
        if facts:
            self.write(facts=facts, turns=list(session.turns), state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        units = self.retrieve(question=question, state=state).units
        return self.answer(question=question, context=units)


def extract_skill(call: FakeCall) -> dict:
    """One fact per message line, whichever input holds the messages (toy, mem0)."""
    text = call.inputs.get("transcript") or call.inputs.get("new_messages") or ""
    facts = []
    for line in text.splitlines():
        if line.startswith("["):
            continue
        facts.append(line.split(": ", 1)[1])
    return {"facts": facts}


def answer_skill(call: FakeCall) -> dict:
    lines = [ln[2:] for ln in call.inputs["context"].splitlines() if ln.startswith("- ")]
    return {"answer": lines[0] if lines else "Not mentioned in the conversation"}


TOY_SKILLS = (Skill(outputs=("facts",), fn=extract_skill), Skill(outputs=("answer",), fn=answer_skill))


def make_session(index: int, date: str, lines: list[tuple[str, str]]) -> Session:
    turns = tuple(
        Turn(dia_id=f"D{index}:{n}", speaker=speaker, text=text, session_index=index, timestamp=date)
        for n, (speaker, text) in enumerate(lines, start=1)
    )
    return Session(index=index, date_time=date, turns=turns)


def make_question(qid: str, text: str, answer: str, evidence: tuple[str, ...]) -> Question:
    return Question(question_id=qid, question=text, answer=answer, category="single-hop", category_id=4, evidence=evidence)


def toy_conversation(sample_id: str = "toy-1") -> Conversation:
    sessions = (
        make_session(1, "1:00 pm on 8 May, 2023", [("Alice", "Alice lives in Berlin"), ("Bob", "Bob has a dog named Rex")]),
        make_session(2, "2:00 pm on 9 June, 2023", [("Alice", "UPDATE memory-1: Alice lives in Paris"),
                                                 ("Bob", "DELETE memory-2")]),
        make_session(3, "3:00 pm on 1 July, 2023", [("Alice", "Alice plays the violin")]),
    )
    questions = (
        make_question("q-live", "Where does Alice live?", "Paris", ("D1:1", "D2:1")),
        make_question("q-dog", "What is the dog of Bob called?", "Rex", ("D1:2",)),
        make_question("q-violin", "Which instrument does Alice play?", "violin", ("D3:1",)),
    )
    return Conversation(sample_id=sample_id, speakers=("Alice", "Bob"), sessions=sessions, questions=questions,
                        dataset="toy")
