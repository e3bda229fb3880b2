"""Node ids of the evolution graph (docs/design.md; unchanged in schema_version 2)."""

from __future__ import annotations

__all__ = ["turn_id", "op_id", "mem_id", "question_node", "answer_node"]


def turn_id(dia_id: str) -> str:
    return dia_id if dia_id.startswith("turn:") else f"turn:{dia_id}"


def op_id(seq: int) -> str:
    return f"op:{seq}"


def mem_id(unit_id: str, version: int) -> str:
    return f"mem:{unit_id}@{version}"


def question_node(question_id: str) -> str:
    return f"q:{question_id}"


def answer_node(question_id: str) -> str:
    return f"ans:{question_id}"
