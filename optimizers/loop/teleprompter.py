"""`MemTraceOptimizer`: a DSPy teleprompter that rewrites only the prompt attribution blames, in a closed loop.

    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(budget=300),
                                              storage="sqlite:///run/optuna.db")
    optimized = optimizer.compile(Mem0Memory(), trainset=make_examples(train), valset=make_examples(val))
    optimizer.result.manifest_part()   # baseline, rounds, optimizer summary

Examples are `make_examples(...)` examples (inputs `conversation`, `question`); the student is a
`MemoryProgram` or a `MemoryQA`, and `compile` returns the same kind. Steps:
1. Evaluate the student on the valset, traced (the baseline).
2. Each round: trace the next training minibatch; attribute every failure; map blamed ops to predictors
   (failures blamed on non-LM ops are counted as not fixable by prompts); choose the most blamed predictor.
3. The reflection LM proposes K instructions for THAT predictor, from its blamed calls and correct cases.
4. A candidate for an upstream predictor is first re-run on the blamed calls themselves (the local check:
   does its output now carry the gold answer, without losing it in correct cases?); candidates that pass
   run with cached replay (only ops whose content changed reach the LM), on the minibatch first. One more
   candidate per round keeps the instruction and gives the predictor worked examples from its own correct calls
   (`demos`), in the minibatch or among a pool of training cases traced once (`demo_pool`). The best
   rewrite and the demos candidate each go to the valset if they pass the minibatch; one is accepted only if
   it improves the valset accuracy (by the better valset score when both do).
5. The stop policy (`stop.py`): after `patience` rounds without an accepted change, `rounds`, when the LM-call
   `budget` (task, reflection and attributor calls) is spent, or after `time_budget` seconds of wall time (the baseline always
   completes; a round cut short by the budget is not recorded, and resumes with a larger budget).
Invariant: an accepted step changes the prompt (instruction, or demos) of exactly one predictor (asserted).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import CaseRef, case_refs
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo, lm_name
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.evaluation.program_io import (
    changed_prompts,
    instructions_of,
    system_name,
)
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, unwrap_memory
from memtrace_opt.optimizers.evaluation.usage import counting
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.loop.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.loop.records import OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.rounds import RoundContext, interrupted_round, predictor_ops, run_round
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed, RoundOutcome
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.optimizers.loop.stop import StopPolicy, StopReason
from memtrace_opt.optimizers.loop.study import StudyLedger
from memtrace_opt.optimizers.sources.base import CandidateSource
from memtrace_opt.optimizers.sources.demo_source import DemosSource
from memtrace_opt.optimizers.sources.patterns import PatternSource
from memtrace_opt.optimizers.sources.reflective import (
    InstructionProposer,
    ReflectiveProposer,
    ReflectiveSource,
)

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
        proposer: InstructionProposer | None = None,
        sources: Sequence[CandidateSource] | None = None,
        acceptance: AcceptanceRule | None = None,
        storage: str | None = None,
        study_name: str | None = None,
        memo: ReplayMemo | None = None,
        on_round: Callable[[RoundRecord], None] | None = None,
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
        self.proposer = proposer
        self.sources = sources  # None: the default sources (`_sources`)
        self.acceptance = acceptance  # None: the default rule, whose margin depends on the valset's size
        self.storage = storage
        self.study_name = study_name
        self.memo = memo or ReplayMemo()
        self.on_round = on_round
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
            # under the names the study was first keyed by, so that a run started by an earlier release resumes
            "settings": {k: v for k, v in self.settings.legacy_dict().items()
                         if k not in ("max_lm_calls", "threads", "max_seconds")},
            "method": method,
            "metric": self.metric.name,
            "model": lm_name(self.task_lm),
        }
        digest = hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"memtrace-{system_name(memory).replace(':', '_')}-{digest}"

    def _minibatch(self, order: Sequence[CaseRef], number: int) -> list[CaseRef]:
        size = min(self.settings.minibatch, len(order))
        start = ((number - 1) * size) % len(order)
        return [order[(start + i) % len(order)] for i in range(size)]

    def _sources(self, evaluator: CachedEvaluator, reflection_lm: Any, order: Sequence[CaseRef]) -> list[CandidateSource]:
        """The round's candidate sources, in the order they propose: the given ones, else the reflection LM's
        rewrites (a given `proposer`'s), the diagnosed patterns' rules in the slots left, the demos candidate."""
        if self.sources is not None:
            return list(self.sources)
        demos = DemosSource(evaluator, self.settings.demo, pool=order[:self.settings.demo.demo_pool])
        if self.proposer is not None:
            return [ReflectiveSource(self.proposer), demos]
        reflective = ReflectiveSource(ReflectiveProposer(lm=reflection_lm, pattern_rules=False))
        return [reflective, *([PatternSource()] if self.settings.proposal.pattern_rules else []), demos]

    def compile(self, student: dspy.Module, *, trainset: Sequence[Any], teacher: Any = None,
                valset: Sequence[Any] | None = None) -> dspy.Module:
        if not trainset:
            raise ConfigError("optimizer: the trainset is empty")
        lms = {"task": self.task_lm, "reflection": self.reflection_lm, "attributor": self.attributor_lm}
        task_lm = self.task_lm if self.task_lm is not None else dspy.settings.lm
        with counting(lms, self.usage) as usage, dspy.context(lm=task_lm):
            return self._compile(student, case_refs(trainset), case_refs(valset or trainset), usage)

    def _compile(self, student: dspy.Module, train: list[CaseRef], val: list[CaseRef], usage: UsageTracker) -> dspy.Module:
        started = time.perf_counter()
        memory = unwrap_memory(student)
        study_name = self.study_name or self._study_name(memory, train, val)
        ledger = StudyLedger.open(storage=self.storage, study_name=study_name)
        prior_calls = int(ledger.get("lm_calls_total", 0))
        settings = self.settings
        limit = settings.budget
        deadline = None if settings.time_budget is None else time.monotonic() + settings.time_budget
        budget = LMBudget(usage, None if limit is None else max(0, limit - prior_calls), METERED_ROLES, deadline)
        system = system_name(memory)
        evaluator = CachedEvaluator(self.metric, memo=self.memo, task_lm=self.task_lm,
                                    meta={"system": system}, threads=settings.threads)
        task_lm = self.task_lm if self.task_lm is not None else dspy.settings.lm

        def guard(lm: Any) -> Any:  # rounds stop exactly at the budget; the baseline always completes
            return guard_lm(lm, budget) if lm is not None and budget.bounded else lm

        def checkpoint() -> None:  # the calls spent so far, for a resumed run's budget
            ledger.put("lm_calls_total", prior_calls + budget.spent())

        order = list(train)
        random.Random(settings.seed).shuffle(order)
        ctx = RoundContext(
            ledger=ledger, evaluator=evaluator, budget=budget, selector=self.selector,
            sources=self._sources(evaluator, guard(self.reflection_lm or task_lm), order),
            acceptance=self.acceptance_for(len(val)), attribution=self.attribution, attributor_lm=guard(self.attributor_lm),
            attribution_config=self.attribution_config, valset=val, proposal=settings.proposal, system=system,
            predictors=[name for name, _ in memory.named_predictors()], local_check=settings.local_check,
        )
        baseline = ledger.get("baseline")
        if baseline is None:
            result = evaluator.evaluate(memory, val)
            baseline = {"val_accuracy": result.accuracy}
            ledger.put("baseline", baseline)
            ledger.put("val_ops", predictor_ops(result))  # what a validation costs, per predictor changed
            checkpoint()
        log.info("baseline valset accuracy %.3f (%s)", baseline["val_accuracy"], study_name)
        ctx.val_ops = dict(ledger.get("val_ops") or {})
        stop = StopPolicy(settings.patience, least_validation=min(
            (n for n in map(ctx.validation_calls, ctx.predictors) if n > 0), default=0))
        evaluator.task_lm = guard(task_lm)
        program, current_val = memory, float(baseline["val_accuracy"])
        rounds: list[RoundRecord] = []
        history: list[RoundOutcome] = []
        verdicts: list[dict[str, Any]] = []
        reason: StopReason | None = None
        interrupted: dict[str, Any] | None = None
        for number in range(1, settings.rounds + 1):
            done = ledger.get(f"round_done:{number}")
            cut = False
            if done is not None:  # finished by an earlier run: its outcome stands
                record = RoundRecord.from_dict(done)
                taken = record.accepted_candidate
                if record.accepted and taken is not None:
                    program, current_val = taken.apply(program), record.val_accuracy
                plan = ctx.plan(number)
                verdicts.extend(dict(v) for v in (plan.verdicts if plan is not None else ()))
            else:
                reason = stop.before(number, budget)
                if reason is not None:
                    break
                before = program
                try:
                    outcome = run_round(ctx, number, program, current_val, self._minibatch(order, number), history)
                except BudgetExhausted as spent:
                    log.info("round %d stopped: %s", number, spent)
                    checkpoint()
                    reason = StopReason.spent(budget)
                    interrupted = interrupted_round(ledger, number, program, f"cut short: {spent}")
                    break
                record, program, cut = outcome.record, outcome.program, outcome.budget_hit
                verdicts.extend(outcome.verdicts)
                if cut and not record.accepted:  # spent among its candidates: cut short, it resumes
                    checkpoint()
                    reason = StopReason.spent(budget)
                    why = budget.why_spent() or f"{budget.left()} LM calls left, too few to validate another candidate"
                    interrupted = interrupted_round(ledger, number, program, f"cut short: {why}")
                    break
                record = replace(record, lm_calls_total=prior_calls + budget.spent())
                if record.accepted:
                    changed = changed_prompts(before, program)
                    assert changed == [record.chosen_predictor], f"an accepted step changed {changed}"
                    current_val = record.val_accuracy
                if not cut:
                    ledger.put(f"round_done:{number}", record.to_dict())
                checkpoint()
            rounds.append(record)
            history.append(RoundOutcome(record.chosen_predictor, record.accepted))
            if self.on_round is not None:
                self.on_round(record)
            reason = stop.after(record, budget, cut)
            if reason is not None:
                break
        optimized: dspy.Module = program
        if isinstance(student, MemoryQA):
            optimized = student.deepcopy()
            optimized.memory = program
        stop_reason = (reason or StopReason.MAX_ROUNDS).value
        self.result = OptimizationResult(
            program=optimized,
            baseline_val=float(baseline["val_accuracy"]),
            rounds=rounds,
            stop_reason=stop_reason,
            lm_calls=prior_calls + budget.spent(),
            lm_calls_by_role=budget.by_role(),
            tokens=budget.tokens(),
            seconds=time.perf_counter() - started,
            study_name=study_name,
            storage=self.storage,
            trials=ledger.trials_count(),
            verdicts=verdicts,
            interrupted=interrupted,
        )
        log.info("optimization stopped (%s) after %d rounds; valset %.3f -> %.3f; %d LM calls", stop_reason,
                 len(rounds), self.result.baseline_val, self.result.best_val, self.result.lm_calls)
        return optimized
