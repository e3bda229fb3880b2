"""`as_op`: a plain dspy.Module (Predict, ChainOfThought, a module of one's own) wrapped as an operation."""

from __future__ import annotations

import dspy
import pytest

from memtrace_opt.data import Question, Session
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.ops import OperationFailed
from memtrace_opt.optimizers import instructions_of, with_instruction
from memtrace_opt.programs import MemoryProgram, MemoryState, ModuleOp, PlainModuleOp, ProgramConfig, as_op
from memtrace_opt.programs.common import display_date, format_turns, question_text
from memtrace_opt.testing import FakeEngine, FakeReply, fake_lm
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import trace_conversation


class Extract(dspy.Signature):
    """Write down the facts these messages state."""

    new_messages: str = dspy.InputField()
    session_date: str = dspy.InputField()
    facts: list[str] = dspy.OutputField()


class Answer(dspy.Signature):
    """Answer the question from the context."""

    context: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class JoinFacts(dspy.Module):
    """A plain module without an LM: the store write of the program."""

    def forward(self, facts: list[str], timestamp: str | None, state: MemoryState) -> dspy.Prediction:
        return dspy.Prediction(units=[state.store.add(f, timestamp=timestamp) for f in facts])


class CotMemory(MemoryProgram):
    """The user's existing modules, each wrapped once, nothing else rewritten."""

    name = "cot"

    def __init__(self, config: ProgramConfig | None = None) -> None:
        super().__init__(config or ProgramConfig(embedder="hash"))
        self.extract = as_op(dspy.ChainOfThought(Extract), "cot.extract")
        self.store = as_op(JoinFacts(), "cot.store", writes_store=True)
        self.answer = as_op(dspy.Predict(Answer), "cot.answer", fallback={"answer": ""})

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        facts = self.extract(new_messages=format_turns(session.turns),
                             session_date=display_date(session.date_time)).facts
        self.store(facts=list(facts or []), timestamp=session.date_time, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        context = "\n".join(f"- {u.text}" for u in state.store.active())
        return self.answer(question=question_text(question), context=context)


def test_wrapped_modules_are_ops_whose_predictors_the_trace_names(sample):
    program = CotMemory()
    assert isinstance(program.extract, ModuleOp) and isinstance(program.store, PlainModuleOp)
    assert set(instructions_of(program)) == {"extract.module.predict", "answer.module"}
    engine = FakeEngine(skills=default_skills())
    with dspy.context(lm=fake_lm(engine=engine)):
        traced = trace_conversation(program, sample)
    G = traced.graph()
    ops = {d["op"]: d for _, d in G.nodes(data=True) if d["kind"] == "op"}
    assert ops["cot.extract"]["predictor"] == "extract.module.predict"
    assert ops["cot.extract"]["instructions"].startswith("Write down the facts")
    assert ops["cot.extract"]["lm_calls"]  # the LM call is tied to the op
    assert ops["cot.store"]["predictor"] is None and ops["cot.store"]["writes_store"]
    assert ops["cot.answer"]["predictor"] == "answer.module"
    assert any(n.startswith("mem:") for n in G.nodes)
    # the session passed as a transcript string still leads from its turns to the extraction
    first = next(n for n, d in G.nodes(data=True) if d.get("op") == "cot.extract")
    assert any(u.startswith("turn:") for u, _ in G.in_edges(first))


def test_the_optimizer_rewrites_the_wrapped_predictor(sample):
    program = CotMemory()
    rewritten = with_instruction(program, "extract.module.predict", "Write down the facts, keeping every date.")
    engine = FakeEngine(skills=default_skills())
    with dspy.context(lm=fake_lm(engine=engine)):
        trace_conversation(rewritten, sample, [])
    seen = {c.instruction for c in engine.calls_for("facts")}
    assert any("keeping every date" in text for text in seen)
    assert instructions_of(program)["extract.module.predict"].startswith("Write down the facts these")


def test_a_failed_call_returns_the_fallback_with_error_or_raises():
    engine = FakeEngine()
    engine.on(("answer",), lambda call: (_ for _ in ()).throw(FakeReply("no fields here")))
    answer = as_op(dspy.Predict(Answer), "cot.answer", fallback={"answer": ""})
    bare = as_op(dspy.Predict(Answer), "cot.answer")
    with dspy.context(lm=fake_lm(engine=engine)):
        out = answer(context="- a", question="q?")
        assert out.answer == "" and "cot.answer" in out.error
        with pytest.raises(OperationFailed, match="cot.answer"):
            bare(context="- a", question="q?")
    assert engine.counts["answer"] == 8  # each op tried twice, each try once more as JSON by DSPy itself


class TwoSteps(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = dspy.Predict("a -> b")
        self.second = dspy.Predict("b -> c")


@pytest.mark.parametrize(("module", "name", "message"), [
    (TwoSteps(), "x.two", "2 predictors"),
    ("not a module", "x.y", "wraps a dspy.Module"),
    (dspy.Predict("a -> b"), "noname", "stable dotted name"),
])
def test_bad_wrapping_is_a_clear_error(module, name, message):
    with pytest.raises(ConfigError, match=message):
        as_op(module, name)
