"""Trace events: typed, versioned records of one conversation run, written as JSON lines.

Every event is a frozen dataclass with a `type` tag; `to_dict()` gives its JSON form and `event_from_dict`
reads it back. The log of one run opens with `run_start` (carrying `schema_version`) and, when the run got
to its end, closes with `run_end`. `build_graph(events)` turns the flat log into the evolution graph.

| type        | written when                                                                    |
|-------------|---------------------------------------------------------------------------------|
| run_start   | before anything else: system, dataset, sample id, models by role, instructions  |
| turn        | once per conversation turn, before the write path runs                          |
| op          | when an operation call ends (ok, failed, or answered from a replay record)      |
| lm_call     | when an LM call made inside an operation ends                                   |
| store       | when the store reports a write or read (tied to the operation active then)      |
| question    | before the read path answers a question                                         |
| answer      | after it answered (or failed: `error` set, `answer` "")                         |
| run_end     | after the last question                                                         |

`EventWriter` appends one line per event and flushes after each, so a crash keeps every event before it (or,
with `background=True`, leaves encoding and writing to its own thread and drains it on close);
`read_events` skips a truncated last line (a crash mid-write) with a warning.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from memtrace_opt.errors import MemtraceError
from memtrace_opt.redact import redact

__all__ = [
    "SCHEMA_VERSION",
    "Event",
    "RunStart",
    "TurnEvent",
    "OpEvent",
    "LMCallEvent",
    "StoreRecord",
    "QuestionEvent",
    "AnswerEvent",
    "RunEnd",
    "EVENT_TYPES",
    "event_from_dict",
    "EventSink",
    "EventWriter",
    "MemoryWriter",
    "read_events",
    "iter_event_dicts",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

Replayed = Literal["memo", "forced", "scoped"]


class _EventBase:
    """`to_dict()` for every event: a shallow dict of its fields (the payload values are already JSON)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELD_NAMES[type(self)]}


@dataclass(frozen=True, slots=True)
class RunStart(_EventBase):
    """The run's identity. `instructions` maps predictor name -> instruction text in force; `config` is the
    program's configuration; `meta` holds anything else the caller recorded (run id, replay of what, ...)."""

    system: str
    dataset: str
    sample_id: str
    models: dict[str, Any] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    schema_version: int = SCHEMA_VERSION
    type: Literal["run_start"] = "run_start"


@dataclass(frozen=True, slots=True)
class TurnEvent(_EventBase):
    """One conversation turn (`dia_id` as the dataset gives it)."""

    dia_id: str
    speaker: str
    text: str
    session_index: int
    timestamp: str | None = None
    image_caption: str | None = None
    type: Literal["turn"] = "turn"


@dataclass(frozen=True, slots=True)
class OpEvent(_EventBase):
    """One operation call, written when it ends.

    `seq` is the global execution order (assigned when the call starts, from 0); `parent_call_id` the
    enclosing operation's call id (None at top level); `predictor` the dotted name of the op's DSPy predictor
    in the traced program (None for non-LM ops); `instructions` the instruction in force; `inputs`/`outputs`
    the JSON form of the call (`memtrace_opt.memory.values.to_jsonable`); `error` the exception message, or
    the `error` output of an op that returned fallback outputs; `replayed` says the outputs came from a replay
    record ("memo"), were forced ("forced") or were the current program's output served by the optimizer's scoped
    replay ("scoped") instead of running; `content_key` is the op's content address; `role` what the op
    declares it does in a memory's life (`OpRole` value).
    """

    call_id: str
    seq: int
    op: str
    parent_call_id: str | None = None
    predictor: str | None = None
    instructions: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    error: str | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    replayed: Replayed | None = None
    content_key: str | None = None
    writes_store: bool = False
    role: str | None = None  # the op's declared role (`memory/roles.py`); None: it declares none, or an older log
    type: Literal["op"] = "op"


@dataclass(frozen=True, slots=True)
class LMCallEvent(_EventBase):
    """One LM call made inside operation `op_call_id` (None if no operation was active). Token counts are the
    provider's (None when it reported none); for a cache hit they are the original call's and `cached` is
    True. A reply an earlier sitting paid for, charged again as a resumed run replays it (`lm.reply_cache`,
    `carried`), is the live call it was: its tokens and seconds then, `cached` False."""

    call_id: str
    op_call_id: str | None
    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    response: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    cached: bool = False
    error: str | None = None
    type: Literal["lm_call"] = "lm_call"


@dataclass(frozen=True, slots=True)
class StoreRecord(_EventBase):
    """A store write or read (`MemoryUnit.to_dict()` forms), tied to the operation active when it happened."""

    op_call_id: str | None
    action: Literal["add", "update", "delete", "read"]
    unit: dict[str, Any]
    previous: dict[str, Any] | None = None
    store_id: str = ""
    type: Literal["store"] = "store"


@dataclass(frozen=True, slots=True)
class QuestionEvent(_EventBase):
    """A question about to be answered (`Question.to_dict()`)."""

    question: dict[str, Any]
    type: Literal["question"] = "question"

    @property
    def question_id(self) -> str:
        return str(self.question["question_id"])


@dataclass(frozen=True, slots=True)
class AnswerEvent(_EventBase):
    """The program's answer to `question_id`; `op_call_id` is the answering op's call (None if it never
    ran); `error` is set when the read path raised (then `answer` is "")."""

    question_id: str
    answer: str
    op_call_id: str | None = None
    error: str | None = None
    type: Literal["answer"] = "answer"


@dataclass(frozen=True, slots=True)
class RunEnd(_EventBase):
    """The run finished (its absence means the run crashed or is still going)."""

    ended_at: float
    ops: int = 0
    lm_calls: int = 0
    failures: int = 0
    type: Literal["run_end"] = "run_end"


Event = RunStart | TurnEvent | OpEvent | LMCallEvent | StoreRecord | QuestionEvent | AnswerEvent | RunEnd

EVENT_TYPES: dict[str, type] = {
    "run_start": RunStart,
    "turn": TurnEvent,
    "op": OpEvent,
    "lm_call": LMCallEvent,
    "store": StoreRecord,
    "question": QuestionEvent,
    "answer": AnswerEvent,
    "run_end": RunEnd,
}

_FIELD_NAMES: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in fields(cls)) for cls in EVENT_TYPES.values()}


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event a `to_dict()` produced. Unknown keys are ignored (newer writers); an unknown `type` or a
    newer `schema_version` raises MemtraceError."""
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise MemtraceError(f"unknown trace event type {kind!r}")
    if cls is RunStart and int(data.get("schema_version", SCHEMA_VERSION)) > SCHEMA_VERSION:
        raise MemtraceError(
            f"trace schema_version {data.get('schema_version')} is newer than this memtrace-opt reads ({SCHEMA_VERSION})"
        )
    try:
        return cls(**data)  # type: ignore[no-any-return]
    except TypeError:  # keys this version does not know (a newer writer)
        names = _FIELD_NAMES[cls]
        return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[no-any-return]


class EventSink(Protocol):
    """Receives events in the order they happen. `emit` is called from any thread and must not raise."""

    def emit(self, event: Event) -> None: ...


def _dumps(event: Event) -> str:
    """One event as its JSON line, secrets redacted (`memtrace_opt.redact`)."""
    return json.dumps(redact(event.to_dict()), ensure_ascii=False, separators=(",", ":"), default=repr)


class EventWriter:
    """Appends events to a JSON-lines file, one line each, flushed as they come. Thread-safe.

    By default `emit` encodes and writes the line itself, flushed before it returns: a crash of any kind keeps
    every event emitted before it. With `background=True`, `emit` only queues the event and a writer thread
    encodes, writes and flushes (a batch at a time), so the traced program's thread never waits on JSON or the
    disk; `flush()` waits for what is queued, `close()` (also run at interpreter exit) drains the queue first.
    An exception in the program loses nothing; only a hard kill of the process can lose the events of its
    last few tens of milliseconds. The runner uses the background mode.

    Use as a context manager, or call `close()`. With `keep=True`, `events` keeps the emitted events in
    memory too (`trace_conversation` already returns its run's events, so the default is not to). A write
    that fails (a full disk) is logged and counted in `write_errors`, never raised into the program.
    """

    def __init__(self, path: str | Path, *, keep: bool = False, background: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: TextIO | None = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.events: list[Event] = []
        self._keep = keep
        self.write_errors = 0
        self._queue: queue.SimpleQueue[Any] | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._drain, name=f"events:{self.path.name}", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def emit(self, event: Event) -> None:
        if self._queue is not None:
            if self._handle is None:
                log.warning("event after close dropped: %s", event.type)
                return
            if self._keep:
                self.events.append(event)  # list.append is atomic
            self._queue.put(event)
            return
        line = _dumps(event) + "\n"
        with self._lock:
            if self._keep:
                self.events.append(event)
            if self._handle is None:
                log.warning("event after close dropped: %s", event.type)
                return
            self._write(line)

    def _write(self, text: str) -> None:
        assert self._handle is not None
        try:
            self._handle.write(text)
            self._handle.flush()
        except OSError:
            self.write_errors += 1
            log.exception("could not write trace events to %s", self.path)

    def _drain(self) -> None:
        """The writer thread: take everything queued, encode, write once, flush; a sentinel ends it, an
        Event marker is set once everything before it is on disk."""
        assert self._queue is not None
        done = False
        while not done:
            batch = [self._queue.get()]
            if batch[0] is not _STOP and not isinstance(batch[0], threading.Event):
                time.sleep(_BATCH_SECONDS)  # let a burst of events gather: one write, few thread switches
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines, markers = [], []
            for item in batch:
                if item is _STOP:
                    done = True
                elif isinstance(item, threading.Event):
                    markers.append(item)
                else:
                    try:
                        lines.append(_dumps(item) + "\n")
                    except Exception:  # noqa: BLE001 - one unencodable event must not stop the others
                        self.write_errors += 1
                        log.exception("could not encode a %s event", getattr(item, "type", "?"))
            with self._lock:
                if lines and self._handle is not None:
                    self._write("".join(lines))
            for marker in markers:
                marker.set()

    def flush(self) -> None:
        """Returns once every event emitted so far is on disk."""
        if self._queue is None or self._thread is None or not self._thread.is_alive():
            return
        marker = threading.Event()
        self._queue.put(marker)
        marker.wait()

    def close(self) -> None:
        if self._queue is not None and self._thread is not None:
            if self._thread.is_alive():
                self._queue.put(_STOP)
                self._thread.join()
            atexit.unregister(self.close)
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
        if self._queue is not None:  # events emitted after close
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP and not isinstance(item, threading.Event):
                    log.warning("event after close dropped: %s", item.type)

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_STOP = object()
_BATCH_SECONDS = 0.02


class MemoryWriter:
    """Keeps events in a list (no file)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def close(self) -> None:
        return None


def iter_event_dicts(path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of an events file; a truncated last line is skipped with a warning, any other bad
    line raises MemtraceError naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise MemtraceError(f"{path}: no such events file")
    with path.open(encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    last = len(lines)
    while last and not lines[last - 1].strip():
        last -= 1
    for number, line in enumerate(lines[:last], start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as error:
            if number == last:
                log.warning("%s: skipping a truncated last line %d (%s)", path, number, error.msg)
                return
            raise MemtraceError(f"{path}: line {number} is not valid JSON ({error.msg})") from error


def read_events(path: str | Path, *, where: Callable[[dict[str, Any]], bool] | None = None) -> list[Event]:
    """Every event of an events file (see `iter_event_dicts` for damaged files)."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()  # a large log allocates many small acyclic objects: the collector's passes dominate otherwise
    try:
        return [event_from_dict(d) for d in iter_event_dicts(path) if where is None or where(d)]
    finally:
        if was_enabled:
            gc.enable()


def events_of(items: Iterable[Event | dict[str, Any]]) -> Iterator[Event]:
    """Events from events or their dict forms."""
    for item in items:
        yield event_from_dict(item) if isinstance(item, dict) else item
