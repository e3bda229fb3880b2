"""Tracing: the hook that records a run as events, the memory evolution graph built from them, queries and
renderings of the graph, the check of where its lineage breaks, and executable replay.

Run-directory layout (what the runner writes, what `memtrace graph` reads):
    <run>/events/{sample}.jsonl   the events of one conversation run (`events_file`)
    <run>/graphs/{sample}.json    its evolution graph (`graph_file`)
`{sample}` is the sample id with characters other than letters, digits, `-`, `_` and `.` replaced by `_`.
"""

from __future__ import annotations

from pathlib import Path

from memtrace_opt.rundir import safe_name
from memtrace_opt.tracing.events import (
    SCHEMA_VERSION,
    AnswerEvent,
    Event,
    EventSink,
    EventWriter,
    LMCallEvent,
    MemoryWriter,
    OpEvent,
    QuestionEvent,
    RunEnd,
    RunStart,
    StoreRecord,
    TurnEvent,
    event_from_dict,
    read_events,
)
from memtrace_opt.tracing.graph import (
    CONTENT,
    GRAPH_SCHEMA_VERSION,
    answer_node,
    build_graph,
    graph_from_json,
    graph_to_json,
    load_graph,
    mem_id,
    op_id,
    question_node,
    save_graph,
    turn_id,
)
from memtrace_opt.tracing.hook import OpFailure, Tracer
from memtrace_opt.tracing.lineage_check import LineageCheck, OpBreak, describe_breaks, lineage_check
from memtrace_opt.tracing.queries import (
    EvidencePath,
    OpView,
    UnitLife,
    UnitVersion,
    ancestors,
    descendants,
    evidence_path,
    op_nodes,
    op_subgraph,
    paths_to_answer,
    unit_life,
)
from memtrace_opt.tracing.render import render_node, render_subgraph
from memtrace_opt.tracing.replay import RecordedControl, ReplayResult, recorded_ops, replay, with_instructions
from memtrace_opt.tracing.session import (
    TracedConversation,
    program_instructions,
    replay_active,
    trace_conversation,
)

EVENTS_DIR = "events"
GRAPHS_DIR = "graphs"


def events_file(run_dir: str | Path, sample_id: str) -> Path:
    """Where the events of one conversation run live: `<run>/events/{sample}.jsonl`."""
    return Path(run_dir) / EVENTS_DIR / f"{safe_name(sample_id)}.jsonl"


def graph_file(run_dir: str | Path, sample_id: str) -> Path:
    """Where the graph of one conversation run lives: `<run>/graphs/{sample}.json`."""
    return Path(run_dir) / GRAPHS_DIR / f"{safe_name(sample_id)}.json"


__all__ = [
    "SCHEMA_VERSION",
    "EVENTS_DIR",
    "GRAPHS_DIR",
    "safe_name",
    "events_file",
    "graph_file",
    # events
    "Event",
    "EventSink",
    "EventWriter",
    "MemoryWriter",
    "RunStart",
    "TurnEvent",
    "OpEvent",
    "LMCallEvent",
    "StoreRecord",
    "QuestionEvent",
    "AnswerEvent",
    "RunEnd",
    "event_from_dict",
    "read_events",
    # hook and sessions
    "Tracer",
    "OpFailure",
    "TracedConversation",
    "trace_conversation",
    "program_instructions",
    "replay_active",
    # graph
    "GRAPH_SCHEMA_VERSION",
    "CONTENT",
    "build_graph",
    "save_graph",
    "load_graph",
    "graph_to_json",
    "graph_from_json",
    "turn_id",
    "op_id",
    "mem_id",
    "question_node",
    "answer_node",
    # lineage breaks
    "LineageCheck",
    "OpBreak",
    "lineage_check",
    "describe_breaks",
    # queries and rendering
    "UnitLife",
    "UnitVersion",
    "OpView",
    "EvidencePath",
    "unit_life",
    "op_subgraph",
    "paths_to_answer",
    "ancestors",
    "descendants",
    "evidence_path",
    "op_nodes",
    "render_node",
    "render_subgraph",
    # replay
    "replay",
    "ReplayResult",
    "RecordedControl",
    "recorded_ops",
    "with_instructions",
]
