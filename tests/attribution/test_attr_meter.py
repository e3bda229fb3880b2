"""Metering a block's LM use: calls and tokens counted, rolled up into the meter outside, kept when the block raises."""

from __future__ import annotations

import dspy
import pytest

from memtrace_opt.attribution._meter import Meter, metering
from memtrace_opt.testing import FakeEngine, Skill, fake_lm


def _lm():
    return fake_lm(engine=FakeEngine(skills=[Skill(outputs=("answer",), fn=lambda call: {"answer": "a kettle"})]),
                   name="fake/meter")


def test_a_metered_block_is_counted_inside_and_outside() -> None:
    lm = _lm()
    with dspy.context(lm=lm), metering() as outer:
        dspy.Predict("question -> answer")(question="What whistles in the kitchen?")
        inner = Meter()
        with metering(inner):
            dspy.Predict("question -> answer")(question="What boils water?")
            dspy.Predict("question -> answer")(question="What sits on the stove?")
    assert (inner.calls, outer.calls) == (2, 3) == (2, len(lm.engine.calls))
    assert 0 < inner.prompt_tokens < outer.prompt_tokens and 0 < inner.completion_tokens < outer.completion_tokens


def test_a_block_that_raises_is_still_counted() -> None:
    meter = Meter()
    with dspy.context(lm=_lm()), pytest.raises(RuntimeError), metering(meter):
        dspy.Predict("question -> answer")(question="What whistles in the kitchen?")
        raise RuntimeError("the replay broke")
    assert meter.calls == 1 and meter.prompt_tokens > 0
