"""Live progress for the jobs that call a model: library code reports phases, a reporter shows them.

    from memtrace_opt import progress

    with progress.reporting(progress.for_stderr(quiet=False)):     # a command: stderr, terminal or log lines
        run_system(request)                                        # reports memorize / answer / score

Library code reports through the current reporter (context-local; threads a pool starts see the one installed
last), never knowing how it is shown: `phase()` for a block of known size, `stage()` for a one-line phase
change, `advance(unit)` for each step, `note()` for a line to read, `watch(usage)` for the LM calls and
tokens/s, `expect()` for the estimate the ETA is measured against. Without a reporter every call is a no-op.
"""

from memtrace_opt.progress._core import (
    CASE,
    QUESTION,
    SCORED,
    SESSION,
    STEPS,
    Expected,
    Meter,
    NullReporter,
    Phase,
    ProgressReporter,
    Status,
    active,
    advance,
    clock_text,
    expect,
    note,
    phase,
    reporting,
    silenced,
    stage,
    watch,
)
from memtrace_opt.progress._display import LogReporter, TerminalReporter, for_stderr, summary_line

__all__ = [
    "CASE", "QUESTION", "SCORED", "SESSION", "STEPS", "Expected", "Meter", "NullReporter", "Phase",
    "ProgressReporter", "Status", "active", "advance", "clock_text", "expect", "note", "phase", "reporting",
    "silenced", "stage", "watch", "LogReporter", "TerminalReporter", "for_stderr", "summary_line",
]
