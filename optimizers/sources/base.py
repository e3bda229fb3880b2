"""`Candidate`, the one form of a proposed prompt from its source to `program.json`, and the `CandidateSource`
seam that proposes them.

Contract of a `CandidateSource`:
- `propose(request, taken)` returns candidates for `request.predictor` only, each with its `origin`; `taken`
  holds what the round's earlier sources proposed (a source that fills the proposal slots counts them and does
  not repeat them).
- It may spend LM calls (the reflection LM, or the task LM tracing demos) but never raises for a bad reply:
  a source with nothing usable returns `[]`.
- It never changes the program: a candidate is applied (`Candidate.apply`) only by the round that tests it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import dspy

from memtrace_opt.optimizers.evaluation.program_io import with_instruction
from memtrace_opt.optimizers.loop.knobs import knob

if TYPE_CHECKING:
    from memtrace_opt.optimizers.evaluation.cached import EvalResult
    from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
    from memtrace_opt.optimizers.evaluation.repairs import Repair
    from memtrace_opt.optimizers.sources.reflective import ProposalEvidence

__all__ = ["COMBINED", "DEMOS", "REFLECTION", "REPAIR", "Candidate", "CandidateSource", "ProposalSettings", "SourceRequest"]

REFLECTION = "reflection"  # the reflection LM wrote the instruction
DEMOS = "demos"  # the current instruction with worked examples from the predictor's own correct calls
COMBINED = "combined"  # the round's best rewrite with its demos candidate's demos
REPAIR = "repair"  # the current instruction with worked examples made from confirmed repairs (`repair_demos.py`)
# and "pattern:NAME": a diagnosed pattern's rule appended to the current instruction (`patterns.py`)


@dataclass(frozen=True)
class Candidate:
    """A prompt for one predictor: its instruction and, when it sets them, its whole demo list (None: the
    program's demos are kept)."""

    predictor: str
    instruction: str
    demos: tuple[Mapping[str, Any], ...] | None = None
    origin: str = REFLECTION
    built_from: tuple[str, ...] = ()  # the local calls (keys) it was made from: the local objective scores it on the rest

    @classmethod
    def of(cls, predictor: str, instruction: str, demos: Sequence[Mapping[str, Any]] | None = None,
           origin: str = REFLECTION, built_from: Sequence[str] = ()) -> Candidate:
        return cls(predictor, instruction, None if demos is None else tuple(dict(d) for d in demos), origin,
                   tuple(built_from))

    @property
    def sets_demos(self) -> bool:
        return self.demos is not None

    def demo_list(self) -> list[dict[str, Any]] | None:
        return None if self.demos is None else [dict(d) for d in self.demos]

    def apply(self, program: dspy.Module) -> dspy.Module:
        """A copy of `program` with this candidate's prompt for its predictor."""
        return with_instruction(program, self.predictor, self.instruction, self.demo_list())

    def key(self, round_number: int, parent: str) -> str:
        """The study key of this candidate in round `round_number` from the program whose instructions digest to
        `parent` (the same key a resumed run computes, so it finds the trial)."""
        content = self.instruction if self.demos is None else (
            self.instruction + "\x1f" + json.dumps(self.demo_list(), sort_keys=True, ensure_ascii=False))
        return f"r{round_number}:{self.predictor}:{parent}:{hashlib.sha256(content.encode()).hexdigest()[:16]}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"predictor": self.predictor, "instruction": self.instruction, "origin": self.origin}
        if self.demos is not None:
            out["demos"] = self.demo_list()
        if self.built_from:
            out["built_from"] = list(self.built_from)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls.of(str(data["predictor"]), str(data["instruction"]), data.get("demos"),
                      str(data.get("origin") or REFLECTION), [str(k) for k in data.get("built_from") or ()])


@dataclass(frozen=True)
class ProposalSettings:
    """The proposal knobs: `candidates` instructions proposed per round (K), from the `evidence_cases` blamed
    and correct cases shown; with `pattern_rules`, the slots the reflection LM's replies leave empty go to the
    rules of the mistakes diagnosed in the blamed answers (`patterns.py`), and off, the reflection LM is not told
    those mistakes either."""

    candidates: int = knob(3, "Instructions proposed per round (K).")
    pattern_rules: bool = knob(True, "Fill the proposal slots the reflection LM leaves empty with the rules of the "
                                     "mistakes diagnosed in the blamed answers, in the training golds' format: a "
                                     "partial list, a relative or other-form date, a needless decline, a long sentence; "
                                     "off, the reflection LM is not told the mistakes either (default: on).",
                               flag="--pattern-rules/--no-pattern-rules")
    evidence_cases: int = 3


@dataclass(frozen=True)
class SourceRequest:
    """What a source sees of the round: the chosen predictor of `program`, the evidence of its blamed calls,
    the traced minibatch, the plans of the earlier rounds (what they offered) and the round's confirmed repairs
    of the blamed calls (`evaluation/repairs.py`; empty with repairs off)."""

    round: int
    program: dspy.Module
    predictor: str
    evidence: ProposalEvidence
    minibatch: EvalResult
    memo: ReplayMemo
    slots: int  # the instruction candidates the round asks for (K)
    earlier: Sequence[Any] = field(default_factory=tuple)  # RoundPlans of rounds before this one
    repairs: Sequence[Repair] = field(default_factory=tuple)

    @property
    def instruction(self) -> str:
        return self.evidence.instruction


class CandidateSource(Protocol):
    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]: ...
