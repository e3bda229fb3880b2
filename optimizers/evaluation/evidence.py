"""The evidence a proposer sees for one predictor: its blamed op calls, calls in correctly answered cases, and
what the blamed calls have in common (`diagnosis.py`, read from all of them).

For each blamed case the verdict names the op call (`op:{seq}`); what that call was shown and produced is
the LM exchange the memo recorded for its content key (the rendered input fields and the raw reply), or, for
a call served from the memo with no recorded exchange, the JSON of its inputs and outputs as text. A correct
case contributes the last call of the same predictor among the ancestors of its answer in the graph.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx

from memtrace_opt.attribution import GraphView, value_text
from memtrace_opt.metrics.text import answer_tokens
from memtrace_opt.optimizers.core.evidence import OpEvidence, ProposalEvidence, without_adapter_tail
from memtrace_opt.optimizers.evaluation.blame import Blame, op_seq
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.carry import carries
from memtrace_opt.optimizers.evaluation.diagnosis import diagnose
from memtrace_opt.optimizers.evaluation.memo import LMExchange, ReplayMemo
from memtrace_opt.tracing import OpEvent, answer_node

__all__ = ["build_evidence", "correct_calls", "GraphCache", "op_event", "output_text", "predictor_calls"]

_TEXT_LIMIT = 2400


class GraphCache:
    """The graph of each traced conversation of one evaluation, built on first use."""

    def __init__(self, evaluation: EvalResult) -> None:
        self.evaluation = evaluation
        self._graphs: dict[str, nx.MultiDiGraph] = {}

    def get(self, key: str) -> nx.MultiDiGraph:
        if key not in self._graphs:
            self._graphs[key] = self.evaluation.traces[key].graph()
        return self._graphs[key]


def output_text(event: OpEvent, limit: int | None = None) -> str:
    """An op call's outputs (its error left out) as plain text, clipped to `limit` characters."""
    return value_text({k: v for k, v in (event.outputs or {}).items() if k != "error"}, limit)


def op_event(evaluation: EvalResult, key: str, seq: int) -> OpEvent | None:
    """The op call `op:{seq}` of conversation `key`'s traced run."""
    return next((e for e in evaluation.traces[key].events if isinstance(e, OpEvent) and e.seq == seq), None)


def _shown_and_produced(event: OpEvent, memo: ReplayMemo) -> tuple[str, str]:
    """The op's input and output as text, whole (`OpEvidence.render` clips them, keeping the input's end)."""
    exchange = memo.exchange(event.content_key)
    if exchange is not None:
        return without_adapter_tail(exchange.prompt).rstrip(), exchange.response[:_TEXT_LIMIT]
    return value_text(event.inputs, _TEXT_LIMIT), output_text(event, _TEXT_LIMIT)


def _evidence(case: CaseResult, event: OpEvent, memo: ReplayMemo, reason: str) -> OpEvidence:
    shown, produced = _shown_and_produced(event, memo)
    return OpEvidence(
        case_id=case.case_id,
        question=case.question.question,
        gold=case.question.answer,
        prediction=case.prediction,
        shown=shown,
        produced=produced,
        reason=reason,
    )


def predictor_calls(graph: nx.MultiDiGraph, case_id: str, predictor: str) -> list[int]:
    """Seqs of `predictor`'s op calls among the ancestors of case `case_id`'s answer, latest first."""
    node = answer_node(case_id)
    if node not in graph:
        return []
    view = GraphView(graph)
    return sorted((int(graph.nodes[n]["seq"]) for n in nx.ancestors(graph, node)
                   if view.is_op(n) and graph.nodes[n].get("predictor") == predictor), reverse=True)


def build_evidence(
    predictor: str,
    instructions: Mapping[str, str],
    evaluation: EvalResult,
    blame: Blame,
    memo: ReplayMemo,
    *,
    max_cases: int = 3,
    graphs: GraphCache | None = None,
) -> ProposalEvidence:
    """The evidence for rewriting `predictor`: up to `max_cases` blamed calls and as many correct ones."""
    cases = evaluation.by_id()
    graphs = graphs or GraphCache(evaluation)
    blamed: list[OpEvidence] = []  # every blamed call: the diagnosis reads them all, the proposer `max_cases`
    op_name = ""
    for verdict in blame.by_predictor.get(predictor, []):
        case, seq = cases.get(verdict.case_id), op_seq(verdict.op_id)
        if case is None or seq is None:
            continue
        event = op_event(evaluation, case.conversation_key, seq)
        if event is None:
            continue
        op_name = op_name or event.op
        blamed.append(_evidence(case, event, memo, verdict.reason))
    failures = blamed[:max_cases]
    successes: list[OpEvidence] = []
    for case in evaluation.passed():
        seq = next(iter(predictor_calls(graphs.get(case.conversation_key), case.case_id, predictor)), None)
        event = op_event(evaluation, case.conversation_key, seq) if seq is not None else None
        if event is None:
            continue
        op_name = op_name or event.op
        successes.append(_evidence(case, event, memo, ""))
        if len(successes) >= max_cases:
            break
    return ProposalEvidence(
        predictor=predictor,
        op_name=op_name or predictor,
        instruction=instructions[predictor],
        failures=tuple(failures),
        successes=tuple(successes),
        findings=tuple(diagnose([(e.case_id, e.gold, e.prediction, e.shown, e.produced) for e in blamed])),
    )


def describe(evidence: ProposalEvidence) -> dict[str, Any]:
    """A short JSON summary of the evidence (case ids), for the study's round record."""
    return {
        "failures": [e.case_id for e in evidence.failures],
        "successes": [e.case_id for e in evidence.successes],
        "op": evidence.op_name,
        "findings": [finding.to_dict() for finding in evidence.findings],
    }


def correct_calls(predictor: str, evaluation: EvalResult, memo: ReplayMemo) -> Iterator[tuple[CaseResult, LMExchange]]:
    """Per correctly answered case (with a gold answer that has tokens), the predictor's call that served it:
    among its calls that are ancestors of the answer, the latest whose output carries the gold answer, else the
    latest; with the LM exchange recorded for it. Cases without such a call are skipped."""
    graphs = GraphCache(evaluation)
    for case in evaluation.passed():
        if not answer_tokens(case.question.answer):
            continue
        calls = predictor_calls(graphs.get(case.conversation_key), case.case_id, predictor)
        events = [e for seq in calls if (e := op_event(evaluation, case.conversation_key, seq)) is not None]
        chosen = next((e for e in events if carries(case.question.answer, output_text(e))), None)
        chosen = chosen or (events[0] if events else None)
        exchange = memo.exchange(chosen.content_key) if chosen is not None else None
        if exchange is not None:
            yield case, exchange
