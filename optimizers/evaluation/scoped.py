"""Scoped replay: a write-path candidate scored on the minibatch by re-running only the calls on the evidence
paths of the minibatch's questions.

A candidate for an extraction or an update decision changes the prompt of every call of its predictor, so a
cached replay re-runs all of them: the whole write path (minutes a conversation on a CPU). Only the calls in the
windows holding the minibatch questions' evidence turns can change those answers, and what their writes touch
re-runs anyway, because its inputs change. So the minibatch run serves every other call of the predictor the
output the current program's run recorded for it (`replayed: "scoped"`), and runs the ones in scope live. A
candidate that passes is validated with a full replay; scoped outputs are never learned by the memo, so no
later evaluation mistakes them for the candidate's own.

The scope of a conversation (`evidence_scope`): the seqs of the LM-backed op calls that descend, in the
current program's graph, from an evidence turn of a minibatch question (the calls that read those turns, and
everything downstream of their writes). Which calls each evaluation re-ran is recorded (`ReplayedOps`).

    scope = evidence_scope(evaluation)                       # {conversation key: [seq]}, kept in the round plan
    reuse = scoped_reuse(evaluation, candidate_program, predictor, scope)
    evaluator.evaluate(candidate_program, cases, reuse=reuse)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import dspy
import networkx as nx

from memtrace_opt.memory.ops import Operation
from memtrace_opt.memory.values import from_jsonable
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.evidence import GraphCache
from memtrace_opt.tracing import OpEvent

__all__ = ["ReplayedOps", "evidence_scope", "scoped_reuse", "replayed_ops", "SCOPED"]

SCOPED = "scoped"  # the `replayed` mark of a call served the current program's output by a scoped replay


def evidence_scope(evaluation: EvalResult) -> dict[str, list[int]]:
    """Per conversation of `evaluation`, the seqs of the LM-backed op calls on its questions' evidence paths."""
    graphs = GraphCache(evaluation)
    out: dict[str, list[int]] = {}
    for key in evaluation.traces:
        graph = graphs.get(key)
        turns = {f"turn:{dia}" for case in evaluation.cases if case.conversation_key == key
                 for dia in case.question.evidence}
        reached: set[str] = set()
        for node in turns & set(graph.nodes):
            reached |= nx.descendants(graph, node)
        out[key] = sorted(int(graph.nodes[n]["seq"]) for n in reached
                          if graph.nodes[n].get("kind") == "op" and graph.nodes[n].get("predictor"))
    return out


def _operation(program: dspy.Module, predictor: str) -> Operation | None:
    """The op of `program` whose LM predictor is `predictor` (e.g. `extract_facts` for `extract_facts.predict`)."""
    for name, module in program.named_sub_modules():
        owner = name.removeprefix("self.")
        if isinstance(module, Operation) and f"{owner}.predict" == predictor:
            return module
    return None


def scoped_reuse(evaluation: EvalResult, program: dspy.Module, predictor: str,
                 scope: Mapping[str, list[int]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per conversation, content key under `program` (the candidate) -> recorded outputs, for each call of
    `predictor` in `evaluation` (the current program's run) outside `scope`. Empty when the predictor's op is not
    found (the minibatch then runs in full)."""
    op = _operation(program, predictor)
    if op is None:
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, trace in evaluation.traces.items():
        inside = set(scope.get(key, ()))
        served = out.setdefault(key, {})
        for event in trace.events:
            if (isinstance(event, OpEvent) and event.predictor == predictor and event.seq not in inside
                    and event.outputs is not None and not event.error):
                served.setdefault(op.content_key(from_jsonable(event.inputs)), dict(event.outputs))
    return out


@dataclass(frozen=True)
class ReplayedOps:
    """Which LM-backed calls one evaluation re-ran: `scope` ("evidence" or "full"), the re-run calls by op and
    their ids per conversation, and the calls a scoped replay served from the current program's run."""

    scope: str
    rerun_by_op: dict[str, int] = field(default_factory=dict)
    rerun: dict[str, list[str]] = field(default_factory=dict)
    served: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replayed_ops(result: EvalResult, scope: str) -> ReplayedOps:
    """What `result`'s traced runs re-ran (LM-backed calls that were not replayed) and served scoped."""
    by_op: dict[str, int] = {}
    rerun: dict[str, list[str]] = {}
    served = 0
    for key, trace in (getattr(result, "traces", None) or {}).items():
        for event in trace.events:
            if not isinstance(event, OpEvent) or not event.predictor:
                continue
            if event.replayed == SCOPED:
                served += 1
            elif not event.replayed:
                by_op[event.op] = by_op.get(event.op, 0) + 1
                rerun.setdefault(key, []).append(f"op:{event.seq}")
    return ReplayedOps(scope, dict(sorted(by_op.items())), rerun, served)
