"""Rewriting programs, and what the optimizer reads of them (instructions, demos, settings, digests).

Rewrites go through `signature.with_instructions(...)` on a deep copy: assigning `signature.instructions`
would change every copy that shares the Signature class. program.json is written and read by `programs/files.py`
(`save_program`, `load_optimized`, re-exported here for the optimizer's callers).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from memtrace_opt.errors import ConfigError
from memtrace_opt.programs.files import (
    PROGRAM_SCHEMA_VERSION,
    load_optimized,
    save_program,
    system_name,
    write_deployment_files,
)

__all__ = [
    "PROGRAM_SCHEMA_VERSION",
    "instructions_of",
    "with_instruction",
    "with_settings",
    "settings_of",
    "changed_predictors",
    "changed_prompts",
    "demos_of",
    "demo_changes",
    "system_name",
    "save_program",
    "write_deployment_files",
    "load_optimized",
    "instructions_digest",
    "program_digest",
]

def program_digest(program: dspy.Module) -> str:
    """What makes two programs answer alike: their instructions, demos and settings."""
    state = [instructions_of(program), demos_of(program), settings_of(program)]
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


def instructions_of(program: dspy.Module) -> dict[str, str]:
    """Predictor name -> instruction text in force."""
    return {name: predictor.signature.instructions for name, predictor in program.named_predictors()}


def with_instruction(program: dspy.Module, predictor: str, text: str,
                     demos: Sequence[Mapping[str, Any]] | None = None) -> dspy.Module:
    """A deep copy of `program` whose predictor `predictor` has instruction `text` (and, when `demos` is given,
    exactly those demos); nothing else changes."""
    copied = program.deepcopy()
    predictors = dict(copied.named_predictors())
    if predictor not in predictors:
        raise ConfigError(f"no predictor named {predictor!r}; the program has: {', '.join(sorted(predictors))}")
    target = predictors[predictor]
    target.signature = target.signature.with_instructions(text)
    if demos is not None:
        target.demos = [dspy.Example(**demo) for demo in demos]
    return copied


def with_settings(program: dspy.Module, settings: Mapping[str, Any]) -> dspy.Module:
    """A deep copy of `program` (a `MemoryProgram`) whose config has `settings` (names of its fields) replaced;
    its prompts are kept. Raises ConfigError for a setting the config lacks or a value it refuses."""
    copied = program.deepcopy()
    config = copied.config
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        raise ConfigError(f"{type(config).__name__} has no setting {', '.join(unknown)}")
    copied.config = dataclasses.replace(config, **dict(settings))
    return copied


def settings_of(program: dspy.Module) -> dict[str, Any]:
    """A memory program's settings (its config's fields)."""
    return dataclasses.asdict(program.config)


def demos_of(program: dspy.Module) -> dict[str, list[dict[str, Any]]]:
    """Predictor name -> its demos as plain dicts."""
    return {name: [dict(demo) for demo in predictor.demos] for name, predictor in program.named_predictors()}


def changed_predictors(before: dspy.Module, after: dspy.Module) -> list[str]:
    """Names of predictors whose instruction differs between two programs of the same shape."""
    old, new = instructions_of(before), instructions_of(after)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def changed_prompts(before: dspy.Module, after: dspy.Module) -> list[str]:
    """Names of predictors whose prompt (instruction or demos) differs between two programs of the same shape."""
    old, new = demos_of(before), demos_of(after)
    return sorted(set(changed_predictors(before, after)) | {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)})


def demo_changes(before: dspy.Module, after: dspy.Module) -> dict[str, int]:
    """Predictor name -> its number of demos after, for each predictor whose demos differ (what BootstrapFewShot
    and our demos candidate change)."""
    old, new = demos_of(before), demos_of(after)
    return {name: len(new.get(name, [])) for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)}


def instructions_digest(instructions: dict[str, str]) -> str:
    """A short digest of a program's instructions (the parent of a round's candidates in their study keys)."""
    text = "\x1f".join(f"{k}\x1e{v}" for k, v in sorted(instructions.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
