"""Helpers of the `mem0ai` tests: the installed Mem0 (a test is skipped where the version it needs is absent, and
fails where CI should have installed it), a program that keeps its conversation's state, and fake-LM skills that
plant a failure in Mem0's extraction."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from memtrace_opt.data import Conversation
from memtrace_opt.programs.base import MemoryState
from memtrace_opt.programs.mem0ai import Mem0aiMemory
from memtrace_opt.programs.mem0ai._library import installed_version
from memtrace_opt.testing import FakeCall, FakeReply, Skill
from memtrace_opt.testing.mem0_skills import additive_extract, mem0_skills
from memtrace_opt.testing.skills import default_skills


def need_mem0ai(major: str) -> str:
    """The installed mem0ai version when it starts with `major` ("2.", "1.0."); else skip, or fail in CI for 2.x
    (the dev extra installs it there)."""
    version = installed_version()
    if version is not None and version.startswith(major):
        return version
    why = f"needs mem0ai {major}x (installed: {version or 'none'})"
    if os.environ.get("CI") and major == "2.":
        pytest.fail(why + ": the dev extra installs it")
    pytest.skip(why)


class KeptMemory(Mem0aiMemory):
    """`Mem0aiMemory` that keeps the state of the last conversation it opened (to ask its Mem0 afterwards)."""

    kept: MemoryState | None = None

    def new_state(self, conversation: Conversation) -> MemoryState:
        self.kept = super().new_state(conversation)
        return self.kept


def extraction_skills(edit: Callable[[list[dict]], list[dict]]) -> list[Skill]:
    """The default skills, with 2.x's extraction reply passed through `edit` (its list of memory objects)."""

    def extract(call: FakeCall) -> dict:
        try:
            additive_extract(call)
        except FakeReply as reply:
            raise FakeReply(json.dumps({"memory": edit(json.loads(reply.text)["memory"])})) from None
        raise AssertionError("the extraction skill always replies raw")

    first = mem0_skills()[0]
    return [Skill((), extract, name=first.name, when=first.when), *default_skills()]
