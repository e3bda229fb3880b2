"""Finding programs: the built-ins by name, a user's class by import path, and clear errors otherwise."""

from __future__ import annotations

import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.programs import BUILTIN_SYSTEMS, load_program_class, make_program
from memtrace_opt.programs.evermemos import EverMemOS, EverMemOSConfig
from memtrace_opt.programs.long_context import LongContextConfig, LongContextMemory
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory
from memtrace_opt.programs.rag import RAGConfig, RAGMemory


def test_builtins_by_name():
    expected = {"long_context": (LongContextMemory, LongContextConfig), "rag": (RAGMemory, RAGConfig),
                "mem0": (Mem0Memory, Mem0Config), "evermemos": (EverMemOS, EverMemOSConfig)}
    assert set(BUILTIN_SYSTEMS) == set(expected)
    for name, (cls, config_cls) in expected.items():
        program = make_program(name, {"top_k": 3})
        assert type(program) is cls and cls.name == name
        assert type(program.config) is config_cls and program.config.top_k == 3


def test_every_op_has_a_stable_name_under_its_system():
    from memtrace_opt.memory.ops import Operation

    for name in BUILTIN_SYSTEMS:
        program = make_program(name)
        ops = [m for _, m in program.named_sub_modules() if isinstance(m, Operation)]
        assert ops and all(op.op_name.startswith(f"{name}.") for op in ops)
        assert len({op.op_name for op in ops}) == len(ops)
        assert f"{name}.answer" in {op.op_name for op in ops}
        # every LM op has its own Signature class
        signatures = [p.signature.__name__ for _, p in program.named_predictors()]
        assert signatures and len(signatures) == len(set(signatures))


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown setting"):
        make_program("rag", {"chunk_size": 10})
    with pytest.raises(ConfigError, match="search must be one of"):
        make_program("rag", {"search": "fuzzy"})
    with pytest.raises(ConfigError):
        make_program("evermemos", {"overlap_messages": 99})
    with pytest.raises(ConfigError):
        make_program("mem0", {"window_turns": 0})


def test_user_program_by_import_path(tiny):
    program = make_program("custom_memory_program:KeywordMemory", {"top_k": 2})
    assert program.config.top_k == 2 and program.config.embedder == "hash"
    state = program.new_state(tiny)
    program.memorize(tiny, state)
    assert len(state.store) == 6
    assert "Pepper" in program.respond(tiny.questions[0], state).answer


@pytest.mark.parametrize("path", ["no_such_module_xyz:Memory", "custom_memory_program:Missing",
                                  "custom_memory_program:NotAProgram", "not-a-system"])
def test_bad_paths(path):
    with pytest.raises(ConfigError):
        load_program_class(path)
