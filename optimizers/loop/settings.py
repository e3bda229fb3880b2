"""`LoopSettings`: the one settings tree of the loop, each part owned by what reads it.

    LoopSettings                      rounds, patience, minibatch, budget, time_budget, local_check, seed, threads,
                                      repairs, scoped_replay
      .proposal   ProposalSettings    candidates, pattern_rules, evidence_cases     (sources/base.py)
      .demo       DemoSettings        demos, demo_pool, demo_budget, compact_demos, demo_chars (sources/demo_source.py)
      .acceptance AcceptanceSettings  validate_ties, min_val_gain, min_val_questions (gates/acceptance.py)
      .local      LocalSettings       local_objective, local_margin, local_calls, validate_top (gates/local_objective.py)
      .search     SettingsSearch      settings, settings_trials, cost_limit (sources/settings_source.py)

One name per knob, end to end: the flag `--demo-budget`, the config file's `optimize: {demo_budget: ...}`, the
field `DemoSettings.demo_budget`, the argument `predictor_demos(demo_budget=...)` and the constant `DEMO_BUDGET`.
`LoopSettings.of(rounds=4, demos=0)` builds the tree from knob names; `to_dict()` is that flat form. The CLI
generates the flags of `optimize` and `compare` from the knobs (`knobs(LoopSettings)`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.core.knobs import knob
from memtrace_opt.optimizers.gates.acceptance import AcceptanceSettings
from memtrace_opt.optimizers.gates.local_objective import LocalSettings
from memtrace_opt.optimizers.sources.base import ProposalSettings
from memtrace_opt.optimizers.sources.demo_source import DemoSettings
from memtrace_opt.optimizers.sources.settings_source import SettingsSearch

__all__ = ["LoopSettings"]

_PARTS = {"proposal": ProposalSettings, "demo": DemoSettings, "acceptance": AcceptanceSettings, "local": LocalSettings,
          "search": SettingsSearch}

@dataclass(frozen=True)
class LoopSettings:
    """The loop's knobs (see the module docstring; the optimizer's steps are in `teleprompter.py`).
    `budget` / `time_budget` None mean no budget; `minibatch` training cases per round; `local_check` re-runs an
    upstream predictor's blamed calls under each candidate before its minibatch replay (`gates/local_check.py`)."""

    rounds: int = knob(6, "At most N rounds.")
    patience: int = knob(2, "Stop after N rounds without an accepted change.")
    minibatch: int = knob(8, "Training questions per round.")
    budget: int | None = knob(None, "LM-call budget (task + reflection + attributor calls).")
    time_budget: float | None = knob(None, "Stop the rounds after this many seconds.")
    local_check: bool = knob(True, "Re-run the blamed calls under each candidate for an upstream predictor before "
                                   "replaying the write path (default: on).", flag="--local-check/--no-local-check")
    seed: int = 0
    threads: int = knob(1, "Conversations of an evaluation, and the failures a round attributes, run in parallel "
                           "threads, each conversation with its own memory (a gain against a served model; the "
                           "embedded engine runs one call at a time).")
    repairs: int = knob(2, "Repair up to N blamed calls of an upstream predictor a round, keep those a replay confirms "
                           "and the graph shows lost the information, and use them as demos, reflection targets and "
                           "local-check targets (default 2; 0: no repairs).")
    scoped_replay: bool = knob(True, "Score a write-path candidate on the minibatch by re-running only its calls on "
                                     "the questions' evidence paths; validate a passing one with a full replay "
                                     "(default: on).", flag="--scoped-replay/--full-replay")
    proposal: ProposalSettings = field(default_factory=ProposalSettings)
    demo: DemoSettings = field(default_factory=DemoSettings)
    acceptance: AcceptanceSettings = field(default_factory=AcceptanceSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    search: SettingsSearch = field(default_factory=SettingsSearch)

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.patience < 1 or self.proposal.candidates < 1 or self.minibatch < 1:
            raise ConfigError("optimizer: rounds, patience, candidates and minibatch must be >= 1")
        if self.repairs < 0:
            raise ConfigError(f"optimizer: repairs must be >= 0, got {self.repairs}")

    @classmethod
    def of(cls, **values: Any) -> LoopSettings:
        """The settings with `values` (knob names, e.g. `rounds=4, demos=0`) over the defaults."""
        return cls().with_values(values)

    def with_values(self, values: Mapping[str, Any]) -> LoopSettings:
        """These settings with `values` (knob names) replaced."""
        own = {f.name for f in dataclasses.fields(self)} - set(_PARTS)
        changes: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {name: {} for name in _PARTS}
        for key, value in values.items():
            name = key
            part = _OWNER.get(name)
            if part is not None:
                parts[part][name] = value
            elif name in own:
                changes[name] = value
            else:
                raise ConfigError(f"optimizer: unknown setting {key!r}; settings: {', '.join(sorted(_ALL))}")
        for part, given in parts.items():
            if given:
                changes[part] = dataclasses.replace(getattr(self, part), **given)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every knob by its name, flat (the form of the config file's `optimize:` keys)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _PARTS}
        for part in _PARTS:
            out.update(dataclasses.asdict(getattr(self, part)))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopSettings:
        return cls.of(**data)


_OWNER = {f.name: part for part, settings in _PARTS.items() for f in dataclasses.fields(settings)}
_ALL = set(_OWNER) | {f.name for f in dataclasses.fields(LoopSettings)} - set(_PARTS)
