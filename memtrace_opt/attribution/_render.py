"""Compact text views of operations for attributor prompts: one op (job, inputs, outputs), or a flat op log
cut to a character budget."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._types import ROLE_MEANINGS

__all__ = ["OpView", "op_job", "render_op", "render_log", "clip"]

def op_job(view: GraphView, op: str, limit: int = 600) -> str:
    """What the op is for: its role's job (`ROLE_MEANINGS`), plus its instruction when it is LM-backed."""
    name = view.op_name(op)
    role = view.role(op)
    job = ROLE_MEANINGS[role].job if role is not None else f"the {name.rsplit('.', 1)[-1]} step"
    instruction = view.attrs(op).get("instructions")
    if isinstance(instruction, str) and instruction.strip():
        job = f"{job}. Its prompt: {clip(' '.join(instruction.split()), limit)}"
    return f"{name}: {job}"


def clip(text: str, limit: int) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 14)] + " ...[cut]"


def _compact(value: Any, limit: int) -> str:
    """A JSON value as short text: memory units as `[unit@v] text`, long strings cut."""
    if isinstance(value, Mapping):
        if "$mem" in value:
            mark = " (deleted)" if value.get("deleted") else ""
            return clip(f"[{value['$mem'][4:]}{mark}] {value.get('text', '')}", limit)
        if "$turn" in value:
            return clip(f"[{value.get('dia_id', '')}] {value.get('speaker', '')}: {value.get('text', '')}", limit)
        if "$question" in value:
            return clip(f"question: {value.get('question', '')}", limit)
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, list):
        items = [_compact(v, max(60, limit // max(1, len(value)))) for v in value]
        return clip("\n".join(f"- {item}" for item in items), limit)
    return clip(json.dumps(value, ensure_ascii=False, default=str), limit)


def _var_line(view: GraphView, node: str, limit: int) -> str:
    attrs = view.attrs(node)
    value = attrs.get("value")
    if view.is_mem(node):
        mark = " (deleted)" if view.deleted(node) else ""
        return clip(f"[{node[4:]}{mark}] {view.text(node)}", limit)
    if view.is_turn(node):
        return clip(f"[{node[5:]}] {view.turn_line(node)}", limit)
    name = node.split(":", 2)[-1] if node.startswith("var:") else node
    return f"{name}: {_compact(value, limit)}"


def _render_values(view: GraphView, nodes: Iterable[str], recorded: Any, budget: int, skip_question: bool) -> str:
    nodes = [n for n in nodes if not (skip_question and n.startswith("q:"))]
    if not nodes and isinstance(recorded, Mapping):
        items = [(k, v) for k, v in recorded.items() if not (skip_question and k == "question")]
        per = max(80, budget // max(1, len(items)))
        return clip("\n".join(f"{k}: {_compact(v, per)}" for k, v in items), budget)
    per = max(80, budget // max(1, len(nodes)))
    return clip("\n".join(_var_line(view, n, per) for n in nodes), budget)


@dataclass(frozen=True)
class OpView:
    """What an attributor sees of one op."""

    op: str
    job: str
    inputs: str
    outputs: str

    def as_text(self) -> str:
        return f"{self.op} {self.job}\nINPUTS:\n{self.inputs}\nOUTPUTS:\n{self.outputs}"


def render_op(view: GraphView, op: str, chars: int = 3000, *, extra_inputs: str = "") -> OpView:
    """One op in about `chars` characters (inputs and outputs share the budget)."""
    attrs = view.attrs(op)
    half = max(200, chars // 2)
    inputs = _render_values(view, view.inputs(op), attrs.get("inputs"), half, skip_question=False)
    if extra_inputs:
        inputs = clip(f"{inputs}\n{extra_inputs}", half + len(extra_inputs))
    outputs = _render_values(view, view.outputs(op), attrs.get("outputs"), half, skip_question=False)
    if attrs.get("error"):
        outputs = f"{outputs}\n(error: {clip(str(attrs['error']), 200)})"
    return OpView(op, op_job(view, op, limit=min(600, chars // 4)), inputs, outputs)


def render_log(view: GraphView, ops: list[str], budget_chars: int, *, min_chars: int = 120) -> str:
    """A flat log of `ops` (execution order) within `budget_chars`: every op keeps its header line; values
    share the rest. When even headers with `min_chars` do not fit, ops are sampled evenly, first and last
    kept."""
    ops = sorted(ops, key=view.seq)
    most = max(1, budget_chars // min_chars)
    if len(ops) > most:
        step = len(ops) / most
        picked = {ops[0], ops[-1]} | {ops[int(i * step)] for i in range(most)}
        ops = sorted(picked, key=view.seq)
    per = max(min_chars, budget_chars // max(1, len(ops)))
    lines = []
    for op in ops:
        rendered = render_op(view, op, per)
        lines.append(f"{op} {view.op_name(op)}\n  in: {_indent(rendered.inputs)}\n  out: {_indent(rendered.outputs)}")
    return clip("\n".join(lines), budget_chars)


def _indent(text: str) -> str:
    return text.replace("\n", "\n      ")
