"""A fake attributor LM that answers attribution questions deterministically from the rendered prompt."""

from __future__ import annotations

import json
import re

import pytest

from memtrace_opt.testing.fake_lm import FakeCall, FakeEngine, Skill, fake_lm


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def judge_op(call: FakeCall) -> dict:
    """Faulty iff the gold answer's words are in the op's inputs but not all kept in its outputs (or it
    DELETEs them)."""
    gold = _words(call.inputs["gold_answer"])

    def covers(text: str) -> bool:
        return gold <= _words(text)

    seen = covers(call.inputs["op_inputs"].lower())
    out = call.inputs["op_outputs"].lower()
    faulty = seen and (not covers(out) or '"delete"' in out or "(deleted)" in out)
    return {"reason": "kept it" if not faulty else "lost the needed information", "faulty": faulty}


def check_gold(call: FakeCall) -> dict:
    supported = _words(call.inputs["gold_answer"]) <= _words(call.inputs["evidence"])
    return {"reason": "checked", "supported": supported}


def repair(call: FakeCall) -> dict:
    """Adds a fact with the gold answer to the first list in the outputs."""
    outputs = json.loads(call.inputs["current_outputs"])
    gold = call.inputs["needed"].split("gold answer: ", 1)[-1].split("\n", 1)[0]
    for key, value in outputs.items():
        if isinstance(value, list):
            outputs[key] = [*value, f"Alice's puppy is named {gold}"]
            break
    return {"repaired_outputs": json.dumps(outputs)}


ATTRIBUTOR_SKILLS = [
    Skill(outputs=("faulty",), fn=judge_op),
    Skill(outputs=("supported",), fn=check_gold),
    Skill(outputs=("repaired_outputs",), fn=repair),
]


@pytest.fixture
def attributor_engine() -> FakeEngine:
    return FakeEngine(skills=list(ATTRIBUTOR_SKILLS), model="fake-attributor")


@pytest.fixture
def attributor_lm(attributor_engine: FakeEngine):
    return fake_lm(engine=attributor_engine, name="fake/attributor")
