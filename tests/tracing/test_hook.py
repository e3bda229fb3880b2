from __future__ import annotations

import threading
import time
from dataclasses import replace

import dspy
import pytest
from dspy.utils.parallelizer import ParallelExecutor
from toy_memory import TOY_SKILLS, ToyExtract, ToyMemory, toy_conversation

from memtrace_opt.memory.ops import Operation
from memtrace_opt.testing import FakeEngine, Skill, fake_lm
from memtrace_opt.tracing import (
    AnswerEvent,
    EventWriter,
    LMCallEvent,
    OpEvent,
    QuestionEvent,
    RunEnd,
    RunStart,
    StoreRecord,
    TurnEvent,
    build_graph,
    read_events,
    trace_conversation,
)
from memtrace_opt.tracing.hook import _usage


def _ops(events):
    return [e for e in events if isinstance(e, OpEvent)]


def test_a_run_emits_the_events_in_order(toy_program, conversation, lm):
    with dspy.context(lm=lm):
        result = trace_conversation(toy_program, conversation, conversation.questions, meta={"models": {"task": "fake"}})
    events = result.events
    assert isinstance(events[0], RunStart) and isinstance(events[-1], RunEnd)
    assert events[0].system == "toy" and events[0].sample_id == "toy-1" and events[0].models == {"task": "fake"}
    assert set(events[0].instructions) == {"extract.predict", "answer.predict"}
    turns = [e.dia_id for e in events if isinstance(e, TurnEvent)]
    assert turns == [t.dia_id for t in conversation.turns()]
    assert [e.question["question_id"] for e in events if isinstance(e, QuestionEvent)] == ["q-live", "q-dog", "q-violin"]
    ops = _ops(events)
    assert sorted(o.seq for o in ops) == list(range(len(ops)))
    assert result.op_counts == {"toy.extract": 3, "toy.write": 3, "toy.retrieve": 3, "toy.answer": 3}
    assert result.answers["q-live"] == "Alice lives in Paris"
    assert result.reused_ops == 0 and result.rerun_ops == 0


def test_lm_calls_and_store_events_are_tied_to_their_op(toy_program, conversation, lm):
    with dspy.context(lm=lm):
        result = trace_conversation(toy_program, conversation, conversation.questions)
    ops = {o.call_id: o for o in _ops(result.events)}
    lm_calls = [e for e in result.events if isinstance(e, LMCallEvent)]
    assert len(lm_calls) == result.lm_calls == 6  # 3 extractions + 3 answers
    for call in lm_calls:
        assert ops[call.op_call_id].op in ("toy.extract", "toy.answer")
        assert call.model == "fake/test" and call.prompt_tokens and call.completion_tokens
        assert call.messages[0]["role"] == "system" and "[[ ## " in call.response
    assert result.prompt_tokens == sum(c.prompt_tokens for c in lm_calls)
    store = [e for e in result.events if isinstance(e, StoreRecord)]
    writes = [s for s in store if s.action != "read"]
    assert {ops[s.op_call_id].op for s in writes} == {"toy.write"}
    assert {ops[s.op_call_id].op for s in store if s.action == "read"} == {"toy.retrieve"}
    update = next(s for s in store if s.action == "update")
    assert update.previous["version"] == 1 and update.unit["version"] == 2
    answers = [e for e in result.events if isinstance(e, AnswerEvent)]
    assert all(ops[a.op_call_id].op == "toy.answer" for a in answers)
    extract = next(o for o in ops.values() if o.op == "toy.extract")
    assert extract.predictor == "extract.predict" and extract.instructions.startswith("Write down")
    assert extract.inputs["turns"][0]["$turn"] == "turn:D1:1"
    write = next(o for o in ops.values() if o.op == "toy.write")
    assert write.inputs["state"].startswith("state:toy-1#") and write.predictor is None and write.writes_store


class Outer(Operation):
    """An op that calls another op (lineage across nesting)."""

    op_name = "toy.outer"

    def __init__(self) -> None:
        super().__init__()
        self.inner = ToyExtract()

    def run(self, turns):
        return dspy.Prediction(facts=self.inner(turns=turns).facts)


class NestedMemory(ToyMemory):
    def __init__(self) -> None:
        super().__init__()
        self.outer = Outer()

    def memorize_session(self, session, state):
        facts = self.outer(turns=list(session.turns)).facts
        self.write(facts=facts, turns=list(session.turns), state=state)


def test_nested_ops_record_their_parent_and_lm_calls_go_to_the_innermost_op(conversation, lm):
    with dspy.context(lm=lm):
        result = trace_conversation(NestedMemory(), conversation, [])
    ops = _ops(result.events)
    outer = next(o for o in ops if o.op == "toy.outer")
    inner = next(o for o in ops if o.op == "toy.extract")
    assert inner.parent_call_id == outer.call_id and outer.parent_call_id is None
    assert inner.seq == outer.seq + 1
    assert inner.predictor == "outer.inner.predict"
    first_lm = next(e for e in result.events if isinstance(e, LMCallEvent))
    assert first_lm.op_call_id == inner.call_id
    G = build_graph(result.events)
    assert G.nodes[f"op:{inner.seq}"]["parent"] == f"op:{outer.seq}"
    assert G.nodes[f"op:{inner.seq}"]["lm_calls"] and not G.nodes[f"op:{outer.seq}"]["lm_calls"]


class FailingMemory(ToyMemory):
    def respond(self, question, state):
        if question.question_id == "q-dog":
            raise RuntimeError("retrieval exploded")
        return super().respond(question, state)


def test_a_failing_question_is_recorded_and_the_others_go_on(conversation, lm):
    done = []
    with dspy.context(lm=lm):
        result = trace_conversation(FailingMemory(), conversation, conversation.questions,
                                    on_question_done=lambda q, a, p: done.append((q.question_id, a)))
    assert result.answers["q-dog"] == "" and "retrieval exploded" in result.errors["q-dog"]
    assert result.predictions["q-dog"] is None
    assert result.answers["q-live"] == "Alice lives in Paris" and "q-live" not in result.errors
    assert [q for q, _ in done] == ["q-live", "q-dog", "q-violin"]
    failed = next(e for e in result.events if isinstance(e, AnswerEvent) and e.question_id == "q-dog")
    assert failed.error and failed.op_call_id is None


def test_an_op_that_raises_is_recorded_with_its_error(conversation, lm):
    class Broken(ToyMemory):
        def __init__(self):
            super().__init__()
            self.retrieve = BrokenRetrieve()

    class BrokenRetrieve(Operation):
        op_name = "toy.retrieve"

        def run(self, question, state):
            raise ValueError("index missing")

    with dspy.context(lm=lm):
        result = trace_conversation(Broken(), conversation, conversation.questions[:1])
    assert [f.op for f in result.failures] == ["toy.retrieve"]
    assert "ValueError: index missing" in result.failures[0].error
    op = next(o for o in _ops(result.events) if o.op == "toy.retrieve")
    assert op.outputs is None and op.error.startswith("ValueError")


def test_session_callback_is_called_per_session(toy_program, conversation, lm):
    seen = []
    with dspy.context(lm=lm):
        trace_conversation(toy_program, conversation, [], on_session_done=seen.append)
    assert seen == [0, 1, 2]


def test_events_go_to_the_writer_and_match_the_result(tmp_path, toy_program, conversation, lm):
    path = tmp_path / "events" / "toy-1.jsonl"
    with dspy.context(lm=lm), EventWriter(path) as writer:
        result = trace_conversation(toy_program, conversation, conversation.questions, writer=writer)
    assert read_events(path) == result.events


def _slow_engine() -> FakeEngine:
    def slow_extract(call):
        time.sleep(0.01)  # let the other thread's calls interleave
        return TOY_SKILLS[0].fn(call)

    return FakeEngine(skills=[Skill(outputs=("facts",), fn=slow_extract), TOY_SKILLS[1]])


def _renamed(sample_id: str, name: str):
    conv = toy_conversation(sample_id)
    sessions = tuple(
        replace(s, turns=tuple(replace(t, text=t.text.replace("Alice", name), speaker=t.speaker.replace("Alice", name))
                               for t in s.turns))
        for s in conv.sessions
    )
    questions = tuple(replace(q, question=q.question.replace("Alice", name)) for q in conv.questions)
    return replace(conv, sessions=sessions, questions=questions, speakers=(name, "Bob"))


def _assert_own_lineage(result, name: str, other: str) -> None:
    ops = {o.call_id: o for o in _ops(result.events)}
    assert sorted(o.seq for o in ops.values()) == list(range(len(ops)))
    for event in result.events:
        if isinstance(event, LMCallEvent):
            assert event.op_call_id in ops
            assert other not in str(event.messages)
        if isinstance(event, StoreRecord):
            assert event.op_call_id in ops
            assert other not in event.unit["text"]
    assert result.answers["q-live"] == f"{name} lives in Paris"


def test_two_conversations_traced_in_threads_keep_separate_lineage():
    program = ToyMemory()  # one program object shared by both threads, as dspy.Evaluate does
    lm = fake_lm(engine=_slow_engine())
    results = {}

    def run(sample_id, name):
        with dspy.context(lm=lm):
            results[name] = trace_conversation(program, _renamed(sample_id, name), None)

    threads = [threading.Thread(target=run, args=("a", "Alice")), threading.Thread(target=run, args=("b", "Carol"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _assert_own_lineage(results["Alice"], "Alice", "Carol")
    _assert_own_lineage(results["Carol"], "Carol", "Alice")


def test_parallel_executor_workers_keep_separate_lineage():
    program = ToyMemory()
    lm = fake_lm(engine=_slow_engine())
    convs = [_renamed("a", "Alice"), _renamed("b", "Carol")]
    with dspy.context(lm=lm):
        out = ParallelExecutor(num_threads=2, disable_progress_bar=True).execute(
            lambda conv: trace_conversation(program, conv, None), convs
        )
    _assert_own_lineage(out[0], "Alice", "Carol")
    _assert_own_lineage(out[1], "Carol", "Alice")


def test_the_tracer_leaves_existing_callbacks_and_the_store_as_they_were(toy_program, conversation, lm):
    from dspy.utils.callback import BaseCallback

    class Counting(BaseCallback):
        def __init__(self):
            self.lm_calls = 0

        def on_lm_end(self, call_id, outputs, exception=None):
            self.lm_calls += 1

    counting = Counting()
    with dspy.context(lm=lm, callbacks=[counting]):
        result = trace_conversation(toy_program, conversation, conversation.questions)
        assert dspy.settings.callbacks == [counting]
    assert counting.lm_calls == result.lm_calls == 6


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"usage": {"prompt_tokens": 7, "completion_tokens": 3}, "response": None}, (7, 3, False, None)),
        ({"usage": {}, "response": type("R", (), {"usage": {"input_tokens": 5, "output_tokens": 2}})()},
         (5, 2, True, None)),
        ({"usage": {}, "response": None}, (None, None, False, None)),
        # a reply an earlier sitting paid for, charged again: the live call it was, with its seconds then
        ({"usage": {"prompt_tokens": 7, "completion_tokens": 3}, "seconds": 2.5, "response": None},
         (7, 3, False, 2.5)),
    ],
)
def test_usage_comes_from_the_lm_history_entry_of_the_call(entry, expected):
    outputs = ["reply"]
    lm = type("LM", (), {})()
    lm.history = [{"outputs": ["other"], "usage": {"prompt_tokens": 99}}, {**entry, "outputs": outputs}]
    assert _usage(lm, outputs) == expected
    assert _usage(lm, ["not recorded"]) == (None, None, False, None)


def test_recorded_content_keys_equal_the_ops_own(toy_program, conversation, lm):
    """Replay looks ops up by `Operation.content_key(inputs)`: the hook must record exactly that key."""
    from memtrace_opt.memory.values import from_jsonable

    with dspy.context(lm=lm):
        result = trace_conversation(toy_program, conversation, conversation.questions[:1])
    modules = {m.op_name: m for _, m in toy_program.named_sub_modules() if isinstance(m, Operation)}
    for op in _ops(result.events):
        if op.op == "toy.write" or "state" in op.inputs:
            continue  # these take the live state: their key depends on the store at that moment
        assert op.content_key == modules[op.op].content_key(from_jsonable(op.inputs)), op.op
