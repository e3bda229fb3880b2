"""Rewriting, saving and loading optimized programs.

Rewrites go through `signature.with_instructions(...)` on a deep copy: assigning `signature.instructions`
would change every copy that shares the Signature class. `save_program` writes DSPy's own state file (what
`Program().load(path)` reads) with one extra top-level key, `memtrace` (system, settings, schema_version),
which `load_optimized` uses to rebuild the right program; plain DSPy ignores it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from memtrace_opt.errors import ConfigError
from memtrace_opt.programs import SYSTEMS, MemoryProgram, make_program

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

PROGRAM_SCHEMA_VERSION = 1


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


def system_name(program: MemoryProgram) -> str:
    """The name a program's class is found by (built-in, or a library's), else its import path `module:Class`."""
    path = f"{type(program).__module__}:{type(program).__name__}"
    return next((name for name, target in SYSTEMS.items() if target == path), path)


def save_program(program: MemoryProgram, path: str | Path, *, extra: dict[str, Any] | None = None) -> Path:
    """Writes `program`'s DSPy state to `path` (.json) plus the `memtrace` key naming its system."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    state = json.loads(path.read_text(encoding="utf-8"))
    state["memtrace"] = {
        "schema_version": PROGRAM_SCHEMA_VERSION,
        "system": system_name(program),
        "settings": program.config.to_dict(),
        **(extra or {}),
    }
    path.write_text(json.dumps(state, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_deployment_files(program: MemoryProgram, directory: str | Path) -> list[Path]:
    """Writes into `directory` (beside a saved program.json) the files `program` says a user deploys with it
    (`MemoryProgram.deployment_files`: for `mem0ai`, the Mem0 configuration of its prompts). Returns their paths."""
    written = []
    for name, text in program.deployment_files().items():
        path = Path(directory) / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def load_optimized(path: str | Path, *, system: str | None = None, settings: dict[str, Any] | None = None) -> MemoryProgram:
    """A ready memory program from a saved `program.json` (or a run directory holding one).

    The system and its settings come from the file's `memtrace` key unless given."""
    path = Path(path)
    if path.is_dir():
        path = path / "program.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no such program file")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path}: not a program state file ({error})") from error
    meta = state.get("memtrace") or {}
    system = system or meta.get("system")
    if not system:
        raise ConfigError(f"{path} does not name its system (no 'memtrace' key): pass system=...")
    program = make_program(system, settings if settings is not None else meta.get("settings"))
    try:
        program.load(str(path))
    except Exception as error:  # noqa: BLE001 - a state that does not fit the program is a user error
        raise ConfigError(f"{path}: cannot load into {system}: {error}") from error
    return program


def instructions_digest(instructions: dict[str, str]) -> str:
    """A short digest of a program's instructions (the parent of a round's candidates in their study keys)."""
    text = "\x1f".join(f"{k}\x1e{v}" for k, v in sorted(instructions.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
