"""Test helpers for memtrace-opt and for users testing their own DSPy programs offline."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before dspy/litellm are imported

from memtrace_opt.testing.fake_lm import (  # noqa: E402
    DEFAULT_SKILL,
    FakeCall,
    FakeEngine,
    FakeReply,
    FakeTimeout,
    Skill,
    fake_lm,
    use_fake_lm,
)

__all__ = [
    "DEFAULT_SKILL",
    "FakeCall",
    "FakeEngine",
    "FakeReply",
    "FakeTimeout",
    "Skill",
    "fake_lm",
    "use_fake_lm",
]
