"""program.json: a memory program written and read back.

`save_program` writes DSPy's own state file (what `Program().load(path)` reads) with one extra top-level key,
`memtrace` (system, settings, schema_version), which `load_optimized` uses to rebuild the right program; plain DSPy
ignores it. `write_deployment_files` writes beside it what a program says a user deploys with it (for `mem0ai`, the
Mem0 configuration of its prompts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memtrace_opt.errors import ConfigError
from memtrace_opt.programs.base import MemoryProgram
from memtrace_opt.programs.registry import SYSTEMS, make_program

__all__ = ["PROGRAM_SCHEMA_VERSION", "load_optimized", "save_program", "system_name", "write_deployment_files"]

PROGRAM_SCHEMA_VERSION = 1


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
