"""`Candidate`: the one form of a proposed prompt for one predictor, from its source to `program.json`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.optimizers.core.program_io import with_instruction, with_settings

__all__ = ["BOOTSTRAPPED", "COMBINED", "DEMOS", "REFLECTION", "REPAIR", "SETTINGS", "Candidate"]

REFLECTION = "reflection"  # the reflection LM wrote the instruction
DEMOS = "demos"  # the current instruction with worked examples from the predictor's own correct calls
COMBINED = "combined"  # the round's best rewrite with its demos candidate's demos
REPAIR = "repair"  # the current instruction with worked examples made from confirmed repairs (`repair_demos.py`)
BOOTSTRAPPED = "bootstrapped"  # worked examples from the local set's calls that carried their targets (`local_demos.py`)
SETTINGS = "settings"  # new values of the chosen op's tunable settings, its prompt kept (`settings_source.py`)
# and "pattern:NAME": a diagnosed pattern's rule appended to the current instruction (`patterns.py`)


@dataclass(frozen=True)
class Candidate:
    """A change to one predictor of a program (or, for `settings`, to the op it or a blamed op without a prompt
    runs in): its instruction and, when it sets them, its whole demo list (None: the program's demos are kept);
    or, with `settings` (name -> value pairs of the program's tunable settings, `programs/tunable.py`), new
    settings and no prompt (`instruction` ""). `predictor` names the round's target either way."""

    predictor: str
    instruction: str
    demos: tuple[Mapping[str, Any], ...] | None = None
    origin: str = REFLECTION
    built_from: tuple[str, ...] = ()  # the local calls (keys) it was made from: the local objective scores it on the rest
    settings: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, predictor: str, instruction: str, demos: Sequence[Mapping[str, Any]] | None = None,
           origin: str = REFLECTION, built_from: Sequence[str] = ()) -> Candidate:
        return cls(predictor, instruction, None if demos is None else tuple(dict(d) for d in demos), origin,
                   tuple(built_from))

    @classmethod
    def of_settings(cls, target: str, settings: Mapping[str, Any]) -> Candidate:
        """New values of the program's tunable settings for the round's `target`; its prompt is kept."""
        return cls(target, "", None, SETTINGS, (), tuple(sorted(settings.items())))

    @property
    def sets_settings(self) -> bool:
        return bool(self.settings)

    @property
    def sets_demos(self) -> bool:
        return self.demos is not None

    def demo_list(self) -> list[dict[str, Any]] | None:
        return None if self.demos is None else [dict(d) for d in self.demos]

    def apply(self, program: dspy.Module) -> dspy.Module:
        """A copy of `program` with this candidate's prompt for its predictor, or its settings."""
        if self.settings:
            return with_settings(program, dict(self.settings))
        return with_instruction(program, self.predictor, self.instruction, self.demo_list())

    def key(self, round_number: int, parent: str) -> str:
        """The study key of this candidate in round `round_number` from the program whose instructions digest to
        `parent` (the same key a resumed run computes, so it finds the trial)."""
        content = self.instruction if self.demos is None else (
            self.instruction + "\x1f" + json.dumps(self.demo_list(), sort_keys=True, ensure_ascii=False))
        if self.settings:
            content = "settings\x1f" + json.dumps(dict(self.settings), sort_keys=True, default=str)
        return f"r{round_number}:{self.predictor}:{parent}:{hashlib.sha256(content.encode()).hexdigest()[:16]}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"predictor": self.predictor, "instruction": self.instruction, "origin": self.origin}
        if self.demos is not None:
            out["demos"] = self.demo_list()
        if self.built_from:
            out["built_from"] = list(self.built_from)
        if self.settings:
            out["settings"] = dict(self.settings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        if data.get("settings"):
            return cls.of_settings(str(data["predictor"]), dict(data["settings"]))
        return cls.of(str(data["predictor"]), str(data["instruction"]), data.get("demos"),
                      str(data.get("origin") or REFLECTION), [str(k) for k in data.get("built_from") or ()])
