"""Repairs: what a blamed call should have produced, confirmed by replay and by the graph's own evidence.

For each failure blamed on the chosen predictor, the blamed call's outputs are repaired by rule (as
counterfactual attribution repairs them, `memtrace_opt.attribution.counterfactual.repair_outputs`): an
extraction gets the lost evidence turns added, each written as a fact (the speaker named, first person
rewritten, the turn's date kept), not as the raw turn; an update decision that skipped a needed write gets an
ADD of the fact that holds it, one that UPDATEd or DELETEd the memory holding it a NONE for that memory instead.
The conversation is then replayed with the repaired outputs forced
(`memtrace_opt.tracing.replay`; unchanged ops come from the record). A repair is kept only when

1. the replay answers the question correctly (confirmed), and
2. the lineage test holds: the blamed call's own output did not already hold the needed information
   (`NeededInfo.holds`; a DELETE's text is what the call destroyed, not what it held). A replay that saves the answer is not yet a diagnosis: an extraction that already
   held the dog's breed, "repaired" by restating it, can tip a small answerer into the right answer, and a demo
   of that teaches nothing. Confirmations this rule rejects are counted (`RepairCounts.lineage_rejected`).

A kept repair is the (inputs, output) pair the predictor should have produced: a demo
(`Repair.demo`, the recorded prompt's fields and the repaired reply), a target the reflection LM is shown
beside what the call produced, and what the local check counts a candidate's re-run against (`Repair.added`).
An update decision's repaired reply is its recorded reply edited: added actions appended as ADDs with no id, a
changed action's written item turned into a NONE of the id the LM wrote, every other item byte for byte as
written. Its actions name units by the ids its prompt showed, so a changed action is written back only where the
recorded reply, read as the op reads it, gives back exactly the recorded actions (`decision_reply.py`); otherwise the
confirmed repair has no demo form and is counted (`RepairCounts.no_demo`).

    found = confirmed_repairs(program, predictor, evaluation, blame, evaluator, max_repairs=2)
    found.repairs, found.counts.to_dict()
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
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.decision_reply import actions_reply
from memtrace_opt.optimizers.evaluation.evidence import GraphCache, op_event
from memtrace_opt.optimizers.evaluation.memo import LMExchange
from memtrace_opt.tracing import OpEvent, ReplayResult

__all__ = ["REPAIR_CHARS", "Repair", "RepairCounts", "RepairSet", "confirmed_repairs", "as_fact"]

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
           repaired: Mapping[str, Any]) -> dict[str, str] | None:
    """The repaired reply's output fields as the LM writes them (an update decision's actions: `decision_reply.actions_reply`),
    or None when it has no such form."""
    recorded = prompt_fields(exchange.response)
    out: dict[str, str] = {}
    for name in signature.output_fields:
        value = repaired.get(name)
        if kind in (UPDATE, DELETION) and isinstance(value, list):
            actions = outputs.get(name)
            text = actions_reply(recorded.get(name) or "[]", prompt_fields(exchange.prompt),
                                  actions if isinstance(actions, list) else [], value)
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
    """What became of one blamed call: the `RepairCounts` field it counts under, the kept repair (when
    `outcome` is "kept") and the LM calls its replay spent."""

    outcome: str
    repair: Repair | None = None
    lm_calls: int = 0


@dataclass(frozen=True)
class _Repairer:
    """What every attempt of one `confirmed_repairs` call shares."""

    program: dspy.Module
    predictor: str
    signature: Any
    evaluation: EvalResult
    evaluator: CachedEvaluator
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
            exchange = self.evaluator.memo.exchange(event.content_key) if event is not None else None
            if event is not None and exchange is not None:
                yield _BlamedCall(case, seq, event, exchange)

    def attempt(self, call: _BlamedCall) -> _Attempt:
        """Repair the call by rule, confirm it by replay, apply the lineage test, and give it its demo form."""
        case, seq = call.case, call.seq
        proposal = self._rule_repair(call)
        if proposal is None:
            return _Attempt("no_repair")
        flow, (outputs, added) = proposal
        replayed = self._replay(call, outputs)
        if replayed is None:
            return _Attempt("not_confirmed")
        answer, lm_calls = str(replayed.answers.get(case.case_id, "")), replayed.lm_calls
        if not self.evaluator.metric(case.question, answer).correct:
            return _Attempt("not_confirmed", lm_calls=lm_calls)
        if flow.needed.holds(_held(call.event.outputs or {})):  # the call held what the answer needed: it lost nothing
            log.info("repair of %s at op:%d confirmed by replay but rejected: its output already held the "
                     "needed information", case.case_id, seq)
            return _Attempt("lineage_rejected", lm_calls=lm_calls)
        event, exchange = call.event, call.exchange
        reply = _reply(self.signature, exchange, error_type_for_op(event.op, event.outputs, event.role), event.outputs or {}, outputs)
        repair = None if reply is None else Repair(case.case_id, f"op:{seq}", event.op, self.predictor, exchange.prompt,
                                                   exchange.response, reply, added, answer)
        if repair is None or repair.demo(self.signature) is None:
            return _Attempt("no_demo", lm_calls=lm_calls)
        return _Attempt("kept", repair, lm_calls)

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

    def _replay(self, call: _BlamedCall, outputs: dict[str, Any]) -> ReplayResult | None:
        """The conversation replayed with the call's outputs forced, or None when the replay fails."""
        from memtrace_opt.optimizers.core.budget import BudgetExhausted
        from memtrace_opt.optimizers.evaluation.examples import resolve_conversation
        from memtrace_opt.tracing import replay

        key = call.case.conversation_key
        _, conversation = resolve_conversation(key)
        asked = [c.question for c in self.evaluation.cases if c.conversation_key == key]
        lm = self.evaluator.task_lm if self.evaluator.task_lm is not None else dspy.settings.lm
        try:
            with dspy.context(lm=lm):
                return replay(self.program, conversation, asked, self.evaluation.traces[key].events,
                              forced={call.seq: outputs})
        except BudgetExhausted:
            raise
        except Exception as error:  # noqa: BLE001 - a replay that fails confirms nothing
            log.warning("repair of %s: the replay failed: %s", call.case.case_id, error)
            return None


def confirmed_repairs(
    program: dspy.Module,
    predictor: str,
    evaluation: EvalResult,
    blame: Blame,
    evaluator: CachedEvaluator,
    *,
    max_repairs: int = 2,
    config: AttributionConfig | None = None,
) -> RepairSet:
    """Up to `max_repairs` repairs of `predictor`'s blamed calls in `evaluation`, each confirmed by a replay of
    its conversation and by the lineage test (module docstring); never raises for one case (a replay that
    fails is a repair not confirmed), except `BudgetExhausted` from the guarded task LM."""
    found = RepairSet()
    if max_repairs < 1:
        return found
    counts = dict.fromkeys(("tried", "no_repair", "not_confirmed", "lineage_rejected", "no_demo", "kept", "lm_calls"), 0)
    repairer = _Repairer(program, predictor, dict(program.named_predictors())[predictor].signature, evaluation,
                         evaluator, GraphCache(evaluation), config or AttributionConfig())
    for call in repairer.blamed_calls(blame):
        counts["tried"] += 1
        attempt = repairer.attempt(call)
        counts[attempt.outcome] += 1
        counts["lm_calls"] += attempt.lm_calls
        if attempt.repair is not None:
            found.repairs.append(attempt.repair)
            if len(found.repairs) >= max_repairs:
                break
    found.counts = RepairCounts(**counts)
    log.info("repairs of %s: %s", predictor, found.counts.to_dict())
    return found
