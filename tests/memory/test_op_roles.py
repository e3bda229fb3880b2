"""Ops declare their role in a memory's life; a name is only a fallback."""

from __future__ import annotations

import dspy
import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.memory import Operation, OpRole, role_for_name
from memtrace_opt.programs import make_program
from memtrace_opt.programs.module_op import as_op

EXPECTED = {
    "mem0": {"mem0.extract_facts": OpRole.FORMS, "mem0.search_similar": OpRole.UPDATES,
             "mem0.update_decision": OpRole.UPDATES, "mem0.apply": OpRole.UPDATES,
             "mem0.retrieve": OpRole.RETRIEVES, "mem0.answer": OpRole.ANSWERS},
    "long_context": {"long_context.trim": OpRole.DELETES, "long_context.answer": OpRole.ANSWERS},
    "rag": {"rag.chunk": OpRole.FORMS, "rag.retrieve": OpRole.RETRIEVES},
    "evermemos": {"evermemos.extract_episode": OpRole.FORMS, "evermemos.check_sufficiency": OpRole.RETRIEVES},
}


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_every_builtin_op_declares_its_role(system: str) -> None:
    program = make_program(system)
    ops = {module.op_name: module for _, module in program.named_sub_modules() if isinstance(module, Operation)}
    assert ops, system
    undeclared = [name for name, op in ops.items() if op.role is None]
    assert undeclared == []
    for name, role in EXPECTED[system].items():
        assert ops[name].role is role, name


def test_as_op_takes_a_role_by_value_and_refuses_an_unknown_one() -> None:
    op = as_op(dspy.Predict("notes -> summary"), "notes.consolidate", role="updates")
    assert op.role is OpRole.UPDATES
    plain = as_op(dspy.Module(), "notes.forget", role=OpRole.DELETES)
    assert plain.role is OpRole.DELETES
    assert as_op(dspy.Predict("q -> a"), "notes.write").role is None
    with pytest.raises(ConfigError, match="unknown op role 'remembers'"):
        as_op(dspy.Predict("q -> a"), "notes.write", role="remembers")


def test_name_fallback_covers_user_names_and_the_write_path_lookup() -> None:
    assert role_for_name("notes.summarize") is OpRole.FORMS
    assert role_for_name("notes.consolidate") is OpRole.UPDATES
    assert role_for_name("notes.forget_old") is OpRole.DELETES
    assert role_for_name("mem0.search_similar") is OpRole.UPDATES  # a write-path lookup, not a retrieval
    assert role_for_name("rag.hybrid_search") is OpRole.RETRIEVES
    assert role_for_name("notes.format") is None
    assert role_for_name(None) is None
