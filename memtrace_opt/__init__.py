"""memtrace-opt: trace LLM memory systems into executable memory evolution graphs, attribute each failed
question to its root-cause operation, and optimize the blamed operation's prompt in a closed loop."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
__all__ = ["__version__", "load_optimized"]


def __getattr__(name: str) -> Any:
    if name == "load_optimized":  # loaded lazily: it imports dspy
        from memtrace_opt.api import load_optimized

        return load_optimized
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
