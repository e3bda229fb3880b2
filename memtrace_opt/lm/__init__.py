"""Language models by role: LiteLLM models, the embedded llama.cpp model, the fake engine, usage."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before dspy/litellm are imported

from memtrace_opt.lm.embedded import EmbeddedEngine, is_embedded, parse_choice
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ROLES, ModelRoles, ModelSpec, build_lm
from memtrace_opt.lm.usage import RoleLM, RoleUsage, UsageTracker, usage_table

__all__ = [
    "ROLES",
    "EmbeddedEngine",
    "ModelRoles",
    "ModelSpec",
    "Models",
    "RoleLM",
    "RoleUsage",
    "UsageTracker",
    "build_lm",
    "is_embedded",
    "parse_choice",
    "usage_table",
]
