"""Attribution reads what an op does from the role it declares; a name is a fallback, warned once."""

from __future__ import annotations

import logging

import dspy
import networkx as nx

from memtrace_opt.attribution import GraphView
from memtrace_opt.memory import Operation, OpRole
from memtrace_opt.programs import MemoryProgram
from memtrace_opt.programs.module_op import as_op
from memtrace_opt.testing import fake_lm
from memtrace_opt.tracing import trace_conversation


class Note(dspy.Signature):
    """Write down what the new messages say about the speakers."""

    messages: str = dspy.InputField()
    note: str = dspy.OutputField()


class Reply(dspy.Signature):
    """Answer the question from the notes."""

    notes: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def graph_with(op: str, role: str | None, **attrs: object) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph()
    graph.add_node("op:0", kind="op", op=op, seq=0, role=role, **attrs)
    return graph


def test_a_declared_role_is_read_from_the_graph_and_gives_the_error_type() -> None:
    view = GraphView(graph_with("journal.consolidate", "forms"))
    assert view.role("op:0") is OpRole.FORMS
    assert view.error_type("op:0") == "ExtractionError"


def test_a_graph_without_roles_guesses_from_names_and_warns_once(caplog) -> None:
    view = GraphView(graph_with("journal.prune_entries_x", None))
    with caplog.at_level(logging.WARNING, logger="memtrace_opt.attribution._graph"):
        assert view.role("op:0") is None
        assert view.role("op:0") is None
    warnings = [r for r in caplog.records if "journal.prune_entries_x declares no role" in r.getMessage()]
    assert len(warnings) == 1
    assert GraphView(graph_with("old.answer", None)).role("op:0") is OpRole.ANSWERS


class KeepNote(Operation):
    op_name = "journal.keep"
    role = OpRole.FORMS
    writes_store = True

    def run(self, note: str, session, state) -> dspy.Prediction:
        sources = tuple(t.dia_id for t in session.turns)
        return dspy.Prediction(unit=state.store.add(note, kind="note", timestamp=session.date_time,
                                                    source_turns=sources))


class Journal(MemoryProgram):
    """A user's program whose answering op is not named `*.answer`: its declared role says what it does."""

    name = "journal"

    def __init__(self) -> None:
        super().__init__()
        self.write = as_op(dspy.Predict(Note), "journal.jot", role="forms")
        self.reply = as_op(dspy.Predict(Reply), "journal.respond", role=OpRole.ANSWERS)
        self.keep = KeepNote()

    def memorize_session(self, session, state) -> None:
        text = "\n".join(f"{t.speaker}: {t.text}" for t in session.turns)
        note = self.write(messages=text).note
        self.keep(note=note, session=session, state=state)

    def respond(self, question, state):
        notes = "\n".join(u.text for u in state.store.read(state.store.active()))
        return self.reply(notes=notes, question=question)


def test_a_user_op_declared_as_answering_answers_its_question(tmp_path) -> None:
    from memtrace_opt.data import load_data

    conversation = load_data("sample").conversations[0]
    with dspy.context(lm=fake_lm()):
        traced = trace_conversation(Journal(), conversation, conversation.questions[:1])
    graph = traced.graph()
    view = GraphView(graph)
    answer = view.answer_op(conversation.questions[0].question_id)
    assert answer is not None and view.op_name(answer) == "journal.respond"
    assert view.error_type(answer) == "ResponseError"
    jots = [op for op in view.ops if view.op_name(op) == "journal.jot"]
    assert jots and all(view.error_type(op) == "ExtractionError" for op in jots)
