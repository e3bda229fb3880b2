"""Baselines from failure attribution in multi-agent systems (Who&When), over the flat op log.

The log is the question's trajectory: every write-path op before the answer, then the question's read path,
in execution order; no structure, no evidence. `all_at_once` shows the whole log (cut to `config.log_chars`) in one prompt; `step_by_step`
asks about ops in order and stops at the first judged decisive (at most `5 * config.max_lm_calls` steps);
`binary_search` halves the log, asking which half holds the decisive error; `random` picks an op (seeded
per case); `blame_response` always blames the answer op.
"""

from __future__ import annotations

import random as _random
import re
from dataclasses import dataclass

import networkx as nx

from memtrace_opt.attribution._ask import Asker
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._render import render_log, render_op
from memtrace_opt.attribution._types import (
    ERROR_TYPES,
    GOLD,
    RESPONSE,
    FailedCase,
    Verdict,
)
from memtrace_opt.attribution.protocol import AttributionConfig, make_verdict, register_method
from memtrace_opt.attribution.signatures import BlameInLog, JudgeStep, PickHalf

__all__ = [
    "AllAtOnceAttributor",
    "StepByStepAttributor",
    "BinarySearchAttributor",
    "RandomAttributor",
    "BlameResponseAttributor",
    "op_log",
]

_OP_ID = re.compile(r"op:(\d+)")


def op_log(view: GraphView, question_id: str) -> tuple[str, list[str]]:
    """(answer op, the question's op log): every write-path op before the answer, then the question's read
    path (other questions' read paths left out), in execution order. Raises ValueError."""
    answer = view.answer_op(question_id)
    if answer is None:
        raise ValueError(f"the graph has no answer op for question {question_id!r}")
    own = view.read_path(answer, question_id)
    others = view.all_read_ops - set(own)
    limit = view.seq(answer)
    ops = [op for op in view.ops if view.seq(op) <= limit and (op in own or op not in others)]
    return answer, ops


def _type_of(view: GraphView, op: str) -> str:
    return view.error_type(op, view.attrs(op).get("outputs")) or RESPONSE


@dataclass(frozen=True)
class _Baseline:
    config: AttributionConfig = AttributionConfig()
    name: str = ""

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict:
        try:
            view = GraphView.of(graph)
            answer, ops = op_log(view, case.question_id)
            return self._attribute(case, view, answer, ops)
        except Exception as error:  # noqa: BLE001 - contract: an error verdict, never a raise
            return Verdict.failed(case.case_id, self.name, f"{type(error).__name__}: {error}")

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        raise NotImplementedError


@register_method("blame_response")
@dataclass(frozen=True)
class BlameResponseAttributor(_Baseline):
    name: str = "blame_response"

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        return make_verdict(case, self.name, view, answer, RESPONSE, "always blames the answer op", 0.2)


@register_method("random")
@dataclass(frozen=True)
class RandomAttributor(_Baseline):
    name: str = "random"

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        rng = _random.Random(f"{self.config.seed}:{case.case_id}")
        op = rng.choice(ops)
        return make_verdict(case, self.name, view, op, _type_of(view, op), "a random op of the log", 1 / len(ops))


@register_method("all_at_once")
@dataclass(frozen=True)
class AllAtOnceAttributor(_Baseline):
    name: str = "all_at_once"

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        log_text = render_log(view, ops, self.config.log_chars)
        with Asker(1, self.config.max_tokens * 4) as asker:
            reply = asker.ask(
                BlameInLog, question=case.question_text, gold_answer=case.gold, prediction=case.prediction,
                op_log=log_text,
            )
        if reply is None:
            return Verdict.failed(case.case_id, self.name, "the attributor LM gave no usable reply")
        error_type = str(getattr(reply, "error_type", "") or "")
        match = _OP_ID.search(str(getattr(reply, "op_id", "") or ""))
        op = view.op_of_id(f"op:{match.group(1)}") if match else None
        reason = str(getattr(reply, "reason", ""))
        if error_type == GOLD:
            return make_verdict(case, self.name, view, None, GOLD, reason, 0.5)
        if op is None:
            reason = f"named no op of the graph ({getattr(reply, 'op_id', '')!r}); {reason}"
        if error_type not in ERROR_TYPES:
            error_type = _type_of(view, op) if op else RESPONSE
        return make_verdict(case, self.name, view, op, error_type, reason, 0.5 if op else 0.0)


@register_method("step_by_step")
@dataclass(frozen=True)
class StepByStepAttributor(_Baseline):
    name: str = "step_by_step"

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        steps = max(1, 5 * self.config.max_lm_calls)
        with Asker(steps, self.config.max_tokens * 5) as asker:
            for index, op in enumerate(ops):
                if not asker.can_ask():
                    break
                earlier = ", ".join(f"{o} {view.op_name(o)}" for o in ops[max(0, index - 20) : index]) or "(none)"
                shown = render_op(view, op, self.config.op_chars)
                reply = asker.ask(
                    JudgeStep, question=case.question_text, gold_answer=case.gold, prediction=case.prediction,
                    earlier_ops=earlier, operation=shown.as_text(),
                )
                if reply is not None and bool(getattr(reply, "decisive", False)):
                    return make_verdict(case, self.name, view, op, _type_of(view, op), str(reply.reason), 0.5)
            asked = asker.calls
        reason = f"no op judged decisive in {asked} steps; blaming the answer op"
        return make_verdict(case, self.name, view, answer, RESPONSE, reason, 0.1)


@register_method("binary_search")
@dataclass(frozen=True)
class BinarySearchAttributor(_Baseline):
    name: str = "binary_search"

    def _attribute(self, case: FailedCase, view: GraphView, answer: str, ops: list[str]) -> Verdict:
        low, high = 0, len(ops)
        reasons: list[str] = []
        with Asker(64, self.config.max_tokens * 4) as asker:
            while high - low > 1:
                middle = (low + high) // 2
                budget = self.config.log_chars // 2
                reply = asker.ask(
                    PickHalf, question=case.question_text, gold_answer=case.gold, prediction=case.prediction,
                    first_half=render_log(view, ops[low:middle], budget),
                    second_half=render_log(view, ops[middle:high], budget),
                )
                if reply is None:
                    break
                reasons.append(str(getattr(reply, "reason", "")))
                if str(getattr(reply, "half", "first")).strip().lower().startswith("second"):
                    low = middle
                else:
                    high = middle
        op = ops[low] if high - low == 1 else ops[high - 1]
        confidence = 0.5 if high - low == 1 else 0.1
        return make_verdict(case, self.name, view, op, _type_of(view, op), reasons[-1] if reasons else "", confidence)
