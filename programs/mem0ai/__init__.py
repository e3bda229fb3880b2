"""`mem0ai`: the installed Mem0 library as a traced memory program (see `program.py`)."""

from memtrace_opt.programs.mem0ai.program import MEM0_CONFIG_FILE, Mem0aiConfig, Mem0aiMemory

__all__ = ["MEM0_CONFIG_FILE", "Mem0aiConfig", "Mem0aiMemory"]
