"""An LM reply that does not parse is retried once, then the op returns its fallback outputs with `error` set
and the run goes on."""

from __future__ import annotations

import dspy
import pytest

from memtrace_opt.programs import make_program
from memtrace_opt.testing import FakeEngine, FakeReply, FakeTimeout, Skill, fake_lm
from memtrace_opt.testing.skills import default_skills


def garbage(call):
    raise FakeReply("I am not sure what you mean.")


def timeout(call):
    raise FakeTimeout()


def _run(system, broken_output, settings, conversation, recorder, fail=garbage):
    engine = FakeEngine(skills=[Skill((broken_output,), fail), *default_skills()])
    program = make_program(system, {"embedder": "hash", **settings})
    with dspy.context(lm=fake_lm(engine=engine), callbacks=[recorder]):
        state = program.new_state(conversation)
        program.memorize(conversation, state)
        answers = [program.respond(q, state).answer for q in conversation.questions]
    return engine, state, answers


def test_unparseable_extraction_is_retried_then_recorded(tiny, recorder):
    engine, state, answers = _run("mem0", "facts", {"window_turns": 3}, tiny, recorder)
    extractions = recorder.of("mem0.extract_facts")
    assert len(extractions) == 2
    for call in extractions:
        assert call.exception is None
        assert call.outputs.facts == [] and "did not parse twice" in call.outputs.error
    # one request per try (the adapter may add its own JSON fallback per try): at least two tries per op call
    assert len(engine.calls_for("facts")) >= 2 * len(extractions)
    assert len(state.store) == 0
    assert answers == ["Not mentioned in the conversation"] * 2  # the read path still ran
    assert "mem0.search_similar" not in recorder.names  # no facts: nothing to decide


def test_timeout_is_recorded_as_the_op_error(tiny, recorder):
    _, _, answers = _run("rag", "answer", {}, tiny, recorder, fail=timeout)
    calls = recorder.of("rag.answer")
    assert len(calls) == 2 and answers == ["", ""]
    assert all(c.outputs.error and "rag.answer" in c.outputs.error for c in calls)


@pytest.mark.parametrize(
    ("system", "output", "op_name", "fallback"),
    [
        ("evermemos", "episode_ends", "evermemos.detect_boundary", {"episode_ends": False}),
        ("evermemos", "episode", "evermemos.extract_episode", {"episode": ""}),
        ("evermemos", "events", "evermemos.extract_event_log", {"events": []}),
        ("evermemos", "sufficient", "evermemos.check_sufficiency", {"sufficient": True}),
        ("mem0", "memory_actions", "mem0.update_decision", {"memory_actions": []}),
        ("long_context", "answer", "long_context.answer", {"answer": ""}),
    ],
)
def test_every_lm_op_falls_back(system, output, op_name, fallback, tiny, recorder):
    _run(system, output, {"check_every": 1} if system == "evermemos" else {}, tiny, recorder)
    calls = recorder.of(op_name)
    failed = [c for c in calls if c.outputs is not None and getattr(c.outputs, "error", None)]
    assert failed, f"{op_name} never failed"
    for call in failed:
        assert call.exception is None
        for key, value in fallback.items():
            assert call.outputs[key] == value
    assert recorder.names[-1].endswith(".answer")  # the run reached the read path


def test_generate_queries_failure_still_merges(tiny, recorder):
    _run("evermemos", "queries", {}, tiny, recorder)
    assert recorder.of("evermemos.generate_queries")[0].outputs.queries == []
    assert recorder.names[-2:] == ["evermemos.merge", "evermemos.answer"]


def test_episode_that_only_echoes_the_prompt_is_an_error(tiny, recorder):
    def echo(call):
        return {"episode": call.inputs["episode_date"] + "\n\n[[ ## conversation ## ]]\n" + call.inputs["conversation"]}

    _, state, _ = _run("evermemos", "episode", {}, tiny, recorder, fail=echo)
    calls = recorder.of("evermemos.extract_episode")
    assert calls and all(c.outputs.episode == "" and "repeated the prompt" in c.outputs.error for c in calls)
    assert not [u for u in state.store.active() if u.kind == "episode"]
    assert "evermemos.store_episode" not in recorder.names
