"""Fixtures of the tracing tests: the toy memory program, its conversation and a fake LM (see toy_memory.py)."""

from __future__ import annotations

import dspy
import pytest
from toy_memory import TOY_SKILLS, ToyMemory, toy_conversation

from memtrace_opt.data import Conversation
from memtrace_opt.testing import FakeEngine, fake_lm


@pytest.fixture
def toy_program() -> ToyMemory:
    return ToyMemory()


@pytest.fixture
def conversation() -> Conversation:
    return toy_conversation()


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(skills=list(TOY_SKILLS))


@pytest.fixture
def lm(engine: FakeEngine) -> dspy.LM:
    return fake_lm(engine=engine)
