"""The two ways a job's progress is shown on stderr: a live rich display on a terminal, log lines elsewhere."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from memtrace_opt.progress._core import (
    Meter,
    NullReporter,
    Phase,
    ProgressReporter,
    Status,
    calls_text,
    clock_text,
)

__all__ = ["TerminalReporter", "LogReporter", "for_stderr", "summary_line"]


def summary_line(status: Status) -> str:
    """The job's last line: its time, LM calls and rate, beside the estimate when there was one."""
    text = f"done in {clock_text(status.elapsed)} · {calls_text(status.lm_calls, status.cached_calls)}"
    if status.tokens_per_s is not None:
        text += f" · {status.tokens_per_s:,.0f} tokens/s"
    if status.estimate is not None:
        text += f" (estimate {clock_text(status.estimate)})"
    return text


def _phase_done(phase: Phase, meter: Meter) -> str:
    count = phase.count_text()
    live, cached = meter.calls()
    calls = calls_text(live - phase.calls_at_start, cached - phase.cached_at_start)
    return (f"{phase.name}: done" + (f", {count}" if count else "")
            + f" in {clock_text(meter.clock() - phase.started)}, {calls}")


class _LiveProgress(Progress):
    """rich's Progress with the job's status line under the phases; rich refreshes it on its own thread, so the
    elapsed time and the token rate move while one long LM call runs."""

    def __init__(self, meter: Meter, *columns: Any, **kwargs: Any) -> None:
        self.meter = meter
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        try:
            line = self.meter.status().line()
        except Exception:  # noqa: BLE001 - the refresh thread must live on
            line = ""
        yield Text(line, style="dim")


class TerminalReporter:
    """A live display on a terminal (stderr): one bar per open phase with its count, elapsed time and ETA, and
    a status line (elapsed, LM calls, tokens/s, the job's ETA). An ended phase leaves one line above it."""

    def __init__(self, console: Console | None = None, *, refresh_per_second: float = 2.0) -> None:
        self.console = console or Console(stderr=True)
        self.refresh_per_second = refresh_per_second
        self._progress: _LiveProgress | None = None
        self._tasks: dict[int, TaskID] = {}
        self._meter: Meter | None = None
        self._started = False  # a phase ran: the job's last line is worth printing

    def open(self, meter: Meter) -> None:
        self._meter = meter
        self._progress = _LiveProgress(
            meter,
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            refresh_per_second=self.refresh_per_second,
        )
        self._progress.start()

    def start(self, phase: Phase) -> None:
        self._started = True
        if self._progress is not None:
            self._tasks[id(phase)] = self._progress.add_task(phase.name, total=phase.total, count=phase.count_text())

    def advance(self, phase: Phase) -> None:
        task = self._tasks.get(id(phase))
        if self._progress is not None and task is not None:
            self._progress.update(task, completed=phase.done, count=phase.count_text())

    def end(self, phase: Phase) -> None:
        task = self._tasks.pop(id(phase), None)
        if self._progress is not None and task is not None and self._meter is not None:
            self._progress.remove_task(task)
            self._progress.console.print(_phase_done(phase, self._meter), style="dim", highlight=False)

    def note(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def close(self, error: BaseException | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._meter is not None and error is None and self._started:
            self.console.print(summary_line(self._meter.status()), style="dim", highlight=False)


class LogReporter:
    """Log lines (stderr when not a terminal): one when a phase starts and when it ends, and a heartbeat with the
    open phases and the status whenever `interval` seconds passed without a line (a background thread polls;
    `close` stops it)."""

    def __init__(self, stream: IO[str] | None = None, *, interval: float = 60.0, poll: float = 5.0,
                 thread: bool = True) -> None:
        self.stream = stream
        self.interval = interval
        self.poll = min(poll, interval)
        self.use_thread = thread
        self._lock = threading.Lock()
        self._open: list[Phase] = []
        self._meter: Meter | None = None
        self._last = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False  # a phase ran: the job's last line is worth printing

    def open(self, meter: Meter) -> None:
        self._meter = meter
        self._last = meter.clock()
        if self.use_thread:
            self._thread = threading.Thread(target=self._beat, name="memtrace-progress", daemon=True)
            self._thread.start()

    def start(self, phase: Phase) -> None:
        with self._lock:
            self._started = True
            self._open.append(phase)
        self._line(phase.name + (f" (0/{phase.total})" if phase.total is not None else ""))

    def advance(self, phase: Phase) -> None:
        return None

    def end(self, phase: Phase) -> None:
        with self._lock:
            if phase in self._open:
                self._open.remove(phase)
        if self._meter is not None:
            self._line(_phase_done(phase, self._meter))

    def note(self, text: str) -> None:
        self._line(text)

    def tick(self) -> None:
        """A heartbeat line when `interval` seconds passed since the last line."""
        if self._meter is None or self._meter.clock() - self._last < self.interval:
            return
        with self._lock:
            phases = [f"{p.name}" + (f" ({p.count_text()})" if p.count_text() else "") for p in self._open]
        self._line("; ".join([*phases, self._meter.status().line()]))

    def close(self, error: BaseException | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._meter is not None and error is None and self._started:
            self._line(summary_line(self._meter.status()))

    def _beat(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a heartbeat never ends the job, nor itself
                continue

    def _line(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        with self._lock:
            if self._meter is not None:
                self._last = self._meter.clock()
            stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            stream.flush()


def for_stderr(quiet: bool = False) -> ProgressReporter:
    """The reporter a command uses: nothing with --quiet, a live display when stderr is a terminal, else log
    lines on stderr."""
    if quiet:
        return NullReporter()
    if sys.stderr.isatty() and os.environ.get("TERM") != "dumb":
        return TerminalReporter(Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR"))))
    return LogReporter()
