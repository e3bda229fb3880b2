"""Measuring a model's speed cuts its replies short on purpose: DSPy's warning that a reply was truncated stays
out of the user's terminal while it measures, and only then."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from memtrace_opt.estimate import measure_rates
from memtrace_opt.lm.roles import ModelSpec, build_lm
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.testing import FakeEngine
from memtrace_opt.testing.skills import default_skills


class CutShort(FakeEngine):
    """A fake engine that says every reply stopped at its token limit, as a real model's one-token reply does."""

    def complete(self, request):
        return dataclasses.replace(super().complete(request), finish_reason="length")


def truncation_warnings(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> list[str]:
    """What was said of a truncated reply: in the log records, and on stderr (DSPy's own handler writes there)."""
    said = [r.getMessage() for r in caplog.records] + capfd.readouterr().err.splitlines()
    return [line for line in said if "truncated" in line]


def test_the_speed_measurement_keeps_dspys_truncation_warnings_to_itself(caplog, capfd):
    lm = build_lm(ModelSpec(model="fake"), "rates", usage=UsageTracker(), fake_engine=CutShort(default_skills()))
    with caplog.at_level(logging.WARNING):
        rates = measure_rates(lm, model="fake")
    assert rates.prompt_tps > 0 and truncation_warnings(caplog, capfd) == []
    lm("Reply with OK.")  # outside the measurement a truncated reply is still told
    assert truncation_warnings(caplog, capfd)
