"""Settings a memory program declares as tunable: a field of its `Config` with the range an optimizer may search,
the ops it shapes (so a verdict on an op leads to its settings) and what a change costs.

    @dataclass(frozen=True)
    class NotesConfig(ProgramConfig):
        window_turns: int = tunable(6, low=1, high=12, ops=("notes.write",),
                                    cost="smaller windows: more write calls per conversation")

    tunables(NotesConfig)                      # [Tunable(name="window_turns", ...)]
    tunables_for(NotesConfig, "notes.write")   # the settings that shape that op

A tunable is an int or float range (`low`..`high`, `log` for a log scale) or a list of `choices`. Its default
is the field's. Settings without `tunable(...)` are never searched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memtrace_opt.errors import ConfigError

__all__ = ["Tunable", "changed_settings", "tunable", "tunables", "tunables_for"]

_KEY = "memtrace_tunable"


@dataclass(frozen=True)
class Tunable:
    """One tunable setting: its field `name`, the `ops` it shapes, its range or choices, and its cost in words."""

    name: str
    ops: tuple[str, ...]
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    log: bool = False
    integer: bool = True
    cost: str = ""

    def suggest(self, trial: Any) -> Any:
        """A value for an Optuna `trial` (its parameter is named after the setting)."""
        if self.choices:
            return trial.suggest_categorical(self.name, list(self.choices))
        assert self.low is not None and self.high is not None
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, float(self.low), float(self.high), log=self.log)

    def distribution(self) -> Any:
        """The Optuna distribution of this setting (to tell a study about values chosen elsewhere)."""
        import optuna

        if self.choices:
            return optuna.distributions.CategoricalDistribution(list(self.choices))
        assert self.low is not None and self.high is not None
        if self.integer:
            return optuna.distributions.IntDistribution(int(self.low), int(self.high), log=self.log)
        return optuna.distributions.FloatDistribution(float(self.low), float(self.high), log=self.log)

    def allows(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        return isinstance(value, (int, float)) and self.low is not None and self.high is not None \
            and self.low <= value <= self.high

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ops": list(self.ops), "cost": self.cost}
        if self.choices:
            out["choices"] = list(self.choices)
        else:
            out.update(low=self.low, high=self.high, log=self.log, integer=self.integer)
        return out


def tunable(default: Any, *, ops: Sequence[str], low: float | None = None, high: float | None = None,
            choices: Iterable[Any] = (), log: bool = False, cost: str = "") -> Any:
    """A config field with `default` that an optimizer may search (module doc). Give `low` and `high`, or
    `choices`; an int default (or int bounds) makes an int range. Raises ConfigError for a range that is not one."""
    options = tuple(choices)
    if options:
        if low is not None or high is not None:
            raise ConfigError("tunable: give low/high or choices, not both")
    elif low is None or high is None or low > high:
        raise ConfigError(f"tunable: a range needs low <= high (got {low}..{high})")
    integer = not options and all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high))
    if not ops:
        raise ConfigError("tunable: name the ops the setting shapes")
    spec = Tunable("", tuple(ops), low, high, options, log, integer, cost)
    return dataclasses.field(default=default, metadata={_KEY: spec})


def tunables(config: Any) -> list[Tunable]:
    """The tunable settings of a config class (or instance), in field order, each with its name."""
    return [dataclasses.replace(f.metadata[_KEY], name=f.name) for f in dataclasses.fields(config) if _KEY in f.metadata]


def tunables_for(config: Any, op_names: Iterable[str]) -> list[Tunable]:
    """The tunable settings of `config` that shape any of `op_names`."""
    wanted = set(op_names)
    return [t for t in tunables(config) if wanted & set(t.ops)]


def changed_settings(before: Any, after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """setting -> (old value, new value) for each of `after` that differs from config `before`."""
    return {name: (getattr(before, name), value) for name, value in after.items() if getattr(before, name) != value}
