"""`MemTraceOptimizer`: a DSPy teleprompter that rewrites only the prompt attribution blames, in a closed loop.

    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings(max_lm_calls=300),
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
   (`max_demos`), in the minibatch or among a pool of training cases traced once (`demo_pool`). The best
   rewrite and the demos candidate each go to the valset if they pass the minibatch; one is accepted only if
   it improves the valset accuracy (by the better valset score when both do).
5. Stop after `patience` rounds without an accepted change, `max_rounds`, when the LM-call budget (task,
   reflection and attributor calls) is spent, or after `max_seconds` of wall time (the baseline always
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
from dataclasses import asdict, dataclass, replace
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
    with_instruction,
)
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, unwrap_memory
from memtrace_opt.optimizers.evaluation.usage import counting
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule, StrictImprovement
from memtrace_opt.optimizers.loop.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.loop.records import OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.rounds import RoundContext, interrupted_round, predictor_ops, run_round
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed, RoundOutcome
from memtrace_opt.optimizers.loop.study import StudyLedger
from memtrace_opt.optimizers.sources.demos import DEMO_CHARS, DEMO_TOTAL_CHARS
from memtrace_opt.optimizers.sources.reflective import InstructionProposer, ReflectiveProposer

__all__ = ["LoopSettings", "MemTraceOptimizer", "METERED_ROLES"]

log = logging.getLogger(__name__)

METERED_ROLES = ("task", "reflection", "attributor")


@dataclass(frozen=True)
class LoopSettings:
    """Knobs of the loop. `max_lm_calls` / `max_seconds` None mean no budget; `minibatch_size` training cases
    per round; `local_check` re-runs an upstream predictor's blamed calls under each candidate before its
    minibatch replay (`local_check.py`); `max_demos` > 0 adds one candidate per round, the current instruction
    with up to that many worked examples from the predictor's own correct calls (`demos.py`), none longer than
    `demo_chars` characters and all of the predictor's demos within `demo_budget_chars` together, drawn from the round's minibatch and from the first `demo_pool` training cases (in
    the seeded order), traced once when a round first builds demos (0: the minibatch only); with `compact_demos`,
    a demo of the step that writes the answers shows only the lines of its long context around the answer
    (`demo_context.py`); `validate_ties` sends a candidate that ties the current minibatch score to the
    valset too (acceptance still needs a valset gain); with `pattern_rules`, the proposal slots the reflection
    LM's replies leave empty go to the rules of the mistakes diagnosed in the blamed answers (`diagnosis.py`);
    `min_val_gain` is the valset gain (accuracy, 0-1) a candidate must exceed to be accepted: 0, any gain; `min_val_questions` is the net number of validation
    questions it must gain (answered right that were wrong, less the reverse), 2 by default: in our runs six
    accepted steps that gained exactly one validation question came to -6 held-out questions together."""

    max_rounds: int = 6
    patience: int = 2
    num_candidates: int = 3
    minibatch_size: int = 8
    max_lm_calls: int | None = None
    evidence_cases: int = 3
    seed: int = 0
    threads: int = 1
    max_seconds: float | None = None
    local_check: bool = True
    max_demos: int = 2
    demo_chars: int = DEMO_CHARS
    validate_ties: bool = False
    min_val_gain: float = 0.0
    min_val_questions: int = 2
    demo_pool: int = 24
    demo_budget_chars: int | None = DEMO_TOTAL_CHARS
    compact_demos: bool = True
    pattern_rules: bool = True

    def __post_init__(self) -> None:
        if self.max_rounds < 1 or self.patience < 1 or self.num_candidates < 1 or self.minibatch_size < 1:
            raise ConfigError("optimizer: max_rounds, patience, num_candidates and minibatch_size must be >= 1")
        if self.max_demos < 0:
            raise ConfigError(f"optimizer: max_demos must be >= 0, got {self.max_demos}")
        if not 0.0 <= self.min_val_gain < 1.0:
            raise ConfigError(f"optimizer: min_val_gain is an accuracy gain in [0, 1), got {self.min_val_gain}")
        if self.demo_pool < 0:
            raise ConfigError(f"optimizer: demo_pool must be >= 0, got {self.demo_pool}")
        if self.demo_budget_chars is not None and self.demo_budget_chars < 1:
            raise ConfigError(f"optimizer: demo_budget_chars must be >= 1 (None: no limit), got {self.demo_budget_chars}")
        if self.min_val_questions < 1:
            raise ConfigError(f"optimizer: min_val_questions must be >= 1, got {self.min_val_questions}")

    def min_delta(self, val_size: int) -> float:
        """The valset accuracy gain a candidate must exceed on `val_size` questions: `min_val_gain`, or less
        than `min_val_questions` questions' worth, whichever is larger."""
        return max(self.min_val_gain, (self.min_val_questions - 1) / max(1, val_size))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        `StrictImprovement` with the settings' margin (`LoopSettings.min_delta`)."""
        if self.acceptance is not None:
            return self.acceptance
        return StrictImprovement(min_delta=self.settings.min_delta(val_size), validate_ties=self.settings.validate_ties)

    # ---------------------------------------------------------------------------------------------------
    def _study_name(self, memory: Any, train: Sequence[CaseRef], val: Sequence[CaseRef]) -> str:
        method = self.attribution if isinstance(self.attribution, str) else getattr(self.attribution, "name", "custom")
        setup = {
            "system": system_name(memory),
            "config": memory.config.to_dict(),
            "instructions": instructions_of(memory),
            "train": [c.case_id for c in train],
            "val": [c.case_id for c in val],
            "settings": {k: v for k, v in self.settings.to_dict().items() if k not in ("max_lm_calls", "threads", "max_seconds")},
            "method": method,
            "metric": self.metric.name,
            "model": lm_name(self.task_lm),
        }
        digest = hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"memtrace-{system_name(memory).replace(':', '_')}-{digest}"

    def _minibatch(self, order: Sequence[CaseRef], number: int) -> list[CaseRef]:
        size = min(self.settings.minibatch_size, len(order))
        start = ((number - 1) * size) % len(order)
        return [order[(start + i) % len(order)] for i in range(size)]

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
        limit = self.settings.max_lm_calls
        deadline = None if self.settings.max_seconds is None else time.monotonic() + self.settings.max_seconds
        budget = LMBudget(usage, None if limit is None else max(0, limit - prior_calls), METERED_ROLES, deadline)
        system = system_name(memory)
        evaluator = CachedEvaluator(self.metric, memo=self.memo, task_lm=self.task_lm,
                                    meta={"system": system}, threads=self.settings.threads)
        task_lm = self.task_lm if self.task_lm is not None else dspy.settings.lm

        def guard(lm: Any) -> Any:  # rounds stop exactly at the budget; the baseline always completes
            return guard_lm(lm, budget) if lm is not None and budget.bounded else lm

        proposer = self.proposer or ReflectiveProposer(lm=guard(self.reflection_lm or task_lm),
                                                       pattern_rules=self.settings.pattern_rules)
        ctx = RoundContext(
            ledger=ledger, evaluator=evaluator, budget=budget, selector=self.selector, proposer=proposer,
            acceptance=self.acceptance_for(len(val)), attribution=self.attribution, attributor_lm=guard(self.attributor_lm),
            attribution_config=self.attribution_config, valset=val, num_candidates=self.settings.num_candidates,
            evidence_cases=self.settings.evidence_cases, system=system,
            predictors=[name for name, _ in memory.named_predictors()], local_check=self.settings.local_check,
            max_demos=self.settings.max_demos, demo_chars=self.settings.demo_chars,
            demo_budget_chars=self.settings.demo_budget_chars, compact_demos=self.settings.compact_demos,
        )
        order = list(train)
        random.Random(self.settings.seed).shuffle(order)
        ctx.demo_pool = order[:self.settings.demo_pool]
        baseline = ledger.get("baseline")
        if baseline is None:
            result = evaluator.evaluate(memory, val)
            baseline = {"val_accuracy": result.accuracy}
            ledger.put("baseline", baseline)
            ledger.put("val_ops", predictor_ops(result))  # what a validation costs, per predictor changed
            ledger.put("lm_calls_total", prior_calls + budget.spent())
        log.info("baseline valset accuracy %.3f (%s)", baseline["val_accuracy"], study_name)
        ctx.val_ops = dict(ledger.get("val_ops") or {})
        least = min((n for n in map(ctx.validation_calls, ctx.predictors) if n > 0), default=0)
        evaluator.task_lm = guard(task_lm)
        program, current_val = memory, float(baseline["val_accuracy"])
        rounds: list[RoundRecord] = []
        history: list[RoundOutcome] = []
        verdicts: list[dict[str, Any]] = []
        stop_reason, plateau = "max_rounds", 0
        interrupted: dict[str, Any] | None = None
        for number in range(1, self.settings.max_rounds + 1):
            done = ledger.get(f"round_done:{number}")
            if done is not None:
                record = RoundRecord.from_dict(done)
                if record.accepted and record.chosen_predictor and record.accepted_instruction is not None:
                    program = with_instruction(program, record.chosen_predictor, record.accepted_instruction,
                                               record.accepted_demos)
                    current_val = record.val_accuracy
                plan = ledger.get(f"round:{number}") or {}
                verdicts.extend(plan.get("verdicts") or [])
                budget_hit = False
            else:
                if budget.exhausted():
                    stop_reason = "time" if budget.out_of_time() else "budget"
                    break
                left = budget.left()
                if left is not None and left < least:  # not one candidate could be validated: keep the calls
                    log.info("round %d not started: %d LM calls left, a validation takes at least %d", number, left,
                             least)
                    stop_reason = "budget"
                    break
                before = program
                try:
                    outcome = run_round(ctx, number, program, current_val, self._minibatch(order, number), history)
                except BudgetExhausted as spent:
                    log.info("round %d stopped: %s", number, spent)
                    ledger.put("lm_calls_total", prior_calls + budget.spent())
                    stop_reason = "time" if budget.out_of_time() else "budget"
                    interrupted = interrupted_round(ledger, number, program, f"cut short: {spent}")
                    break
                record, program, budget_hit = outcome.record, outcome.program, outcome.budget_hit
                if budget_hit and not record.accepted:  # spent among its candidates: cut short, it resumes
                    verdicts.extend(outcome.verdicts)
                    ledger.put("lm_calls_total", prior_calls + budget.spent())
                    stop_reason = "time" if budget.out_of_time() else "budget"
                    why = budget.why_spent() or f"{budget.left()} LM calls left, too few to validate another candidate"
                    interrupted = interrupted_round(ledger, number, program, f"cut short: {why}")
                    break
                record = replace(record, lm_calls_total=prior_calls + budget.spent())
                if record.accepted:
                    changed = changed_prompts(before, program)
                    assert changed == [record.chosen_predictor], f"an accepted step changed {changed}"
                    current_val = record.val_accuracy
                verdicts.extend(outcome.verdicts)
                if not budget_hit:
                    ledger.put(f"round_done:{number}", record.to_dict())
                ledger.put("lm_calls_total", prior_calls + budget.spent())
            rounds.append(record)
            history.append(RoundOutcome(record.chosen_predictor, record.accepted))
            if self.on_round is not None:
                self.on_round(record)
            plateau = 0 if record.accepted else plateau + 1
            if budget_hit or budget.exhausted():
                stop_reason = "time" if budget.out_of_time() else "budget"
                break
            if plateau >= self.settings.patience:
                stop_reason = "plateau"
                break
        optimized: dspy.Module = program
        if isinstance(student, MemoryQA):
            optimized = student.deepcopy()
            optimized.memory = program
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

