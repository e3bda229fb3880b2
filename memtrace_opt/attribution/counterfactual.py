"""`counterfactual`: graphtrace's candidates confirmed by executable replay.

First the recorded run is replayed unchanged: if that does not reproduce the failure, nothing can be
confirmed. Then for each candidate op (graphtrace's verdict first, then the others in execution order, at
most `config.max_replays`), repair its outputs and replay the conversation with them forced
(`memtrace_opt.tracing.replay(..., forced={seq: outputs})`); unchanged ops come from the record, later ops
run live. The first candidate whose repair makes the answer correct is the verdict. Repairs:
- retrieval (retrieve, merge, ...): the units that held the needed information at question time are added
  to the returned list;
- extraction (extract_*, chunk, ...): the evidence turns are added to the extracted list (or text);
- update/delete decisions: the UPDATE/DELETE that lost the information becomes NONE; a decision that skipped
  it gets an ADD of each input fact that holds it;
- otherwise the attributor LM rewrites the outputs (`RepairOutputs`).
Store-writing ops cannot be forced; the answer op is never replayed (setting the answer is no test): it is
the verdict when the information reached it intact and no earlier repair saves the answer. Without a
replay context for the case (program + conversation), graphtrace's verdict stands, marked unconfirmed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
import networkx as nx

from memtrace_opt.attribution._ask import Asker, evidence_text
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._render import render_op
from memtrace_opt.attribution._types import (
    DELETION,
    EXTRACTION,
    GOLD,
    RESPONSE,
    RETRIEVAL,
    UPDATE,
    FailedCase,
    Verdict,
    action_field,
    action_unit,
)
from memtrace_opt.attribution.graphtrace import GraphTraceAttributor, candidates
from memtrace_opt.attribution.lineage import case_flow
from memtrace_opt.attribution.protocol import AttributionConfig, make_verdict, register_method
from memtrace_opt.attribution.signatures import RepairOutputs
from memtrace_opt.errors import MemtraceError

__all__ = ["ReplayContext", "ReplayProvider", "CounterfactualAttributor", "repair_outputs", "case_question"]

log = logging.getLogger(__name__)

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


# the method -----------------------------------------------------------------------------------------------
@register_method("counterfactual")
@dataclass(frozen=True)
class CounterfactualAttributor:
    """See the module docstring. `replay_provider(case)` gives the case's ReplayContext (or None)."""

    config: AttributionConfig = AttributionConfig()
    replay_provider: ReplayProvider | None = None
    name: str = "counterfactual"

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict:
        seed = GraphTraceAttributor(self.config).attribute(case, graph)
        seed = replace(seed, method=self.name)
        if seed.error is not None or seed.error_type == GOLD:
            return seed
        try:
            view = GraphView.of(graph)
            flow = case_flow(view, case, self.config)
            context = self.replay_provider(case) if self.replay_provider is not None else None
        except Exception as error:  # noqa: BLE001 - contract: an error verdict, never a raise
            return Verdict.failed(case.case_id, self.name, f"{type(error).__name__}: {error}")
        if context is None:
            return replace(seed, reason=f"{seed.reason} (unconfirmed: no replay context)", confidence=min(seed.confidence, 0.5))
        try:
            return self._confirm(case, graph, view, flow, seed, context)
        except Exception as error:  # noqa: BLE001
            log.warning("counterfactual replay of %s failed: %s", case.case_id, error)
            return replace(seed, reason=f"{seed.reason} (unconfirmed: replay failed: {error})", confidence=min(seed.confidence, 0.5))

    def _order(self, view: GraphView, flow: Flow, seed: Verdict) -> list[tuple[str, str]]:
        found = [(c.op, c.error_type) for c in candidates(view, flow, self.config.frontier)]
        if seed.op_id is not None and seed.error_type is not None:
            found = [(seed.op_id, seed.error_type)] + [c for c in found if c[0] != seed.op_id]
        return found

    def _confirm(
        self, case: FailedCase, graph: nx.MultiDiGraph, view: GraphView, flow: Flow, seed: Verdict, context: ReplayContext
    ) -> Verdict:
        question = case_question(case)
        asked = _recorded_questions(view, context.conversation, question)
        check = context.check or _default_check
        replay_fn = context.replay_fn or _tracing_replay()
        record = context.record if context.record is not None else graph

        def run(forced: Mapping[int, Mapping[str, Any]]) -> str | None:
            """The replayed answer; None when a fault the context forces (an injected one) no longer came up:
            the repair changed that op's inputs, so the answer says nothing about the repaired op."""
            lm_scope = dspy.context(lm=context.lm) if context.lm is not None else contextlib.nullcontext()
            every = {**context.forced, **forced}
            with lm_scope:
                result = replay_fn(context.program, context.conversation, asked, record,
                                   instructions=context.instructions, forced=every)
            if context.forced and not _forced_applied(result, {_key_of(view, seq) for seq in every}):
                return None
            return str(result.answers.get(case.question_id, ""))

        reproduced = run({})
        if reproduced is None:
            raise MemtraceError("the replay does not reach the forced fault of the record")
        if check(question, reproduced):
            note = f"unconfirmed: the replay does not reproduce the failure (it answers {reproduced!r})"
            return replace(seed, reason=f"{seed.reason} ({note})", confidence=min(seed.confidence, 0.5))
        tried: list[str] = []
        with Asker(self.config.max_lm_calls, self.config.max_tokens) as asker:
            for op, error_type in self._order(view, flow, seed):
                if len(tried) >= self.config.max_replays:
                    break
                if op == flow.answer_op or view.attrs(op).get("writes_store"):
                    continue
                repaired = repair_outputs(view, flow, op, case, asker)
                if repaired is None:
                    continue
                tried.append(op)
                answer = run({view.seq(op): repaired})
                if answer is not None and check(question, answer):
                    reason = f"repairing {view.op_name(op)} ({op}) and replaying answers {answer!r}, which is correct"
                    return make_verdict(case, self.name, view, op, error_type, reason, 0.95)
        if flow.reached_answer or seed.op_id == flow.answer_op:
            reason = f"the needed information reached the answer op; repairs of {len(tried)} earlier ops did not save it"
            return make_verdict(case, self.name, view, flow.answer_op, RESPONSE, reason, 0.7)
        note = f"unconfirmed: {len(tried)} replays with repaired outputs ({', '.join(tried) or 'none'}) did not fix it"
        return replace(seed, reason=f"{seed.reason} ({note})", confidence=min(seed.confidence, 0.5))

