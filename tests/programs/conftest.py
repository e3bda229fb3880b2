"""Fixtures for the memory-system tests: small conversations, a fake LM with the default skills and a
recorder of the operations that ran."""

from __future__ import annotations

import dspy
import pytest
from memory_programs_kit import TINY_SESSIONS, OpRecorder, make_conversation, make_question

from memtrace_opt.data import Conversation, load_sample
from memtrace_opt.testing import FakeEngine, fake_lm
from memtrace_opt.testing.skills import default_skills


@pytest.fixture
def tiny() -> Conversation:
    return make_conversation(
        TINY_SESSIONS,
        [make_question("What is the name of Alice's kitten?", "Pepper", "q-kitten", ("D1:1",)),
         make_question("What did Carol buy at the bakery?", "Not mentioned in the conversation", "q-none")],
    )


@pytest.fixture
def sample() -> Conversation:
    return load_sample().conversations[0]


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(skills=default_skills())


@pytest.fixture
def recorder() -> OpRecorder:
    return OpRecorder()


@pytest.fixture
def fake(engine: FakeEngine, recorder: OpRecorder):
    """A fake LM with the default skills and the op recorder, active for the test."""
    with dspy.context(lm=fake_lm(engine=engine), callbacks=[recorder]):
        yield engine
