"""Settings a program declares as tunable: their ranges, the ops they shape, their cost."""

from __future__ import annotations

from dataclasses import dataclass

import optuna
import pytest

from memtrace_opt.errors import ConfigError
from memtrace_opt.memory import Operation
from memtrace_opt.programs import ProgramConfig, make_program, tunable, tunables, tunables_for

EXPECTED = {
    "mem0": {"window_turns", "context_turns", "similar_k", "similar_min_score", "top_k"},
    "rag": {"chunk_tokens", "top_k", "search"},
    "long_context": {"context_tokens"},
    "evermemos": {"max_memcell_messages", "check_every", "top_k", "max_queries"},
}


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_builtin_programs_declare_their_settings_tied_to_their_ops(system: str) -> None:
    program = make_program(system)
    declared = tunables(program.config)
    assert {t.name for t in declared} == EXPECTED[system]
    ops = {module.op_name for _, module in program.named_sub_modules() if isinstance(module, Operation)}
    for setting in declared:
        assert set(setting.ops) <= ops, setting.name
        assert setting.cost
        default = getattr(program.config, setting.name)
        assert default is None or setting.allows(default), setting.name


def test_a_verdict_on_an_op_leads_to_its_settings() -> None:
    config = make_program("mem0").config
    assert {t.name for t in tunables_for(config, ["mem0.extract_facts"])} == {"window_turns", "context_turns"}
    assert {t.name for t in tunables_for(config, ["mem0.answer"])} == {"top_k"}
    assert tunables_for(config, ["mem0.apply"]) == []


@dataclass(frozen=True)
class NotesConfig(ProgramConfig):
    window_turns: int = tunable(4, low=1, high=12, ops=("notes.write",), cost="more write calls")
    threshold: float = tunable(0.5, low=0.1, high=0.9, ops=("notes.search",))
    mode: str = tunable("fast", choices=("fast", "careful"), ops=("notes.write",))
    plain: int = 3


def test_a_user_config_declares_its_own_and_optuna_samples_them_in_range() -> None:
    declared = {t.name: t for t in tunables(NotesConfig)}
    assert set(declared) == {"window_turns", "threshold", "mode"}
    assert declared["window_turns"].integer and not declared["threshold"].integer
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=3))
    trial = study.ask()
    values = {name: t.suggest(trial) for name, t in declared.items()}
    assert all(declared[name].allows(value) for name, value in values.items())
    assert NotesConfig().window_turns == 4 and NotesConfig(window_turns=2).window_turns == 2


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(ConfigError, match="low <= high"):
        tunable(3, low=5, high=2, ops=("x.y",))
    with pytest.raises(ConfigError, match="not both"):
        tunable("a", low=1, high=2, choices=("a",), ops=("x.y",))
    with pytest.raises(ConfigError, match="name the ops"):
        tunable(1, low=1, high=2, ops=())
