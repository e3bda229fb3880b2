"""`RoundContext`: what every round of one optimization shares, built once per run by the teleprompter: the adapter
through which it reaches the program, the candidate sources, the selector, the attribution, the splits and the
loop's knobs. The steps read it; none of them changes it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memtrace_opt.attribution import Verdict
from memtrace_opt.optimizers.evaluation.adapter import MemoryAdapter
from memtrace_opt.optimizers.evaluation.blame import gold_errors
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.local_objective import LocalSettings
from memtrace_opt.optimizers.loop import keys
from memtrace_opt.optimizers.loop.records import RoundPlan
from memtrace_opt.optimizers.loop.routing import FailureRouting
from memtrace_opt.optimizers.loop.selection import ModuleSelector
from memtrace_opt.optimizers.loop.study import StudyLedger
from memtrace_opt.optimizers.sources.base import CandidateSource, ProposalSettings
from memtrace_opt.optimizers.sources.settings_source import SettingsSearch

__all__ = ["RoundContext"]


@dataclass
class RoundContext:
    """What every round shares (module doc)."""

    ledger: StudyLedger
    adapter: MemoryAdapter
    selector: ModuleSelector
    sources: Sequence[CandidateSource]
    acceptance: AcceptanceRule
    attribution: Any
    attributor_lm: Any
    attribution_config: Any
    valset: Sequence[CaseRef]
    trainset: Sequence[CaseRef]  # the training questions, in the run's order (the local set is drawn from them)
    proposal: ProposalSettings
    system: str = ""
    predictors: Sequence[str] = ()
    local_check: bool = True
    routing: FailureRouting | None = None  # None: attribution with `attribution` (`routing.py`)
    repairs: int = 0  # blamed calls repaired a round, at most (`repairs.py`; 0: none)
    scoped_replay: bool = False  # a write-path candidate's minibatch re-runs only its evidence-path calls
    local: LocalSettings | None = None  # the local objective's settings; None: the minibatch ranks (`--no-local-objective`)
    search: SettingsSearch | None = None  # the settings search's knobs; None: prompts only (`--no-settings`)
    threads: int = 1

    @property
    def local_margin(self) -> int:
        return self.local.local_margin if self.local is not None else 1

    def left_out(self, number: int, verdicts: Iterable[Verdict]) -> frozenset[str]:
        """The training cases left out of round `number`'s signal: those its `verdicts`, or the recorded plan of an
        earlier round, find to be GoldError."""
        earlier = [plan for plan in map(self.plan, range(1, number)) if plan is not None]
        return gold_errors(verdicts) | gold_errors(Verdict.from_dict(v) for plan in earlier for v in plan.verdicts)

    def training(self, left_out: frozenset[str]) -> list[CaseRef]:
        """The training questions less `left_out` (GoldError cases: no target for any candidate)."""
        return [case for case in self.trainset if case.case_id not in left_out]

    def plan(self, number: int) -> RoundPlan | None:
        stored = self.ledger.get(keys.plan(number))
        return None if stored is None else RoundPlan.from_dict(stored)

    def earlier(self, number: int) -> list[RoundPlan]:
        return [plan for plan in map(self.plan, range(1, number)) if plan is not None]
