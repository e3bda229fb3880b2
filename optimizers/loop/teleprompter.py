"""`MemTraceOptimizer`: a DSPy teleprompter that rewrites only the prompt attribution blames, in a closed loop.

    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(budget=300),
                                              storage="sqlite:///run/optuna.db", replies=ReplyCache(run / "r.sqlite"))
    optimized = optimizer.compile(Mem0Memory(), trainset=make_examples(train), valset=make_examples(val))
    optimizer.result.manifest_part()   # baseline, rounds, optimizer summary

Examples are `make_examples(...)` examples (inputs `conversation`, `question`); the student is a
`MemoryProgram` or a `MemoryQA`, and `compile` returns the same kind. The teleprompter only assembles: the adapter
through which the loop reaches the program (`evaluation/adapter.py`), the candidate sources, the study, the budget,
the pricer and the runner, handed to the engine (`engine.py`), which runs the baseline and the rounds; a round's
steps are `steps.py` and its choice `choice.py`.

Every LM role's calls go through one reply cache (`replies`, in memory when none is given): a request the model
was sent before is never paid twice, and the LM-call budget counts only calls that reach the model.
Invariant: an accepted step changes the prompt (instruction, or demos) of exactly one predictor, or the settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from memtrace_opt.errors import ConfigError
from memtrace_opt.estimate import Rates
from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.optimizers.core.budget import LMBudget, guard_lm
from memtrace_opt.optimizers.core.program_io import instructions_of, system_name
from memtrace_opt.optimizers.evaluation.adapter import MemoryAdapter
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.diagnosis import learned_patterns
from memtrace_opt.optimizers.evaluation.examples import CaseRef, case_refs
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo, lm_name
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, unwrap_memory
from memtrace_opt.optimizers.evaluation.usage import counting
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.loop import keys
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Crew
from memtrace_opt.optimizers.loop.engine import Engine, LoopState
from memtrace_opt.optimizers.loop.pricing import Pricer
from memtrace_opt.optimizers.loop.records import OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.routing import FailureRouting
from memtrace_opt.optimizers.loop.runner import LocalRunner
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.optimizers.loop.stop import StopPolicy, StopReason
from memtrace_opt.optimizers.loop.study import StudyLedger
from memtrace_opt.optimizers.sources.base import CandidateSource
from memtrace_opt.optimizers.sources.demo_source import DemosSource
from memtrace_opt.optimizers.sources.local_demos import LocalDemosSource
from memtrace_opt.optimizers.sources.patterns import PatternSource
from memtrace_opt.optimizers.sources.reflective import (
    InstructionProposer,
    ReflectiveProposer,
    ReflectiveSource,
)
from memtrace_opt.optimizers.sources.repair_demos import RepairDemosSource
from memtrace_opt.optimizers.sources.settings_source import SettingsSource

__all__ = ["MemTraceOptimizer", "METERED_ROLES"]

log = logging.getLogger(__name__)

METERED_ROLES = ("task", "reflection", "attributor")


class MemTraceOptimizer(Teleprompter):
    """Attribution-guided, one-predictor-at-a-time instruction optimization (see the module docstring)."""

    def __init__(
        self,
        metric: AnswerMetric | None = None,
        *,
        task_lm: Any = None,
        reflection_lm: Any = None,
        attributor_lm: Any = None,
        usage: UsageTracker | None = None,
        settings: LoopSettings | None = None,
        attribution: Any = "graphtrace",
        attribution_config: Any = None,
        selector: ModuleSelector | None = None,
        routing: FailureRouting | None = None,
        proposer: InstructionProposer | None = None,
        sources: Sequence[CandidateSource] | None = None,
        acceptance: AcceptanceRule | None = None,
        storage: str | None = None,
        study_name: str | None = None,
        memo: ReplayMemo | None = None,
        on_round: Callable[[RoundRecord], None] | None = None,
        shared: bool = False,
        heartbeat: int | None = None,
        rates: Rates | None = None,
        replies: ReplyCache | None = None,
    ) -> None:
        super().__init__()
        self.metric = metric or AnswerMetric()
        self.task_lm = task_lm
        self.reflection_lm = reflection_lm
        self.attributor_lm = attributor_lm
        self.usage = usage
        self.settings = settings or LoopSettings()
        self.attribution = attribution
        self.attribution_config = attribution_config
        self.selector = selector or MostBlamed()
        self.routing = routing  # None: attribution blames each failure (`routing.py`)
        self.proposer = proposer
        self.sources = sources  # None: the default sources (`_sources`)
        self.acceptance = acceptance  # None: the default rule, whose margin depends on the valset's size
        self.storage = storage
        self.study_name = study_name
        self.memo = memo or ReplayMemo()
        self.on_round = on_round
        self.shared = shared  # other workers may share the study: split each round's work with them (`crew.py`)
        self.heartbeat = heartbeat  # seconds between a database storage's heartbeats (None: `study.py`'s default)
        self.rates = rates  # the task model's speed on this machine (None: priced by the calls watched alone)
        self.replies = replies  # the reply cache every role's calls go through (None: one in memory)
        self.result: OptimizationResult | None = None

    @classmethod
    def from_models(cls, models: Any, *, judge: bool = False, **kwargs: Any) -> MemTraceOptimizer:
        """An optimizer over a `memtrace_opt.lm.Models`' roles; `judge=True` scores with the LLM judge."""
        metric = kwargs.pop("metric", None) or AnswerMetric(judge=judge, judge_lm=models.judge if judge else None)
        return cls(metric, task_lm=models.task, reflection_lm=models.reflection, attributor_lm=models.attributor,
                   usage=models.usage, **kwargs)

    def acceptance_for(self, val_size: int) -> AcceptanceRule:
        """The acceptance rule on a valset of `val_size` questions: the one given, else the default
        `StrictImprovement` with the settings' margin (`AcceptanceSettings.min_delta`)."""
        if self.acceptance is not None:
            return self.acceptance
        return self.settings.acceptance.rule(val_size)

    # ---------------------------------------------------------------------------------------------------
    def _study_name(self, memory: Any, train: Sequence[CaseRef], val: Sequence[CaseRef]) -> str:
        method = self.attribution if isinstance(self.attribution, str) else getattr(self.attribution, "name", "custom")
        setup = {
            "system": system_name(memory),
            "config": memory.config.to_dict(),
            "instructions": instructions_of(memory),
            "train": [c.case_id for c in train],
            "val": [c.case_id for c in val],
            "settings": {k: v for k, v in self.settings.to_dict().items()
                         if k not in ("budget", "threads", "time_budget")},
            "method": method,
            "metric": self.metric.name,
            "model": lm_name(self.task_lm),
        }
        digest = hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"memtrace-{system_name(memory).replace(':', '_')}-{digest}"

    def _sources(self, evaluator: CachedEvaluator, reflection_lm: Any, order: Sequence[CaseRef], ledger: StudyLedger,
                 study_name: str) -> list[CandidateSource]:
        """The round's candidate sources, in the order they propose: the given ones, else the reflection LM's
        rewrites (a given `proposer`'s), the diagnosed patterns' rules in the slots left, the demos candidate,
        with the local objective the demos bootstrapped from the local set, with `repairs` the repair demos, and
        with the settings search the target op's settings. The patterns are learned from the training golds (`order`):
        the format their rules ask for is the golds' own. With `pattern_rules` off there are none: no pattern
        rule, and no diagnosed mistake shown to the reflection LM."""
        if self.sources is not None:
            return list(self.sources)
        demos: list[CandidateSource] = [DemosSource(evaluator, self.settings.demo, pool=order[:self.settings.demo.demo_pool])]
        if self.settings.local.local_objective:
            demos.append(LocalDemosSource(self.settings.demo))
        extra: list[CandidateSource] = [RepairDemosSource(self.settings.demo)] if self.settings.repairs > 0 else []
        if self.settings.search.settings:
            extra.append(SettingsSource(self.settings.search, storage=ledger.study._storage, study_name=study_name,
                                          seed=self.settings.seed))
        patterns = learned_patterns(c.question.answer for c in order) if self.settings.proposal.pattern_rules else ()
        if self.proposer is not None:
            return [ReflectiveSource(self.proposer, patterns), *demos, *extra]
        reflective = ReflectiveSource(ReflectiveProposer(lm=reflection_lm, pattern_rules=False), patterns)
        return [reflective, *([PatternSource(patterns)] if patterns else []), *demos, *extra]

    def compile(self, student: dspy.Module, *, trainset: Sequence[Any], teacher: Any = None,
                valset: Sequence[Any] | None = None) -> dspy.Module:
        if not trainset:
            raise ConfigError("optimizer: the trainset is empty")
        replies = self.replies if self.replies is not None else ReplyCache()
        lms = {"task": self.task_lm, "reflection": self.reflection_lm, "attributor": self.attributor_lm}
        cached = {role: _with_replies(lm, replies) for role, lm in lms.items()}
        task_lm = cached["task"] if cached["task"] is not None else _with_replies(dspy.settings.lm, replies)
        with counting(cached, self.usage) as usage, dspy.context(lm=task_lm):
            return self._compile(student, case_refs(trainset), case_refs(valset or trainset), usage, cached, task_lm)

    def _compile(self, student: dspy.Module, train: list[CaseRef], val: list[CaseRef], usage: UsageTracker,
                 lms: dict[str, Any], task_lm: Any) -> dspy.Module:
        started = time.perf_counter()
        memory = unwrap_memory(student)
        settings = self.settings
        study_name = self.study_name or self._study_name(memory, train, val)
        ledger = StudyLedger.open(storage=self.storage, study_name=study_name, heartbeat=self.heartbeat)
        crew = Crew(ledger.study, self.memo) if self.shared and self.storage is not None else None
        prior_calls = int(ledger.get(keys.LM_CALLS_TOTAL, 0))
        limit = None if settings.budget is None else max(0, settings.budget - prior_calls)
        budget = LMBudget(usage, limit, METERED_ROLES, None,
                          crew.others_spent if crew is not None else None).run_for(settings.time_budget)
        if crew is not None:
            crew.spend = budget.own

        def guard(lm: Any) -> Any:  # rounds stop exactly at the budget; the baseline always completes
            return guard_lm(lm, budget) if lm is not None and budget.bounded else lm

        system = system_name(memory)
        evaluator = CachedEvaluator(self.metric, memo=self.memo, task_lm=task_lm, meta={"system": system},
                                    threads=settings.threads)
        order = list(train)
        random.Random(settings.seed).shuffle(order)
        predictors = [name for name, _ in memory.named_predictors()]
        ctx = RoundContext(
            ledger=ledger, adapter=MemoryAdapter(evaluator), selector=self.selector,
            sources=self._sources(evaluator, guard(lms["reflection"] or task_lm), order, ledger, study_name),
            acceptance=self.acceptance_for(len(val)), attribution=self.attribution,
            attributor_lm=guard(lms["attributor"]), attribution_config=self.attribution_config, valset=val,
            trainset=order, proposal=settings.proposal, system=system, predictors=predictors,
            local_check=settings.local_check, routing=self.routing, repairs=settings.repairs,
            scoped_replay=settings.scoped_replay, local=settings.local if settings.local.local_objective else None,
            search=settings.search if settings.search.settings else None, threads=settings.threads,
        )
        engine = Engine(ctx, ledger=ledger, budget=budget, stop=StopPolicy(settings.patience),
                        pricer=Pricer(self.rates, predictors, memo=self.memo), runner=crew if crew is not None else LocalRunner(),
                        settings=settings, study_name=study_name, prior_calls=prior_calls, task_lm=guard(task_lm),
                        on_round=self.on_round)
        state = engine.run(memory, val, order)
        return self._finish(student, state, engine, time.perf_counter() - started)

    def _finish(self, student: dspy.Module, state: LoopState, engine: Engine, seconds: float) -> dspy.Module:
        """The optimized program, of the student's kind, and `self.result`."""
        optimized: dspy.Module = state.program
        if isinstance(student, MemoryQA):
            optimized = student.deepcopy()
            optimized.memory = state.program
        stop_reason = (state.reason or StopReason.MAX_ROUNDS).value
        budget = engine.budget
        self.result = OptimizationResult(
            program=optimized, baseline_val=state.baseline, rounds=state.rounds, stop_reason=stop_reason,
            lm_calls=engine.calls_total(), lm_calls_by_role=budget.by_role(), tokens=budget.tokens(), seconds=seconds,
            study_name=engine.study_name, storage=self.storage, trials=engine.ledger.trials_count(),
            verdicts=state.verdicts, interrupted=state.interrupted, cached_calls=budget.cached(),
        )
        log.info("optimization stopped (%s) after %d rounds; valset %.3f -> %.3f; %d LM calls (%d served by the "
                 "reply cache)", stop_reason, len(state.rounds), self.result.baseline_val, self.result.best_val,
                 self.result.lm_calls, self.result.cached_calls)
        return optimized


def _with_replies(lm: Any, replies: ReplyCache) -> Any:
    """`lm` serving and feeding `replies` (a copy where it had none, or another; DSPy's own cache off beside it)."""
    if lm is None or getattr(lm, "reply_cache", replies) is replies or not hasattr(lm, "reply_cache"):
        return lm
    copied = lm.copy()
    copied.reply_cache = replies
    copied.cache = False
    return copied
