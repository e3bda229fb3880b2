"""`RoundContext`: what every round of one optimization shares (the study, the evaluator, the budget, the sources,
the acceptance rule, the attribution, the valset), built once per run by the teleprompter."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution import Verdict
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.evaluation.blame import gold_errors
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.local_objective import LocalSettings
from memtrace_opt.optimizers.loop.crew import Crew
from memtrace_opt.optimizers.loop.plan import RoundPlan, calls_to_rerun
from memtrace_opt.optimizers.loop.routing import FailureRouting
from memtrace_opt.optimizers.loop.runner import LocalRunner, Runner
from memtrace_opt.optimizers.loop.selection import ModuleSelector
from memtrace_opt.optimizers.loop.study import StudyLedger
from memtrace_opt.optimizers.sources.base import CandidateSource, ProposalSettings
from memtrace_opt.optimizers.sources.settings_source import SettingsSearch

__all__ = ["RoundContext"]


@dataclass
class RoundContext:
    """What every round shares."""

    ledger: StudyLedger
    evaluator: CachedEvaluator
    budget: LMBudget
    selector: ModuleSelector
    sources: Sequence[CandidateSource]
    acceptance: AcceptanceRule
    attribution: Any
    attributor_lm: Any
    attribution_config: Any
    valset: Sequence[CaseRef]
    proposal: ProposalSettings
    system: str = ""
    predictors: Sequence[str] = ()
    local_check: bool = True
    val_ops: dict[str, int] = field(default_factory=dict)  # each predictor's op calls in a run of the valset
    routing: FailureRouting | None = None  # None: attribution with `attribution` (`routing.py`)
    repairs: int = 0  # blamed calls repaired a round, at most (`repairs.py`; 0: none)
    scoped_replay: bool = False  # a write-path candidate's minibatch re-runs only its evidence-path calls
    minibatch_runs: dict[int, EvalResult] = field(default_factory=dict)  # round -> its traced minibatch (this run)
    runner: Runner = field(default_factory=LocalRunner)  # who runs the round's jobs: this process, or the workers' crew
    trainset: Sequence[CaseRef] = ()  # the training questions, in the run's order (the local set is drawn from them)
    local: LocalSettings | None = None  # the local objective's settings; None: the minibatch ranks (`--no-local-objective`)
    search: SettingsSearch | None = None  # the settings search's knobs; None: prompts only (`--no-settings`)

    @property
    def crew(self) -> Crew | None:
        """The workers sharing the study (`crew.py`); None: this process alone."""
        return self.runner if isinstance(self.runner, Crew) else None

    @property
    def local_margin(self) -> int:
        return self.local.local_margin if self.local is not None else 1

    def validation_calls(self, predictor: str) -> int:
        """The LM calls validating a candidate for `predictor` takes at least (0: not known)."""
        return calls_to_rerun(self.val_ops, predictor)

    def left_out(self, number: int, verdicts: Iterable[Verdict]) -> frozenset[str]:
        """The training cases left out of round `number`'s signal: those its `verdicts`, or the recorded plan of an
        earlier round, find to be GoldError."""
        plans = [plan for plan in map(self.plan, range(1, number)) if plan is not None]
        return gold_errors(verdicts) | gold_errors(Verdict.from_dict(v) for plan in plans for v in plan.verdicts)

    def training(self, left_out: frozenset[str]) -> list[CaseRef]:
        """The training questions less `left_out` (GoldError cases: no target for a settings candidate)."""
        return [case for case in self.trainset if case.case_id not in left_out]

    def plan(self, number: int) -> RoundPlan | None:
        stored = self.ledger.get(f"round:{number}")
        return None if stored is None else RoundPlan.from_dict(stored)
