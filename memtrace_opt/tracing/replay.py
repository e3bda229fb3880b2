"""Executable replay: run a recorded conversation again, reusing every operation whose content is unchanged.

    result = replay(program, conversation, questions, events_or_graph,
                    instructions={"answer.predict": "Answer in one word."},   # rewrite a predictor
                    forced={12: {"facts": ["Odalys moved to Tallinn."]}})      # override op:12's outputs
    result.answers, result.graph, result.lm_calls

Rules (see `memtrace_opt.memory.ops.ReplayControl`):
* The program is deep-copied; instruction changes go through `signature.with_instructions` on the copy.
* Memo: an op that does not write the store and whose content key (op name, instruction, demos, inputs) equals
  a recorded call's returns that call's recorded outputs without running: no LM call. Calls with the same key
  are served in recorded order (the last is repeated if the replay makes more of them). An op that takes the
  memory state is keyed by the state's digest of live unit versions (`MemoryState.__jsonable__`), so a search
  is reused only while the rebuilt store holds the same memory.
* Forced: `forced[seq]` replaces the outputs of the recorded op `op:{seq}` (merged over its recorded outputs),
  wherever a call with that op's recorded content key comes up. Store-writing ops cannot be forced.
* Store-writing ops always run, so the store is rebuilt live and its events are traced.
* The replay is itself traced: `result.graph` is the new run's graph.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
import networkx as nx

from memtrace_opt.data import Conversation, Question
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.ops import Operation
from memtrace_opt.memory.values import to_jsonable
from memtrace_opt.tracing.events import Event, EventSink, OpEvent, RunStart, events_of, read_events
from memtrace_opt.tracing.session import TracedConversation, trace_conversation

__all__ = ["RecordedOp", "RecordedControl", "ReplayResult", "replay", "recorded_ops", "with_instructions"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedOp:
    """What a replay needs of one recorded op call."""

    seq: int
    op: str
    content_key: str | None
    outputs: dict[str, Any] | None
    writes_store: bool
    error: str | None = None


def recorded_ops(record: Iterable[Event | dict[str, Any]] | nx.MultiDiGraph | str | Path) -> list[RecordedOp]:
    """The op calls of a recorded run (events, an events file, or its graph), by seq."""
    if isinstance(record, (str, Path)):
        record = read_events(record)
    if isinstance(record, nx.Graph):
        ops = [
            RecordedOp(d["seq"], d["op"], d.get("content_key"), d.get("outputs"), bool(d.get("writes_store")), d.get("error"))
            for _, d in record.nodes(data=True)
            if d.get("kind") == "op"
        ]
    else:
        ops = [
            RecordedOp(e.seq, e.op, e.content_key, e.outputs, e.writes_store, e.error)
            for e in events_of(record)
            if isinstance(e, OpEvent)
        ]
    return sorted(ops, key=lambda o: o.seq)


def _recorded_meta(record: Any) -> dict[str, Any]:
    if isinstance(record, nx.Graph):
        g = record.graph
        return {"system": g.get("system"), "dataset": g.get("dataset"), "models": g.get("models") or {}}
    for event in events_of(record):
        if isinstance(event, RunStart):
            return {"system": event.system, "dataset": event.dataset, "models": event.models}
    return {}


class RecordedControl:
    """A `ReplayControl` over recorded op calls: forced outputs first, then the content-addressed memo.
    Thread-safe. `lookup` never raises."""

    def __init__(
        self,
        ops: Sequence[RecordedOp],
        forced: Mapping[int, Mapping[str, Any]] | None = None,
        *,
        retry_failed: bool = False,
    ) -> None:
        self._memo: dict[str, list[dict[str, Any]]] = {}
        self._served: dict[str, int] = {}
        self._forced: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        by_seq = {op.seq: op for op in ops}
        for seq, outputs in (forced or {}).items():
            op = by_seq.get(int(seq))
            if op is None:
                raise ConfigError(f"cannot force op:{seq}: the record has no such op")
            if op.writes_store:
                raise ConfigError(f"cannot force op:{seq} ({op.op}): it writes the store; force the op that feeds it")
            if op.content_key is None:
                raise ConfigError(f"cannot force op:{seq} ({op.op}): the record has no content key for it")
            self._forced[op.content_key] = {**(op.outputs or {}), **to_jsonable(dict(outputs))}
        for op in ops:
            if op.writes_store or op.content_key is None or op.outputs is None:
                continue
            if retry_failed and op.error:
                continue
            self._memo.setdefault(op.content_key, []).append(op.outputs)

    def lookup(self, op: Operation, key: str) -> tuple[dict[str, Any], str] | None:
        forced = self._forced.get(key)
        if forced is not None:
            return forced, "forced"
        with self._lock:
            found = self._memo.get(key)
            if not found:
                return None
            served = self._served.get(key, 0)
            self._served[key] = served + 1
            return found[min(served, len(found) - 1)], "memo"


def with_instructions(program: dspy.Module, instructions: Mapping[str, str]) -> dspy.Module:
    """A deep copy of `program` with the named predictors' instructions replaced (through
    `signature.with_instructions`, so no other copy sharing the Signature class changes)."""
    copied = program.deepcopy() if hasattr(program, "deepcopy") else copy.deepcopy(program)
    predictors = dict(copied.named_predictors())
    unknown = sorted(set(instructions) - set(predictors))
    if unknown:
        raise ConfigError(f"no predictor named {', '.join(unknown)}; the program has: {', '.join(sorted(predictors))}")
    for name, text in instructions.items():
        predictor = predictors[name]
        predictor.signature = predictor.signature.with_instructions(text)
    return copied


@dataclass
class ReplayResult:
    """The replayed run: its graph, answers and cost. `reused_ops` op calls came from the record (memo or
    forced); `rerun_ops` LM-backed op calls ran live; `lm_calls` LM calls were made."""

    graph: nx.MultiDiGraph
    answers: dict[str, str]
    reused_ops: int
    rerun_ops: int
    lm_calls: int
    events: list[Event]
    traced: TracedConversation
    program: dspy.Module
    reused_by_op: dict[str, int] = field(default_factory=dict)
    rerun_by_op: dict[str, int] = field(default_factory=dict)


def replay(
    program: dspy.Module,
    conversation: Conversation,
    questions: Sequence[Question] | None,
    record: Iterable[Event | dict[str, Any]] | nx.MultiDiGraph | str | Path,
    *,
    instructions: Mapping[str, str] | None = None,
    forced: Mapping[int, Mapping[str, Any]] | None = None,
    writer: EventSink | None = None,
    meta: Mapping[str, Any] | None = None,
    retry_failed: bool = False,
) -> ReplayResult:
    """Replays the recorded run of `conversation` (events, an events file path, or the run's graph) with
    `instructions` (predictor name -> new text) and `forced` outputs (op seq -> outputs) applied. With
    `retry_failed`, recorded calls that failed are run again instead of reused."""
    if isinstance(record, (str, Path)):
        record = read_events(record)
    elif not isinstance(record, nx.Graph):
        record = list(record)
    ops = recorded_ops(record)
    control = RecordedControl(ops, forced, retry_failed=retry_failed)
    changed = with_instructions(program, instructions or {})
    run_meta = {**_recorded_meta(record), **dict(meta or {})}
    run_meta["replay"] = {
        "instructions": sorted(instructions or {}),
        "forced": sorted(int(s) for s in (forced or {})),
        "recorded_ops": len(ops),
    }
    traced = trace_conversation(changed, conversation, questions, writer=writer, meta=run_meta, replay=control)
    log.info(
        "replay of %s: %d ops reused, %d LM ops re-run, %d LM calls",
        conversation.sample_id, traced.reused_ops, traced.rerun_ops, traced.lm_calls,
    )
    return ReplayResult(
        graph=traced.graph(),
        answers=dict(traced.answers),
        reused_ops=traced.reused_ops,
        rerun_ops=traced.rerun_ops,
        lm_calls=traced.lm_calls,
        events=traced.events,
        traced=traced,
        program=changed,
        reused_by_op=dict(traced.reused_by_op),
        rerun_by_op=dict(traced.rerun_by_op),
    )
