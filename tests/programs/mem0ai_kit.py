"""Helpers of the `mem0ai` tests: a program that keeps its conversation's state, and fake-LM skills that plant a
failure in Mem0's extraction (`required.need_mem0ai` says whether the installed Mem0 is the version a test needs)."""

from __future__ import annotations

import json
from collections.abc import Callable

from memtrace_opt.data import Conversation
from memtrace_opt.programs.base import MemoryState
from memtrace_opt.programs.mem0ai import Mem0aiMemory
from memtrace_opt.testing import FakeCall, FakeReply, Skill
from memtrace_opt.testing.mem0_skills import additive_extract, mem0_skills
from memtrace_opt.testing.skills import default_skills


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
