"""Replaying a failed case's conversation with one op's outputs repaired: the machinery behind counterfactual
attribution and graphtrace's confirmation.

A `ReplayContext` says what replaying the case needs (the program as it ran, the conversation, the record).
`repair_outputs` makes the outputs an op should have produced for the needed information (by rule, else by the
attributor LM); `CaseReplayer` replays the conversation first unchanged (does the record reproduce the failure?)
and then with one op's repaired outputs forced (`memtrace_opt.tracing.replay(..., forced={seq: outputs})`;
unchanged ops come from the record, later ops run live), and keeps every `Replay` it ran and the task model's
calls during them (`recorded` puts both on a verdict: `replays`, `cost.replay_*`). Repairs:
- retrieval (retrieve, merge, ...): the units that held the needed information at question time are added
  to the returned list;
- extraction (extract_*, chunk, ...): the evidence turns are added to the extracted list (or text);
- update/delete decisions: the UPDATE/DELETE that lost the information becomes NONE; a decision that skipped
  it gets an ADD of each input fact that holds it;
- otherwise the attributor LM rewrites the outputs (`RepairOutputs`).
Store-writing ops cannot be forced, and the answer op is never replayed (setting the answer is no test).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
import networkx as nx

from memtrace_opt.attribution._ask import Asker, evidence_text
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._meter import Meter, metering
from memtrace_opt.attribution._render import render_op
from memtrace_opt.attribution._types import (
    DELETION,
    EXTRACTION,
    RESPONSE,
    RETRIEVAL,
    UPDATE,
    FailedCase,
    Replay,
    Verdict,
    action_field,
    action_unit,
)
from memtrace_opt.attribution.signatures import RepairOutputs
from memtrace_opt.errors import MemtraceError

__all__ = ["CaseReplayer", "ReplayContext", "ReplayProvider", "case_question", "repair_outputs"]

AnswerCheck = Callable[[Any, str], bool]


@dataclass
class ReplayContext:
    """What replaying a case's conversation needs.

    `program` is the memory program as it ran (its instructions in force), `conversation` the
    `memtrace_opt.data.Conversation`; `record` the recorded run (events, an events file, or the graph; None
    = the case's graph); `lm` the task model the program runs on during replay (None = the LM in context);
    `instructions` predictor rewrites to apply; `forced` outputs (op seq -> outputs) every replay applies,
    e.g. an injected fault the record itself was made with (searches over the store run live in a replay,
    so a forced search result is only reproduced when forced again); `check(question, answer) -> bool`
    decides a replayed answer is correct (default: `score_answer(...).correct_by_rule`).
    """

    program: Any
    conversation: Any
    record: Any = None
    lm: Any = None
    instructions: Mapping[str, str] | None = None
    forced: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    check: AnswerCheck | None = None
    replay_fn: Callable[..., Any] | None = field(default=None, repr=False)


ReplayProvider = Callable[[FailedCase], "ReplayContext | None"]


def case_question(case: FailedCase) -> Any:
    """The case's question as a `memtrace_opt.data.Question`."""
    from memtrace_opt.data import Question

    if isinstance(case.question, Question):
        return case.question
    data = dict(case.question) if isinstance(case.question, Mapping) else {"question": str(case.question)}
    data.setdefault("question_id", case.question_id)
    data.setdefault("answer", case.gold)
    data.setdefault("category", data.get("category") or "single-hop")
    data.setdefault("evidence", list(case.evidence))
    return Question.from_dict(data)


def _tracing_replay() -> Callable[..., Any]:
    from memtrace_opt.tracing import replay

    return replay


def _recorded_questions(view: GraphView, conversation: Any, question: Any) -> list[Any]:
    """The conversation's questions answered in the record up to this one, in recorded order: a replay asks
    them again so that searches over the store (forced by call order, not content) line up with the record."""
    own = view.answer_op(question.question_id)
    known = {q.question_id: q for q in getattr(conversation, "questions", ()) or ()}
    # the conversation's own Question, not one rebuilt from the case: its JSON form (every field) is part of the
    # content keys of the recorded read-path ops, and a key that differs runs the op live instead of forced
    question = known.get(question.question_id, question)
    if own is None or not known:
        return [question]
    earlier = []
    for node in view.graph:
        if node.startswith("ans:") and node[4:] in known and node[4:] != question.question_id:
            op = view.answer_op(node[4:])
            if op is not None and view.seq(op) < view.seq(own):
                earlier.append((view.seq(op), known[node[4:]]))
    return [q for _, q in sorted(earlier, key=lambda pair: pair[0])] + [question]


def _key_of(view: GraphView, seq: int) -> str | None:
    return view.attrs(f"op:{seq}").get("content_key")


def _forced_applied(result: Any, keys: set[str | None]) -> bool:
    """Whether every recorded op call named by `keys` (content keys) came up in the replay and was answered
    with its forced outputs."""
    events = getattr(result, "events", None)
    if events is not None:
        applied = {getattr(e, "content_key", None) for e in events
                   if getattr(e, "type", None) == "op" and getattr(e, "replayed", None) == "forced"}
    else:
        graph = getattr(result, "graph", None)
        nodes = graph.nodes(data=True) if graph is not None else ()
        applied = {d.get("content_key") for _, d in nodes if d.get("replayed") == "forced"}
    return keys <= applied


def _default_check(question: Any, answer: str) -> bool:
    from memtrace_opt.metrics.score import score_answer

    return score_answer(question, answer).correct_by_rule


# repairs --------------------------------------------------------------------------------------------------
def _unit_json(view: GraphView, node: str) -> dict[str, Any]:
    attrs = view.attrs(node)
    value = attrs.get("value")
    if isinstance(value, Mapping) and "$mem" in value:
        return dict(value)
    return {
        "$mem": node,
        "unit_id": view.unit_id(node),
        "version": view.version(node),
        "text": view.text(node),
        "kind": view.unit_kind(node),
        "timestamp": attrs.get("timestamp"),
        "source_turns": list(attrs.get("source_turns") or []),
        "deleted": False,
        "metadata": dict(attrs.get("metadata") or {}),
    }


def _is_unit_list(value: Any) -> bool:
    return isinstance(value, list) and (not value or all(isinstance(v, Mapping) and "$mem" in v for v in value))


def _add_units(view: GraphView, flow: Flow, outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    units = [n for n in (flow.live or flow.formed) if n in view.graph][:3]
    key = next((k for k, v in outputs.items() if _is_unit_list(v)), None)
    if not units or key is None:
        return None
    present = {v.get("$mem") for v in outputs[key]}
    added = [_unit_json(view, n) for n in units if n not in present]
    if not added:
        return None
    repaired: dict[str, Any] = {key: added + list(outputs[key])}
    size = len(outputs[key])
    for other, value in outputs.items():  # parallel lists (scores) keep their length in step
        if other != key and isinstance(value, list) and len(value) == size and size:
            repaired[other] = [value[0]] * len(added) + list(value)
    return repaired


def _add_evidence(view: GraphView, flow: Flow, outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    turns = list(flow.evidence.strict or flow.evidence.turns[:2])
    lines = [view.turn_line(t) for t in turns]
    if not lines:
        return None
    for key, value in outputs.items():
        if key == "error" or not isinstance(value, list):
            continue
        if value and all(isinstance(v, Mapping) and "turns" in v for v in value) or (not value and key == "chunks"):
            # chunks of turns ({"text", "turns", "timestamp"}): one more chunk made of the evidence turns
            refs = [_turn_ref(view, t) for t in turns]
            chunk = {"text": "\n".join(lines), "turns": refs, "timestamp": refs[0].get("timestamp")}
            return {key: list(value) + [chunk]}
        if value and all(isinstance(v, str) for v in value) or (not value and key != "chunks"):
            return {key: list(value) + lines}
    for key, value in outputs.items():
        if key != "error" and isinstance(value, str):
            return {key: (value + "\n" + "\n".join(lines)).strip()}
    return None


def _turn_ref(view: GraphView, node: str) -> dict[str, Any]:
    """The JSON form of a turn (`to_jsonable` of the Turn), rebuilt from its graph node."""
    from memtrace_opt.data import Turn
    from memtrace_opt.memory.values import to_jsonable

    attrs = view.attrs(node)
    turn = Turn(str(attrs.get("dia_id")), str(attrs.get("speaker") or ""), str(attrs.get("value") or ""),
                int(attrs.get("session_index") or 0), attrs.get("timestamp"), attrs.get("image_caption"))
    return dict(to_jsonable(turn))


def _keep_units(flow: Flow, outputs: Mapping[str, Any], view: GraphView) -> dict[str, Any] | None:
    lost = {view.unit_id(t.before) for t in flow.unit_losses} or set(flow.evidence_units)
    for key, value in outputs.items():
        if not isinstance(value, list):
            continue
        changed = False
        items = []
        for item in value:
            if isinstance(item, Mapping):
                event = str(item.get("event") or item.get("action") or "").upper()
                target = str(action_unit(item) or "")
                if event in ("UPDATE", "DELETE") and target in lost:
                    item = {**item, "event": "NONE"}
                    changed = True
            items.append(item)
        if changed:
            return {key: items}
    return None


def _add_writes(view: GraphView, flow: Flow, op: str, outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """An update decision that skipped a needed write: an ADD of each input fact holding the information."""
    recorded = view.attrs(op).get("inputs")
    # an empty action list (the decision wrote nothing) is still found by its name
    key = action_field(outputs) or next((k for k, v in outputs.items() if k.endswith("actions") and isinstance(v, list)), None)
    if key is None or not isinstance(recorded, Mapping):
        return None
    # facts that descend from an evidence turn and hold the information (written with a pronoun counts too)
    shown = set(flow.carrying(view).provenance.input_parts(op))
    facts = [f for v in recorded.values() if isinstance(v, list) for f in v if isinstance(f, str) and f in shown
             and (flow.needed.holds(f) or flow.needed.written(f))]
    written = {str(a.get("text")) for a in outputs[key] if isinstance(a, Mapping)}
    added = [{"event": "ADD", "text": f, "unit_id": None} for f in dict.fromkeys(facts) if f not in written]
    return {key: list(outputs[key]) + added} if added else None


def repair_outputs(view: GraphView, flow: Flow, op: str, case: FailedCase, asker: Asker | None = None) -> dict[str, Any] | None:
    """Outputs of `op` that do its job for the needed information (by rule, else by the LM), or None."""
    outputs = view.attrs(op).get("outputs")
    if not isinstance(outputs, Mapping):
        return None
    kind = view.error_type(op, outputs)
    repaired: dict[str, Any] | None = None
    if kind == RETRIEVAL:
        repaired = _add_units(view, flow, outputs)
    elif kind == EXTRACTION:
        repaired = _add_evidence(view, flow, outputs)
    elif kind in (UPDATE, DELETION):
        repaired = _keep_units(flow, outputs, view) or _add_writes(view, flow, op, outputs)
    if repaired is None and asker is not None and kind != RESPONSE:
        repaired = _lm_repair(view, flow, op, case, outputs, asker)
    return repaired


def _lm_repair(
    view: GraphView, flow: Flow, op: str, case: FailedCase, outputs: Mapping[str, Any], asker: Asker
) -> dict[str, Any] | None:
    shown = render_op(view, op, 2400)
    current = {k: v for k, v in outputs.items() if k != "error"}
    needed = f"question: {case.question_text}\ngold answer: {case.gold}\nevidence:\n{evidence_text(view, flow.evidence)}"
    reply = asker.ask(
        RepairOutputs, operation=shown.job, op_inputs=shown.inputs, needed=needed,
        current_outputs=json.dumps(current, ensure_ascii=False, default=str)[:6000],
    )
    if reply is None:
        return None
    try:
        data = json.loads(str(getattr(reply, "repaired_outputs", "")))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    kept = {k: v for k, v in data.items() if k in current}
    return kept or None


# the replays of one case ------------------------------------------------------------------------------------
class CaseReplayer:
    """The replays of one failed case (module doc). `reproduces()` runs the recorded run unchanged once (raises
    MemtraceError when a fault the context forces no longer comes up); `try_repair(op)` replays with `op`'s
    repaired outputs forced and returns the `Replay`, or None when `op` cannot be repaired or forced. `replays`
    holds every replay run, the unchanged one first; `repaired` counts those with a repair; `usage` the LM calls
    made while replaying (the task model's; a repair's question to the attributor LM is not among them)."""

    def __init__(self, case: FailedCase, graph: nx.MultiDiGraph, view: GraphView, flow: Flow,
                 context: ReplayContext) -> None:
        self.case, self.view, self.flow, self.context = case, view, flow, context
        self.question = case_question(case)
        self.asked = _recorded_questions(view, context.conversation, self.question)
        self.check = context.check or _default_check
        self.replay_fn = context.replay_fn or _tracing_replay()
        self.record = context.record if context.record is not None else graph
        self.replays: list[Replay] = []
        self.usage = Meter()
        self._reproduced: bool | None = None

    @property
    def repaired(self) -> int:
        return sum(1 for r in self.replays if r.op_id is not None)

    def _run(self, forced: Mapping[int, Mapping[str, Any]]) -> str | None:
        """The replayed answer; None when a fault the context forces (an injected one) no longer came up: the
        repair changed that op's inputs, so the answer says nothing about the repaired op."""
        context = self.context
        lm_scope = dspy.context(lm=context.lm) if context.lm is not None else contextlib.nullcontext()
        every = {**context.forced, **forced}
        with lm_scope, metering(self.usage):
            result = self.replay_fn(context.program, context.conversation, self.asked, self.record,
                                    instructions=context.instructions, forced=every)
        if context.forced and not _forced_applied(result, {_key_of(self.view, seq) for seq in every}):
            return None
        return str(result.answers.get(self.case.question_id, ""))

    def reproduces(self) -> bool:
        """Whether the recorded run, replayed unchanged, answers wrong again (run once)."""
        if self._reproduced is None:
            answer = self._run({})
            if answer is None:
                raise MemtraceError("the replay does not reach the forced fault of the record")
            correct = self.check(self.question, answer)
            self.replays.append(Replay(None, None, answer, correct))
            self._reproduced = not correct
        return self._reproduced

    def charged(self, verdict: Verdict) -> Verdict:
        """`verdict` with the replays' LM use in its cost (`replay_calls`, `replay_*_tokens`)."""
        usage = self.usage
        cost = replace(verdict.cost, replay_calls=usage.calls, replay_prompt_tokens=usage.prompt_tokens,
                       replay_completion_tokens=usage.completion_tokens)
        return replace(verdict, cost=cost)

    def recorded(self, verdict: Verdict, **changes: Any) -> Verdict:
        """`verdict` with `changes`, the replays run and their LM use in its cost."""
        return self.charged(replace(verdict, replays=tuple(self.replays), **changes))

    @property
    def reproduced_answer(self) -> str:
        return self.replays[0].answer if self.replays else ""

    def can_repair(self, op: str) -> bool:
        return op != self.flow.answer_op and not self.view.attrs(op).get("writes_store")

    def try_repair(self, op: str, asker: Asker | None = None) -> Replay | None:
        """Replay with `op`'s outputs repaired; None when it cannot be repaired or forced (nothing is run). A repair
        written by `asker`'s LM is charged to the case's budget; the replay's task-model calls are not (they are the
        verdict's `replay_*` cost)."""
        if not self.can_repair(op):
            return None
        repaired = repair_outputs(self.view, self.flow, op, self.case, asker)
        if repaired is None:
            return None
        with asker.uncounted() if asker is not None else contextlib.nullcontext():
            answer = self._run({self.view.seq(op): repaired})
        replay = Replay(op, self.view.op_name(op), answer or "",
                        answer is not None and self.check(self.question, answer))
        self.replays.append(replay)
        return replay
