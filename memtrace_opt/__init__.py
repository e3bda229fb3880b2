"""memtrace-opt: trace LLM memory systems into executable memory evolution graphs, attribute each failed
question to its root-cause operation, and optimize the blamed operation's prompt in a closed loop."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
__all__ = ["__version__"]
