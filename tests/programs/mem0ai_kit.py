"""Helpers of the `mem0ai` tests: a program that keeps its conversation's state, fake-LM skills that plant a failure
in one of Mem0's calls, and the lineage verdict of a question about what was planted (`required.need_mem0ai` says
whether the installed Mem0 is the version a test needs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import networkx as nx

from memtrace_opt.attribution import Verdict
from memtrace_opt.attribution.runs import attribute_run
from memtrace_opt.data import Conversation
from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.programs.base import MemoryState
from memtrace_opt.programs.mem0ai import Mem0aiMemory
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.testing import FakeCall, FakeEngine, FakeReply, Skill
from memtrace_opt.testing.mem0_skills import mem0_skills
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import load_graph

Edit = Callable[[list[dict]], list[dict]]


class KeptMemory(Mem0aiMemory):
    """`Mem0aiMemory` that keeps the state of the last conversation it opened (to ask its Mem0 afterwards)."""

    kept: MemoryState | None = None

    def new_state(self, conversation: Conversation) -> MemoryState:
        self.kept = super().new_state(conversation)
        return self.kept


def planted_skills(call: str, edit: Edit) -> list[Skill]:
    """The default skills, with the reply of Mem0's `call` ("mem0ai.extract", "mem0ai.update_decision") passed
    through `edit` (its list of memory objects)."""
    return planted_replies(call, lambda text: json.dumps({"memory": edit(json.loads(text)["memory"])}))


def planted_replies(call: str, edit: Callable[[str], str]) -> list[Skill]:
    """The default skills, with the reply text of Mem0's `call` passed through `edit`."""
    skill = next(s for s in mem0_skills() if s.name == call)

    def planted(request: FakeCall) -> dict:
        try:
            skill.fn(request)
        except FakeReply as reply:
            raise FakeReply(edit(reply.text)) from None
        raise AssertionError(f"the {call} skill always replies raw")

    return [Skill((), planted, name=skill.name, when=skill.when), *default_skills()]


def without(word: str) -> Edit:
    return lambda memories: [m for m in memories if word not in m["text"]]


def blamed(out: Path, skills: list[Skill], case_id: str) -> tuple[Verdict, nx.MultiDiGraph]:
    """Run mem0ai on the sample with `skills` into `out`; the lineage verdict of `case_id`, and the graph."""
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=FakeEngine(skills=skills))
    run_system(RunRequest(system="mem0ai", data="sample", out=out, judge=False), progress=False, models=models)
    verdict = next(v for v in attribute_run(out, "lineage").verdicts if v.case_id == case_id)
    return verdict, load_graph(out / "graphs" / "sample-1.json")
