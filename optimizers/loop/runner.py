"""The `Runner` seam: who runs a round's jobs. The round submits jobs and never asks who runs them.

Contract of a `Runner`:
- `run(jobs, execute, done)` returns every job's result by key, as `execute(job.attrs)` gave it (a JSON-ready
  dict), each job run once, by this process or another worker sharing the study; it
  calls `done(key, result)` as soon as each result is known, so the caller records it before the next job (a
  killed run keeps it).
- A job the LM-call budget stops ends with the result `{"budget": why}`, and so does
  every job this runner had not started when it stopped: the budget is spent for all of them. It never raises for
  a spent budget; any other error of a job propagates (a worker's: after its retries).
- `publish()` shares what this process learned (the replay memo) with whoever runs the next jobs.

`LocalRunner` runs them here, in order. The workers' `Crew` (`crew.py`) is the other runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from memtrace_opt.optimizers.core.budget import BudgetExhausted
from memtrace_opt.optimizers.loop.crew import Job, worker_name

__all__ = ["LocalRunner", "Runner"]

Execute = Callable[[Mapping[str, Any]], dict[str, Any]]
Done = Callable[[str, dict[str, Any]], None]


class Runner(Protocol):
    worker: str
    shared: bool  # jobs may run in other processes: a job rebuilds what the planner only had in memory

    def run(self, jobs: Sequence[Job], execute: Execute, done: Done | None = None) -> dict[str, dict[str, Any]]: ...

    def publish(self) -> None: ...


class LocalRunner:
    """Runs each job in this process, in order (module doc)."""

    shared = False

    def __init__(self) -> None:
        self.worker = worker_name()

    def run(self, jobs: Sequence[Job], execute: Execute, done: Done | None = None) -> dict[str, dict[str, Any]]:
        results: dict[str, dict[str, Any]] = {}
        spent = ""
        for job in jobs:
            result: dict[str, Any] | None = None
            if not spent:
                try:
                    result = execute(job.attrs)
                except BudgetExhausted as stop:
                    spent = str(stop) or "the LM-call budget is spent"
            results[job.key] = result if result is not None else {"budget": spent}
            if done is not None:
                done(job.key, results[job.key])
        return results

    def publish(self) -> None:
        """Nothing to share: this process runs every job itself."""
