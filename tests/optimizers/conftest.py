"""Fixtures for the optimizer tests (helpers in `optfixtures.py`: other test folders have a conftest too, so
test modules import names from there, never from `conftest`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optfixtures import BAD_EXTRACT, EXTRACT, make_models  # noqa: E402
from toydata import toy_conversation  # noqa: E402

from memtrace_opt.lm import Models  # noqa: E402
from memtrace_opt.optimizers import make_examples, with_instruction  # noqa: E402
from memtrace_opt.programs.mem0 import Mem0Memory  # noqa: E402
from memtrace_opt.testing import FakeEngine  # noqa: E402


@pytest.fixture
def fake_models() -> tuple[Models, FakeEngine]:
    return make_models()


@pytest.fixture
def planted() -> Mem0Memory:
    return with_instruction(Mem0Memory(), EXTRACT, BAD_EXTRACT)


@pytest.fixture
def conversation():
    return toy_conversation()


@pytest.fixture
def examples(conversation):
    return make_examples([conversation])
