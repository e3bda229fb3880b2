"""Phases, the meter of a job's LM usage, and the current reporter (context-local).

Library code reports what it is doing; it never knows how (or whether) that is shown:

    with phase("memorize", total=12, counts=(SESSION,)):   # a block with a known size
        ...
        advance(SESSION)                                    # trace_conversation does this for every session
    stage("round 2: plan")                                  # one line: ends the stage before it at its level

Every function here is a no-op when no reporter is installed, and none raises for a reporter that does: a
failing display is logged once and the work goes on.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "SESSION", "QUESTION", "SCORED", "CASE", "STEPS", "Phase", "Status", "Expected", "Meter", "ProgressReporter",
    "NullReporter", "reporting", "silenced", "phase", "stage", "advance", "note", "watch", "expect", "active",
]

log = logging.getLogger(__name__)

# the units a phase counts: what `advance` reports
SESSION = "session"  # a conversation session memorized (`trace_conversation`)
QUESTION = "question"  # a question answered (`trace_conversation`)
SCORED = "scored"  # an answer scored (the runner)
CASE = "case"  # a failed case attributed
STEPS = (SESSION, QUESTION)  # the steps of one traced evaluation


@dataclass(eq=False)
class Phase:
    """One phase of a job: its name, its size in the units it `counts` (None: not known) and how far it got.
    `level` 0 is a `phase()` block; a stage (`stage()`) has level 1 or more and ends when another stage starts
    at its level or above it."""

    name: str
    total: int | None = None
    counts: tuple[str, ...] = STEPS
    level: int = 0
    started: float = 0.0
    calls_at_start: int = 0  # the meter's live LM calls and cache hits when the phase started
    cached_at_start: int = 0
    done: int = 0
    by_unit: dict[str, int] = field(default_factory=dict)

    def count_text(self) -> str:
        """"3/12", or what was done by unit ("2 sessions, 5 questions") when the total is not known."""
        if self.total is not None:
            return f"{self.done}/{self.total}"
        return ", ".join(f"{n} {unit}{'' if n == 1 else 's'}" for unit, n in self.by_unit.items() if n)

    def eta(self, now: float) -> float | None:
        """Seconds left at the pace so far (None without a total or before the first step)."""
        if self.total is None or self.done <= 0:
            return None
        return max(0.0, (now - self.started) / self.done * (self.total - self.done))


@dataclass(frozen=True)
class Expected:
    """What the job's estimate said: its seconds and LM calls (the ETA measures the pace against them)."""

    seconds: float
    lm_calls: int


@dataclass(frozen=True)
class Status:
    """The job at one moment: elapsed seconds, LM usage so far (`lm_calls` reached the model, `cached_calls` were
    served from a cache), the token rate over the last minute, and the seconds left (None without an estimate)."""

    elapsed: float
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_per_s: float | None = None
    eta: float | None = None
    estimate: float | None = None
    cached_calls: int = 0

    def line(self) -> str:
        parts = [f"elapsed {clock_text(self.elapsed)}", calls_text(self.lm_calls, self.cached_calls)]
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:,.0f} tokens/s")
        if self.eta is not None:
            parts.append(f"ETA {clock_text(self.eta)}")
        if self.estimate is not None:
            parts.append(f"estimate {clock_text(self.estimate)}")
        return " · ".join(parts)


def calls_text(live: int, cached: int) -> str:
    """`(12, 0)` -> "12 LM calls", `(12, 30)` -> "12 LM calls (+30 cached)": cache hits cost no model time and
    no budget, so they are never counted as calls."""
    return f"{live} LM calls" + (f" (+{cached} cached)" if cached else "")


def clock_text(seconds: float) -> str:
    """`75` -> "1:15", `3725` -> "1:02:05"."""
    whole = int(round(max(0.0, seconds)))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class UsageSource(Protocol):
    """What the meter reads: a `memtrace_opt.lm.usage.UsageTracker` (its `snapshot()` of `RoleUsage` by role, and
    where it has one its `replayed_seconds()`: the model time of replies an earlier sitting paid for, charged again
    as live calls)."""

    def snapshot(self) -> dict[str, Any]: ...


class Meter:
    """LM calls and tokens of the watched usage trackers, the token rate over the last minute, and the ETA
    measured against the job's estimate (`expect`). Thread-safe; `clock` is monotonic seconds."""

    WINDOW = 60.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self._sources: list[UsageSource] = []
        self._base: dict[int, tuple[int, int, int, int, float]] = {}  # what each tracker held when watched
        self._samples: deque[tuple[float, int]] = deque()
        self.expected: Expected | None = None
        self._expected_at: tuple[float, int, float] = (self.started, 0, 0.0)  # the clock, calls, replayed s then

    def watch(self, source: UsageSource) -> None:
        with self._lock:
            if all(s is not source for s in self._sources):
                self._sources.append(source)
                self._base[id(source)] = _totals([source])

    def expect(self, expected: Expected | None) -> None:
        """The estimate of the work from now on: the ETA measures the time and calls since (a job that runs
        several estimated parts in turn, as a benchmark running one system after another, gives each its own)."""
        measured = self._since_watched()
        self._expected_at = (self.clock(), measured[0], measured[4])
        self.expected = expected

    def usage(self) -> tuple[int, int, int]:
        """(LM calls that reached the model, prompt tokens, completion tokens) since each tracker was watched."""
        return self._since_watched()[:3]

    def calls(self) -> tuple[int, int]:
        """(LM calls that reached the model, calls a cache served) since each tracker was watched, read at once."""
        live, _, _, cached, _ = self._since_watched()
        return live, cached

    def _since_watched(self) -> tuple[int, int, int, int, float]:
        with self._lock:
            sources = list(self._sources)
            base = [self._base[id(s)] for s in sources]
        now = _totals(sources)
        return (now[0] - sum(b[0] for b in base), now[1] - sum(b[1] for b in base),
                now[2] - sum(b[2] for b in base), now[3] - sum(b[3] for b in base), now[4] - sum(b[4] for b in base))

    def status(self) -> Status:
        now = self.clock()
        calls, prompt, completion, cached, replayed = self._since_watched()
        tokens = prompt + completion
        with self._lock:
            self._samples.append((now, tokens))
            while len(self._samples) > 2 and now - self._samples[1][0] >= self.WINDOW:
                self._samples.popleft()
            first_t, first_tokens = self._samples[0] if now - self.started >= self.WINDOW else (self.started, 0)
        rate = (tokens - first_tokens) / (now - first_t) if now - first_t >= 1.0 and calls else None
        elapsed = now - self.started
        expected, (expected_t, expected_calls, expected_replayed) = self.expected, self._expected_at
        # the pace: replies charged again took the model their recorded seconds when paid for, not none now
        return Status(elapsed, calls, prompt, completion, rate,
                      _eta(expected, calls - expected_calls, now - expected_t + replayed - expected_replayed),
                      expected.seconds if expected is not None else None, cached)


def _totals(sources: Sequence[UsageSource]) -> tuple[int, int, int, int, float]:
    """(live calls, prompt tokens, completion tokens, cache hits, replayed seconds) of the trackers now."""
    calls = prompt = completion = cached = 0
    replayed = 0.0
    for source in sources:
        replayed += float(getattr(source, "replayed_seconds", lambda: 0.0)())
        for usage in source.snapshot().values():
            hits = int(getattr(usage, "cache_hits", 0))
            calls += int(getattr(usage, "calls", 0)) - hits
            cached += hits
            prompt += int(getattr(usage, "prompt_tokens", 0))
            completion += int(getattr(usage, "completion_tokens", 0))
    return calls, prompt, completion, cached, replayed


def _eta(expected: Expected | None, calls: int, elapsed: float) -> float | None:
    """Seconds left: the calls the estimate still expects at the pace measured since it was given, once there is
    a pace to measure (a twentieth of the calls, ten seconds); before that, the estimate less the time spent."""
    if expected is None:
        return None
    if expected.lm_calls and calls >= max(1, expected.lm_calls // 20) and elapsed >= 10.0:
        return max(0.0, (expected.lm_calls - calls) * elapsed / calls)
    return max(0.0, expected.seconds - elapsed)


class ProgressReporter(Protocol):
    """Shows a job's phases. Contract: called from any thread (one call at a time, under the session's lock);
    must not block for long; never raises into the work (a reporter that does anyway is logged once and kept
    out of the way). `open` comes first, with the meter to read; `close` last, once, with what ended the job
    (None: it finished; else the exception, which the command reports itself)."""

    def open(self, meter: Meter) -> None: ...

    def start(self, phase: Phase) -> None: ...

    def advance(self, phase: Phase) -> None: ...

    def end(self, phase: Phase) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self, error: BaseException | None) -> None: ...


class NullReporter:
    """Shows nothing (`--quiet`, and library calls without a display)."""

    def open(self, meter: Meter) -> None:
        return None

    def start(self, phase: Phase) -> None:
        return None

    def advance(self, phase: Phase) -> None:
        return None

    def end(self, phase: Phase) -> None:
        return None

    def note(self, text: str) -> None:
        return None

    def close(self, error: BaseException | None) -> None:
        return None


class _Session:
    """An installed reporter with its meter and open phases."""

    def __init__(self, reporter: ProgressReporter, meter: Meter) -> None:
        self.reporter = reporter
        self.meter = meter
        self.open: list[Phase] = []
        self.lock = threading.RLock()
        self.failed = False

    def call(self, method: str, *args: Any) -> None:
        """The reporter's `method`; what it raises is logged (once) and swallowed."""
        if self.failed:
            return
        try:
            getattr(self.reporter, method)(*args)
        except Exception:  # noqa: BLE001 - a display must never break the work it shows
            self.failed = True
            log.warning("progress display failed; the job goes on without it", exc_info=True)

    def start(self, phase: Phase) -> Phase:
        with self.lock:
            phase.started = self.meter.clock()
            phase.calls_at_start, phase.cached_at_start = self.meter.calls()
            self.open.append(phase)
            self.call("start", phase)
        return phase

    def end(self, phase: Phase) -> None:
        with self.lock:
            if phase in self.open:
                self.open.remove(phase)
                self.call("end", phase)

    def end_stages(self, level: int) -> None:
        with self.lock:
            for phase in [p for p in reversed(self.open) if p.level >= level > 0]:  # the deepest first
                self.end(phase)

    def advance(self, unit: str, n: int) -> None:
        with self.lock:
            for phase in self.open:
                if unit in phase.counts:
                    phase.done += n
                    phase.by_unit[unit] = phase.by_unit.get(unit, 0) + n
                    self.call("advance", phase)
            for phase in [p for p in self.open if p.total is not None and p.done >= p.total and unit in p.counts]:
                self.end(phase)  # complete: it ends now (its block's end then does nothing)

    def close(self, error: BaseException | None) -> None:
        with self.lock:
            if error is None:
                for phase in list(reversed(self.open)):
                    self.end(phase)
            self.open.clear()
            self.call("close", error)


_current: contextvars.ContextVar[_Session | None] = contextvars.ContextVar("memtrace_progress", default=None)
# threads a pool starts do not inherit the context: they report to the session installed last in the process
_installed: list[_Session] = []
_installed_lock = threading.Lock()


def _session() -> _Session | None:
    found = _current.get()
    if found is not None:
        return found
    with _installed_lock:
        return _installed[-1] if _installed else None


def active() -> bool:
    """Whether a reporter (other than a silenced block) is installed here."""
    found = _session()
    return found is not None and not isinstance(found.reporter, NullReporter)


@contextlib.contextmanager
def reporting(reporter: ProgressReporter, *, clock: Callable[[], float] = time.monotonic) -> Iterator[Meter]:
    """Install `reporter` as the current one for the block (and for threads started in it); yields its meter."""
    session = _Session(reporter, Meter(clock))
    token = _current.set(session)
    with _installed_lock:
        _installed.append(session)
    session.call("open", session.meter)
    error: BaseException | None = None
    try:
        yield session.meter
    except BaseException as raised:
        error = raised
        raise
    finally:
        session.close(error)
        with _installed_lock:
            _installed.remove(session)
        _current.reset(token)


def silenced() -> contextlib.AbstractContextManager[Meter]:
    """The block reports nothing (a caller that asked for no progress)."""
    return reporting(NullReporter())


@contextlib.contextmanager
def phase(name: str, total: int | None = None, counts: Sequence[str] = STEPS) -> Iterator[Phase]:
    """A phase for the block: started now, ended on leaving it."""
    session = _session()
    started = Phase(name, total, tuple(counts))
    if session is not None:
        session.start(started)
    try:
        yield started
    finally:
        if session is not None:
            session.end(started)


def stage(name: str | None, total: int | None = None, counts: Sequence[str] = STEPS, level: int = 2) -> None:
    """End the stages open at `level` and below it (deeper levels), then start stage `name` (None: start none).
    A one-line report of a phase change: compare's rows are level 1, an optimizer's steps level 2."""
    session = _session()
    if session is None:
        return
    session.end_stages(max(1, level))
    if name is not None:
        session.start(Phase(name, total, tuple(counts), max(1, level)))


def advance(unit: str, n: int = 1) -> None:
    """`n` more of `unit` done: every open phase that counts it moves on."""
    session = _session()
    if session is not None:
        session.advance(unit, n)


def note(text: str) -> None:
    """A line for the person watching (what a job will do, its estimate)."""
    session = _session()
    if session is not None:
        session.call("note", text)


def watch(source: UsageSource) -> None:
    """Count the LM calls and tokens `source` (a UsageTracker) records from now on."""
    session = _session()
    if session is not None:
        session.meter.watch(source)


def expect(expected: Expected | None) -> None:
    """The job's estimate, for the ETA."""
    session = _session()
    if session is not None:
        session.meter.expect(expected)
