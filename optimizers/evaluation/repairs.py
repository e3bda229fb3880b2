"""Repairs: what a blamed call should have produced, by rule and by the graph's own evidence (no LM call here).

For each failure blamed on the chosen predictor, the blamed call's outputs are repaired by rule (as
counterfactual attribution repairs them, `memtrace_opt.attribution.counterfactual.repair_outputs`): an
extraction gets the lost evidence turns added, each written as a fact (the speaker named, first person
rewritten, the turn's date kept), not as the raw turn; an update decision that skipped a needed write gets an
ADD of the fact that holds it, one that UPDATEd or DELETEd the memory holding it a NONE for that memory instead.
A repair is proposed only when

1. the lineage test holds: the blamed call's own output did not already hold the needed information
   (`NeededInfo.holds`; a DELETE's text is what the call destroyed, not what it held): an extraction that already
   held the answer, "repaired" by restating it, teaches nothing (`RepairCounts.lineage_rejected`), and
2. it has a demo form: the recorded call's input fields with the repaired reply as the LM would write it
   (`RepairCounts.no_demo` where it has none).

The round confirms a proposed repair where that is cheap, on the predictor's own local calls (`loop/steps.py`): the
repair as a demo, with its added facts as its call's target, re-run on the local set's other calls; it is kept when
it carries at least as many targets there as it loses (`not_confirmed` otherwise). Whole-conversation replay stays
for `memtrace attribute` (counterfactual attribution). A kept repair is the (inputs, output) pair the predictor
should have produced: a demo (`Repair.demo`), a target the reflection LM is shown beside what the call produced, and
its call's target in the local set (`Repair.added`).
An update decision's repaired reply is its recorded reply edited: added actions appended as ADDs with no id, a
changed action's written item turned into a NONE of the id the LM wrote, every other item byte for byte as
written. Its actions name units by the ids its prompt showed, so a changed action is written back only where the
recorded reply, read as the op reads it, gives back exactly the recorded actions (`decision_reply.py`).

    proposed = proposed_repairs(program, predictor, evaluation, blame, memo, max_repairs=2)
    proposed.repairs, proposed.counts.to_dict()
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.attribution import (
    DELETION,
    EXTRACTION,
    UPDATE,
    AttributionConfig,
    FailedCase,
    Flow,
    GraphView,
    action_field,
    error_type_for_op,
    value_parts,
)
from memtrace_opt.attribution.counterfactual import repair_outputs
from memtrace_opt.attribution.lineage import case_flow
from memtrace_opt.optimizers.core.evidence import prompt_fields
from memtrace_opt.optimizers.core.repair import REPAIR_CHARS, Repair, RepairCounts, RepairSet
from memtrace_opt.optimizers.evaluation.blame import Blame, op_seq
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.decision_reply import ReadsActions, actions_reply
from memtrace_opt.optimizers.evaluation.evidence import GraphCache, op_event
from memtrace_opt.optimizers.evaluation.local_set import predictor_op
from memtrace_opt.optimizers.evaluation.memo import LMExchange
from memtrace_opt.tracing import OpEvent

__all__ = ["REPAIR_CHARS", "Repair", "RepairCounts", "RepairSet", "as_fact", "proposed_repairs"]

log = logging.getLogger(__name__)



_FIRST_PERSON = ((r"\bI'm\b", "{s} is"), (r"\bI am\b", "{s} is"), (r"\bI was\b", "{s} was"), (r"\bI've\b", "{s} has"),
                 (r"\bI have\b", "{s} has"), (r"\bI'll\b", "{s} will"), (r"\bI'd\b", "{s} would"), (r"\bI\b", "{s}"),
                 (r"\b[Mm]y\b", "{s}'s"), (r"\b[Mm]yself\b", "{s}"), (r"\b[Mm]e\b", "{s}"), (r"\b[Mm]ine\b", "{s}'s"))


def as_fact(speaker: str, text: str, timestamp: str | None = None) -> str:
    """A turn written as a fact: its first person rewritten with the speaker's name (a sentence that does not
    start with the name gets "Name: " before it), the turn's date after it ("(12 April, 2021)")."""
    fact = " ".join(text.split())
    if speaker:
        for pattern, replacement in _FIRST_PERSON:
            fact = re.sub(pattern, replacement.format(s=speaker), fact)
        if not fact.startswith(speaker):
            fact = f"{speaker}: {fact}"
    day = (timestamp or "").rpartition(" on ")[2].strip()
    return f"{fact} ({day})" if day else fact


def _facts_of_evidence(view: GraphView, turns: Sequence[str]) -> list[str]:
    out = []
    for node in turns:
        attrs = view.attrs(node)
        value = attrs.get("value")
        speaker = attrs.get("speaker") or (value.get("speaker") if isinstance(value, Mapping) else None) or ""
        out.append(as_fact(str(speaker), view.turn_text(node), attrs.get("timestamp")))
    return out


def _repaired(view: GraphView, flow: Any, op: str, case: FailedCase, event: OpEvent) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """The repaired outputs of the blamed call and what they add, or None (no rule repair)."""
    outputs = {k: v for k, v in (event.outputs or {}).items() if k != "error"}
    kind = error_type_for_op(event.op, outputs, event.role)
    if kind == EXTRACTION:
        key = next((k for k, v in outputs.items() if isinstance(v, list) and all(isinstance(x, str) for x in v)), None)
        turns = list(flow.evidence.strict or flow.evidence.turns[:2])
        if key is None or not turns:
            return None
        facts = [f for f in _facts_of_evidence(view, turns) if f not in outputs[key]]
        return ({key: [*outputs[key], *facts]}, tuple(facts)) if facts else None
    repaired = repair_outputs(view, flow, op, case, None)
    if repaired is None:
        return None
    key = action_field(repaired) or next(iter(repaired), None)
    before = {json.dumps(a, sort_keys=True, default=str) for a in outputs.get(key or "", []) or []}
    added = tuple(str(a.get("text") or "") for a in repaired.get(key or "", []) or []  # a NONE adds nothing
                  if isinstance(a, Mapping) and a.get("unit_id") is None
                  and json.dumps(a, sort_keys=True, default=str) not in before)
    return repaired, added


def _reply(signature: Any, exchange: LMExchange, kind: str | None, outputs: Mapping[str, Any],
           repaired: Mapping[str, Any], op: Any = None) -> dict[str, str] | None:
    """The repaired reply's output fields as the LM writes them (an update decision's actions: `decision_reply.actions_reply`),
    or None when it has no such form."""
    recorded = prompt_fields(exchange.response)
    out: dict[str, str] = {}
    for name in signature.output_fields:
        value = repaired.get(name)
        if kind in (UPDATE, DELETION) and isinstance(value, list):
            if not isinstance(op, ReadsActions):  # no reader to tell which written item an action came from
                return None
            actions = outputs.get(name)
            text = actions_reply(recorded.get(name) or "[]", prompt_fields(exchange.prompt),
                                  actions if isinstance(actions, list) else [], value, op.read_actions)
            if text is None:
                return None
            out[name] = text
        elif isinstance(value, list):
            out[name] = json.dumps(value, ensure_ascii=False)
        elif name in recorded:
            out[name] = recorded[name]
        else:
            return None
    return out


def _held(outputs: Mapping[str, Any]) -> list[str]:
    """The blamed call's output in parts, as the lineage test reads it: a DELETE keeps nothing of its text (the
    op's actions carry their events as its reader wrote them, upper case)."""
    return [part for key, value in outputs.items() if key != "error"
            for part in value_parts([a for a in value if not (isinstance(a, Mapping) and a.get("event") == "DELETE")]
                                    if isinstance(value, list) else value)]


def _failed_case(case: CaseResult, graph: Any) -> FailedCase:
    question = case.question
    return FailedCase(case.case_id, question, question.answer, case.prediction, tuple(question.evidence),
                      sample_id=case.conversation_key.split("@", 1)[0], graph=graph)


@dataclass(frozen=True)
class _BlamedCall:
    """One blamed call of the predictor, once per (conversation, op): its case, op seq, event and LM exchange."""

    case: CaseResult
    seq: int
    event: OpEvent
    exchange: LMExchange


@dataclass(frozen=True)
class _Attempt:
    """What became of one blamed call: the `RepairCounts` field it counts under, and the proposed repair (when
    `outcome` is "kept")."""

    outcome: str
    repair: Repair | None = None


@dataclass(frozen=True)
class _Repairer:
    """What every attempt of one `confirmed_repairs` call shares."""

    program: dspy.Module
    predictor: str
    signature: Any
    evaluation: EvalResult
    memo: Any
    graphs: GraphCache
    config: AttributionConfig

    def blamed_calls(self, blame: Blame) -> Iterator[_BlamedCall]:
        """The predictor's blamed calls in verdict order, each call once, skipping those with no recorded exchange."""
        cases = self.evaluation.by_id()
        seen: set[tuple[str, int]] = set()
        for verdict in blame.by_predictor.get(self.predictor, []):
            case, seq = cases.get(verdict.case_id), op_seq(verdict.op_id)
            if case is None or seq is None or (case.conversation_key, seq) in seen:
                continue
            seen.add((case.conversation_key, seq))
            event = op_event(self.evaluation, case.conversation_key, seq)
            exchange = self.memo.exchange(event.content_key) if event is not None else None
            if event is not None and exchange is not None:
                yield _BlamedCall(case, seq, event, exchange)

    def attempt(self, call: _BlamedCall) -> _Attempt:
        """Repair the call by rule, apply the lineage test, and give it its demo form (no LM call)."""
        case, seq = call.case, call.seq
        proposal = self._rule_repair(call)
        if proposal is None:
            return _Attempt("no_repair")
        flow, (outputs, added) = proposal
        if flow.needed.holds(_held(call.event.outputs or {})):  # the call held what the answer needed: it lost nothing
            log.info("repair of %s at op:%d rejected: its output already held the needed information", case.case_id, seq)
            return _Attempt("lineage_rejected")
        event, exchange = call.event, call.exchange
        kind = error_type_for_op(event.op, event.outputs, event.role)
        reply = _reply(self.signature, exchange, kind, event.outputs or {}, outputs, predictor_op(self.program, self.predictor))
        repair = None if reply is None else Repair(case.case_id, f"op:{seq}", event.op, self.predictor, exchange.prompt,
                                                   exchange.response, reply, added, "")
        if repair is None or repair.demo(self.signature) is None:
            return _Attempt("no_demo")
        return _Attempt("kept", repair)

    def _rule_repair(self, call: _BlamedCall) -> tuple[Flow, tuple[dict[str, Any], tuple[str, ...]]] | None:
        """The case's information flow and the call's repaired outputs, or None (no rule repair)."""
        graph = self.graphs.get(call.case.conversation_key)
        try:
            view = GraphView.of(graph)
            failed = _failed_case(call.case, graph)
            flow = case_flow(view, failed, self.config)
            made = _repaired(view, flow, f"op:{call.seq}", failed, call.event)
        except Exception as error:  # noqa: BLE001 - a case the rules cannot follow has no repair
            log.info("repair of %s: %s", call.case.case_id, error)
            return None
        return None if made is None else (flow, made)



def proposed_repairs(
    program: dspy.Module,
    predictor: str,
    evaluation: EvalResult,
    blame: Blame,
    memo: Any,
    *,
    max_repairs: int = 2,
    config: AttributionConfig | None = None,
) -> RepairSet:
    """Up to `max_repairs` repairs of `predictor`'s blamed calls in `evaluation` (the replay `memo` holds their
    prompts and replies), each past the lineage test and with a demo form (module docstring); never raises for one
    case. Their confirmation is the round's (`RepairCounts.kept` then counts the confirmed)."""
    found = RepairSet()
    if max_repairs < 1:
        return found
    counts = dict.fromkeys(("tried", "no_repair", "lineage_rejected", "no_demo"), 0)
    repairer = _Repairer(program, predictor, dict(program.named_predictors())[predictor].signature, evaluation,
                         memo, GraphCache(evaluation), config or AttributionConfig())
    for call in repairer.blamed_calls(blame):
        counts["tried"] += 1
        attempt = repairer.attempt(call)
        if attempt.repair is None:
            counts[attempt.outcome] += 1
            continue
        found.repairs.append(attempt.repair)
        if len(found.repairs) >= max_repairs:
            break
    found.counts = RepairCounts(**counts)
    log.info("repairs of %s proposed: %d (%s)", predictor, len(found.repairs), found.counts.to_dict())
    return found
