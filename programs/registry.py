"""Find a memory program by built-in name or by import path (`mypkg.module:MyMemory`)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from memtrace_opt.errors import ConfigError
from memtrace_opt.programs.base import MemoryProgram

__all__ = ["BUILTIN_SYSTEMS", "LIBRARY_SYSTEMS", "SYSTEMS", "load_program_class", "make_program"]

BUILTIN_SYSTEMS: dict[str, str] = {
    "long_context": "memtrace_opt.programs.long_context:LongContextMemory",
    "rag": "memtrace_opt.programs.rag:RAGMemory",
    "mem0": "memtrace_opt.programs.mem0:Mem0Memory",
    "evermemos": "memtrace_opt.programs.evermemos:EverMemOS",
}
# Systems that run another library, found by name too; each needs its extra installed (its error says which).
LIBRARY_SYSTEMS: dict[str, str] = {
    "mem0ai": "memtrace_opt.programs.mem0ai.program:Mem0aiMemory",
}
SYSTEMS: dict[str, str] = {**BUILTIN_SYSTEMS, **LIBRARY_SYSTEMS}


def load_program_class(system: str) -> type[MemoryProgram]:
    """A built-in name (long_context, rag, mem0, evermemos), a library's (mem0ai) or `package.module:ClassName`
    (importable, or a file in the current directory)."""
    target = SYSTEMS.get(system, system)
    if ":" not in target:
        raise ConfigError(
            f"unknown system {system!r}: use one of {', '.join(SYSTEMS)} or an import path module:Class"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = _import(module_name)
    except ImportError as error:
        raise ConfigError(f"cannot import {module_name!r} for system {system!r}: {error}") from error
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(f"{module_name!r} has no attribute {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, MemoryProgram)):
        raise ConfigError(f"{target} is not a MemoryProgram subclass (see memtrace_opt.programs.base)")
    return cls


def _import(module_name: str) -> Any:
    """The module, found on sys.path or else in the current directory (the `memtrace` command's own
    sys.path does not hold it, so `--system mynotes:NotesMemory` beside mynotes.py works as in Python)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        here = str(Path.cwd())
        if error.name != module_name.split(".")[0] or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def make_program(system: str, settings: dict[str, Any] | None = None) -> MemoryProgram:
    cls = load_program_class(system)
    return cls(cls.Config.from_dict(settings))
