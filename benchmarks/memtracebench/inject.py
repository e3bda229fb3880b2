"""Fault injection: for a question the system answered right, outputs of one operation that would lose the
information it needed, one plan per error type the system's shape allows.

| error type | perturbed op | how |
|---|---|---|
| ExtractionError | the first LM-backed write op that carried the information (else any carrier) | items/sentences holding it removed |
| UpdateError | the update decision (an op whose outputs are `{event, unit_id, text}` actions) whose ADD or UPDATE brought the information into the unit that holds it at question time | that action dropped: a needed update skipped |
| UpdateError | else a later update decision that was shown the unit holding it | an UPDATE of that unit, with text that lacks it |
| DeletionError | the update decisions shown live units that hold it, the one shown the most first (two plans at most) | DELETEs of those units |
| RetrievalError | the question's first retrieval op, else its last merge/rerank | the returned units holding it removed |
| ResponseError | the answer op | a wrong answer |

Store-writing ops cannot be forced (replay always runs them), so there is no injection at them: long-context
trimming and ingestion, RAG indexing. A plan is kept only if replaying it makes the answer wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memtrace_opt.attribution import (
    DELETION,
    EXTRACTION,
    RESPONSE,
    RETRIEVAL,
    UPDATE,
    Flow,
    GraphView,
    action_field,
    action_unit,
    value_parts,
)
from memtrace_opt.data import ABSTAIN_ANSWER

__all__ = ["Plan", "plan_injections", "INJECTABLE"]

INJECTABLE = (EXTRACTION, UPDATE, DELETION, RETRIEVAL, RESPONSE)
WRONG_ANSWER = ABSTAIN_ANSWER  # a decline: wrong for every question that has an answer
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")

Holds = Callable[[Any], bool]


@dataclass(frozen=True)
class Plan:
    """Force `forced` as the outputs of op `op_id` (seq `seq`); its fault is `error_type`."""

    error_type: str
    op_id: str
    op: str
    seq: int
    forced: dict[str, Any]
    how: str


def _writes(view: GraphView, op: str) -> bool:
    return bool(view.attrs(op).get("writes_store"))


def _strip(value: Any, holds: Holds) -> Any:
    """`value` without the list items / sentences that hold the information (None if nothing changed)."""
    if isinstance(value, str):
        sentences = [s for s in _SENTENCE.split(value) if s.strip()]
        kept = [s for s in sentences if not holds(s)]
        return " ".join(kept) if len(kept) < len(sentences) else None
    if isinstance(value, list):
        kept = [item for item in value if not holds(value_parts([item]))]
        return kept if len(kept) < len(value) else None
    return None


def _strip_outputs(outputs: Mapping[str, Any], holds: Holds) -> dict[str, Any]:
    forced: dict[str, Any] = {}
    for key, value in outputs.items():
        if key == "error":
            continue
        stripped = _strip(value, holds)
        if stripped is not None:
            forced[key] = stripped
    return forced


def _extraction(view: GraphView, flow: Flow, holds: Holds) -> list[Plan]:
    plans = []
    carriers = [op for op in flow.formation_ops(view) if not _writes(view, op)]
    for op in carriers:
        if view.error_type(op) != EXTRACTION:
            continue
        outputs = view.attrs(op).get("outputs")
        if isinstance(outputs, Mapping):
            forced = _strip_outputs(outputs, holds)
            if forced:
                plans.append(Plan(EXTRACTION, op, view.op_name(op), view.seq(op), forced,
                                  f"removed what holds the needed information from {', '.join(forced)}"))
    return plans


def _drop_units(view: GraphView, op: str, holds: Holds) -> Plan | None:
    outputs = view.attrs(op).get("outputs")
    if _writes(view, op) or not isinstance(outputs, Mapping):
        return None
    for key, value in outputs.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) and "$mem" in v for v in value):
            keep = [i for i, item in enumerate(value) if not holds(value_parts([item]))]
            if len(keep) == len(value):
                continue
            forced: dict[str, Any] = {key: [value[i] for i in keep]}
            for other, parallel in outputs.items():
                if other != key and isinstance(parallel, list) and len(parallel) == len(value):
                    forced[other] = [parallel[i] for i in keep]
            return Plan(RETRIEVAL, op, view.op_name(op), view.seq(op), forced,
                        f"dropped {len(value) - len(keep)} returned units that hold the needed information")
    return None


def _retrieval(view: GraphView, flow: Flow, holds: Holds) -> list[Plan]:
    """The question's first retrieval op, then its last read op before the answer that passes units on
    (a merge or rerank, where a second retrieval round would otherwise restore what the first lost)."""
    ops = [op for op in flow.read_ops if op != flow.answer_op
           and view.error_type(op) == RETRIEVAL]
    ordered = [flow.first_retrieval] if flow.first_retrieval else []
    ordered += [op for op in reversed(ops) if op not in ordered]
    plans = [_drop_units(view, op, holds) for op in ordered]
    return [p for p in plans if p is not None]


def _decision(view: GraphView, op: str) -> bool:
    """An update decision: an op that records `{event, unit_id, text}` actions and does not write the store."""
    return not _writes(view, op) and action_field(view.attrs(op).get("outputs")) is not None


def _versions_upto(view: GraphView, unit: str) -> list[str]:
    """The unit's versions, oldest first, up to and including `unit`."""
    chain = view.units.get(view.unit_id(unit), [unit])
    return chain[: chain.index(unit) + 1] if unit in chain else [unit]


def _shown(view: GraphView, op: str, unit_id: str) -> bool:
    """Whether the decision op was shown (a version of) the unit: it can only act on units it saw."""
    return any(view.is_mem(n) and view.unit_id(n) == unit_id for n in view.inputs(op))


def _skipped_write(view: GraphView, flow: Flow, holds: Holds) -> Plan | None:
    """The decision behind the version at which the needed information last entered a live unit (an ADD of the
    unit, or an UPDATE whose text holds it when the version before did not), without that action."""
    for unit in flow.live:
        unit_id = view.unit_id(unit)
        chain = _versions_upto(view, unit)
        entry = len(chain) - 1
        while entry > 0 and holds(view.text(chain[entry - 1])):
            entry -= 1
        if not holds(view.text(chain[entry])):
            continue
        writers = view.producers(chain[entry])
        decider = view.decider(writers[0]) if writers else None
        outputs = view.attrs(decider).get("outputs") if decider and decider != writers[0] else None
        key = action_field(outputs)
        if decider is None or key is None or _writes(view, decider):
            continue
        actions = list(outputs[key])  # type: ignore[index]
        event = "ADD" if entry == 0 else "UPDATE"
        index = next((i for i, a in enumerate(actions) if isinstance(a, Mapping) and a.get("event") == event
                      and holds(str(a.get("text", ""))) and (event == "ADD" or action_unit(a) == unit_id)), None)
        if index is None:
            continue
        kept = actions[:index] + actions[index + 1 :]
        how = f"dropped the {event} that brought the needed information into {unit_id} (a needed update skipped)"
        return Plan(UPDATE, decider, view.op_name(decider), view.seq(decider), {key: kept}, how)
    return None


def _deciders(view: GraphView, flow: Flow, unit: str) -> list[str]:
    """Update decisions after the unit's live version was written and before the question that were shown it
    (nothing rewrites the unit after them)."""
    created, unit_id = view.written_at(unit), view.unit_id(unit)
    return [op for op in view.ops if created < view.seq(op) < flow.question_seq and _decision(view, op)
            and _shown(view, op, unit_id)]


def _overwrite(view: GraphView, flow: Flow, holds: Holds) -> Plan | None:
    for unit in flow.live:
        deciders = _deciders(view, flow, unit)
        if not deciders:
            continue
        op, unit_id = deciders[0], view.unit_id(unit)
        key = action_field(view.attrs(op)["outputs"])
        assert key is not None
        actions = list(view.attrs(op)["outputs"][key])
        stripped = _strip(view.text(unit), holds) or next(
            (str(a.get("text")) for a in actions if a.get("text") and not holds(str(a.get("text")))), "")
        if not stripped:
            continue
        extra = {"event": "UPDATE", "unit_id": unit_id, "text": stripped}
        how = f"added an UPDATE of {unit_id} that overwrites the needed information"
        return Plan(UPDATE, op, view.op_name(op), view.seq(op), {key: [*actions, extra]}, how)
    return None


def _deletions(view: GraphView, flow: Flow, holds: Holds) -> list[Plan]:
    """A decision that deletes every unit it was shown in a version holding the information (of the units
    live at question time: a memory system keeps a fact in several units, so deleting one of them seldom
    loses it); the decision shown the most such units first, then the earlier."""
    shown: dict[str, dict[str, str]] = {}  # decision op -> unit id -> the version it was shown
    for unit in flow.live:
        unit_id = view.unit_id(unit)
        for version in _versions_upto(view, unit):
            if not holds(view.text(version)):
                continue
            for op in view.consumers(version):
                if view.seq(op) < flow.question_seq and _decision(view, op):
                    shown.setdefault(op, {}).setdefault(unit_id, version)
    plans = []
    for op in sorted(shown, key=lambda o: (-len(shown[o]), view.seq(o)))[:2]:
        key = action_field(view.attrs(op)["outputs"])
        assert key is not None
        doomed = shown[op]
        actions = [a for a in view.attrs(op)["outputs"][key]
                   if not (isinstance(a, Mapping) and action_unit(a) in doomed)]
        deletes = [{"event": "DELETE", "unit_id": uid, "text": view.text(v)} for uid, v in doomed.items()]
        how = f"added a DELETE of {', '.join(doomed)}, which held the needed information"
        plans.append(Plan(DELETION, op, view.op_name(op), view.seq(op), {key: [*actions, *deletes]}, how))
    return plans


def _response(view: GraphView, flow: Flow, abstention: bool, distractor: str | None) -> Plan | None:
    op = flow.answer_op
    wrong = (distractor or "yes") if abstention else WRONG_ANSWER
    return Plan(RESPONSE, op, view.op_name(op), view.seq(op), {"answer": wrong}, f"answered {wrong!r}")


def plan_injections(
    view: GraphView,
    flow: Flow,
    kinds: Sequence[str] = INJECTABLE,
    *,
    abstention: bool = False,
    distractor: str | None = None,
) -> list[Plan]:
    """Plans for the question `flow` follows, by error type in `kinds` order: for extraction one per op that
    carried the information (LM-backed first), for retrieval the first retrieval op then the last one that
    passes units on, for update a skipped write then an overwrite, for deletion up to two deciding ops, for the others at most
    one."""
    holds: Holds = flow.needed.holds
    plans: list[Plan | None] = []
    for kind in kinds:
        if kind == EXTRACTION:
            plans.extend(_extraction(view, flow, holds))
        elif kind == RETRIEVAL:
            plans.extend(_retrieval(view, flow, holds))
        elif kind == UPDATE:
            plans += [_skipped_write(view, flow, holds), _overwrite(view, flow, holds)]
        elif kind == DELETION:
            plans.extend(_deletions(view, flow, holds))
        elif kind == RESPONSE:
            plans.append(_response(view, flow, abstention, distractor))
    return [p for p in plans if p is not None]
