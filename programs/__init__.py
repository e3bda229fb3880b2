"""The memory systems, one DSPy program per file, and the registry that finds them by name or import path."""

from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.module_op import ModuleOp, PlainModuleOp, as_op
from memtrace_opt.programs.registry import BUILTIN_SYSTEMS, SYSTEMS, load_program_class, make_program
from memtrace_opt.programs.tunable import Tunable, tunable, tunables, tunables_for

__all__ = [
    "MemoryProgram",
    "MemoryState",
    "ProgramConfig",
    "ModuleOp",
    "PlainModuleOp",
    "as_op",
    "BUILTIN_SYSTEMS",
    "SYSTEMS",
    "load_program_class",
    "make_program",
    "Tunable",
    "tunable",
    "tunables",
    "tunables_for",
]
