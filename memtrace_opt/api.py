"""The one-line API.

    import memtrace_opt.api as mt
    program = mt.load_optimized("runs/opt/program.json")     # a ready MemoryProgram (or pass the run dir)
    state = program.new_state(conversation); program.memorize(conversation, state)
    program.respond(question, state).answer

    summary = mt.optimize("mem0", data="locomo:conv-26", out="runs/opt", preset="quick")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt.optimizers.core.program_io import load_optimized

__all__ = ["load_optimized", "optimize"]


def optimize(system: str, *, data: str = "sample", out: str | Path, preset: str | None = None, **options: Any) -> Any:
    """Run `memtrace optimize` from Python; `options` are `OptimizeRequest` fields (train, val, test, split,
    settings, attribution, roles, ...). Returns the `OptimizeSummary`."""
    from memtrace_opt.optimizers.optimize import OptimizeRequest, apply_preset, optimize_system

    request = OptimizeRequest(system=system, data=data, out=Path(out), preset=preset, **options)
    explicit = set(options) | ({"data"} if data != "sample" else set())
    return optimize_system(apply_preset(request, explicit))
