"""Helpers of the optimizer tests: a fake LM with the instruction-sensitive default skills plus a
reflection skill, and a Mem0 program with a planted bad fact-extraction instruction (no word about dates,
so the fake extractor drops every fact with a date in it)."""

from __future__ import annotations

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.testing import FakeCall, FakeEngine, Skill
from memtrace_opt.testing.skills import default_skills

EXTRACT = "extract_facts.predict"
ANSWER = "answer.predict"
DECIDE = "update_decision.predict"
BAD_EXTRACT = (
    "You keep the long-term memory of a conversation. Write down the facts worth remembering about the "
    "speakers, one short sentence each, naming the person."
)
FIX = " Keep every date, resolved to an absolute date."
FIXED = BAD_EXTRACT + "\n" + FIX.strip()  # what our loop makes of it: the rule appended on a line of its own


def reflect(call: FakeCall) -> dict:
    """The fake reflection LM: asked for a whole instruction, GEPA's proposer (which names no approach) and
    our add-rules approach append the fix; the other approaches write a useless instruction."""
    current = call.inputs.get("current_instruction", "")
    if call.inputs.get("approach", "Keep the current instruction and add").startswith("Keep the current instruction and add"):
        return {"new_instruction": current + FIX}
    return {"new_instruction": "Write short notes about the people. Skip anything about time."}


def add_rules(call: FakeCall) -> dict:
    """The fake reflection LM asked only for rules (our first approach): the fix."""
    return {"rules": FIX.strip()}


def make_models(reflection=reflect, rules=add_rules) -> tuple[Models, FakeEngine]:
    engine = FakeEngine(skills=[Skill(("new_instruction",), reflection, name="reflect"),
                                Skill(("rules",), rules, name="add-rules"), *default_skills()])
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine), engine
