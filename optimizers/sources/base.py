"""The `CandidateSource` seam that proposes `Candidate`s (`core/candidate.py`), and what a source sees of a round.

Contract of a `CandidateSource`:
- `propose(request, taken)` returns candidates for `request.predictor` only, each with its `origin`; `taken`
  holds what the round's earlier sources proposed (a source that fills the proposal slots counts them and does
  not repeat them).
- It may spend LM calls (the reflection LM, or the task LM tracing demos) but never raises for a bad reply:
  a source with nothing usable returns `[]`.
- It never changes the program: a candidate is applied (`Candidate.apply`) only by the round that tests it.
- A source that spends LM calls says so in `spends` ("reflection" or "task"; absent or "": it spends none), so the
  round asks it only where it can afford the calls (those that spend none propose first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import dspy

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.knobs import knob

if TYPE_CHECKING:
    from memtrace_opt.optimizers.core.evidence import ProposalEvidence
    from memtrace_opt.optimizers.core.repair import Repair
    from memtrace_opt.optimizers.evaluation.cached import EvalResult
    from memtrace_opt.optimizers.evaluation.local_set import LocalSet
    from memtrace_opt.optimizers.evaluation.memo import ReplayMemo

__all__ = ["CandidateSource", "ProposalSettings", "SettingsScorer", "SourceRequest"]

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


class SettingsScorer(Protocol):
    """What scores a settings candidate for the round's target op (`gates/settings.py`): `op_name` is the op, and
    `score(program, candidate)` a score with `gain`, `lost`, `over_cost` and `why`."""

    op_name: str

    def score(self, program: dspy.Module, candidate: Candidate) -> Any: ...


@dataclass(frozen=True)
class SourceRequest:
    """What a source sees of the round: the chosen predictor of `program`, the evidence of its blamed calls,
    the traced minibatch, the plans of the earlier rounds (what they offered), the round's confirmed repairs
    of the blamed calls (`evaluation/repairs.py`; empty with repairs off) and the predictor's local set."""

    round: int
    program: dspy.Module
    predictor: str
    evidence: ProposalEvidence
    minibatch: EvalResult
    memo: ReplayMemo
    slots: int  # the instruction candidates the round asks for (K)
    earlier: Sequence[Any] = field(default_factory=tuple)  # RoundPlans of rounds before this one
    repairs: Sequence[Repair] = field(default_factory=tuple)
    local: LocalSet | None = None  # the predictor's local set (the local objective's), where the round built one
    settings: SettingsScorer | None = None  # scores settings of the round's target op (None: no settings search)

    @property
    def instruction(self) -> str:
        return self.evidence.instruction


class CandidateSource(Protocol):
    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]: ...
