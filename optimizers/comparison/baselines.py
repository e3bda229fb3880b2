"""DSPy's own optimizers on the same program, metric, data and LM-call budget as ours.

    run = run_baseline("gepa", memory_program, trainset, valset, models=models, budget=200)
    run.program        # the optimized MemoryProgram
    run.lm_calls, run.stopped_by_budget

The program DSPy optimizes is a `MemoryQA` (`program(**example.inputs()) -> Prediction(answer)`), whose
memorized states and replay memo live in a shared `QAContext`, so an answer-prompt candidate never
re-memorizes. Each optimizer's own budget knobs are sized from the LM-call budget; the context's `LMBudget`
(task + reflection calls, plus attributor calls for the ablation) is the hard stop: `BudgetExhausted` ends the optimizer where it stands, and the
adapter returns the best program it had scored on the whole valset (the score book), else the student.

Names: gepa, mipro (MIPROv2, instructions only: no demos, whose long memory contexts would not fit a small
model), copro, simba (rules only), bootstrap (BootstrapFewShot, one bootstrapped demo per predictor), and the
ablation gepa_attributed: GEPA whose component selector is our attributor (it rewrites the predictor blamed
for the minibatch's failures instead of going round robin).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.optimizers.core.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric, dspy_metric
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, QAContext, unwrap_memory
from memtrace_opt.optimizers.evaluation.scorebook import ScoreBook
from memtrace_opt.programs.base import MemoryProgram

__all__ = ["BASELINES", "BaselineRun", "run_baseline"]

log = logging.getLogger(__name__)

BASELINE_ROLES = ("task", "reflection")


@dataclass
class BaselineRun:
    name: str
    program: MemoryProgram
    lm_calls: int
    tokens: int
    seconds: float
    stopped_by_budget: bool = False
    error: str | None = None
    calls_to_best: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # what the optimizer tried, where it says (optuna_blind)


@dataclass
class _Setup:
    student: MemoryQA
    trainset: list[dspy.Example]
    valset: list[dspy.Example]
    metric: Callable[..., Any]
    feedback_metric: Callable[..., Any]
    models: Any
    budget: int
    seed: int
    context: QAContext
    answer_metric: AnswerMetric | None = None  # the comparison's metric itself (a search scoring programs directly)
    details: dict[str, Any] = field(default_factory=dict)  # filled by an optimizer that says what it tried


def _gepa(setup: _Setup, selector: Any = "round_robin") -> dspy.Module:
    optimizer = dspy.GEPA(
        metric=setup.feedback_metric,
        max_metric_calls=max(len(setup.valset) + 1, setup.budget),
        reflection_lm=setup.models.reflection,
        reflection_minibatch_size=min(3, len(setup.trainset)),
        component_selector=selector,
        use_merge=False,
        num_threads=1,
        seed=setup.seed,
    )
    return optimizer.compile(setup.student, trainset=setup.trainset, valset=setup.valset)


def _gepa_attributed(setup: _Setup) -> dspy.Module:
    from memtrace_opt.optimizers.comparison.gepa_selector import AttributedComponentSelector

    selector = AttributedComponentSelector(setup.student.memory, setup.context.memo, models=setup.models)
    return _gepa(setup, selector)


class _MIPROv2(dspy.MIPROv2):
    """DSPy's MIPROv2, except that a full evaluation with no combination left to evaluate is skipped. On minibatches
    it fully evaluates, every few trials and at the end, the best combination it has not fully evaluated yet; DSPy
    3.4 raises ValueError when every combination it has tried is fully evaluated already (a program of one predictor
    has as many combinations as instruction candidates), which ended the row with nothing."""

    def _perform_full_evaluation(self, trial_num: int, adjusted_num_trials: int, param_score_dict: dict,
                                 fully_evaled_param_combos: dict, *rest: Any) -> Any:
        if all(key in fully_evaled_param_combos for key in param_score_dict):
            total_eval_calls, best_score, best_program = rest[3], rest[5], rest[6]
            return best_score, best_program, total_eval_calls
        return super()._perform_full_evaluation(trial_num, adjusted_num_trials, param_score_dict,
                                                fully_evaled_param_combos, *rest)


def _mipro(setup: _Setup) -> dspy.Module:
    minibatch = min(len(setup.valset), 8)
    candidates = 3
    trials = max(2, (setup.budget - 2 * candidates) // max(1, minibatch))
    optimizer = _MIPROv2(
        metric=setup.metric, prompt_model=setup.models.reflection, task_model=setup.models.task, auto=None,
        num_candidates=candidates, max_bootstrapped_demos=0, max_labeled_demos=0, num_threads=1,
        seed=setup.seed, verbose=False, track_stats=False,
    )
    return optimizer.compile(
        setup.student, trainset=setup.trainset, valset=setup.valset, num_trials=trials,
        minibatch=len(setup.valset) > minibatch, minibatch_size=minibatch, minibatch_full_eval_steps=5,
        program_aware_proposer=False, data_aware_proposer=True,
    )


def _copro(setup: _Setup) -> dspy.Module:
    predictors = max(1, len(setup.student.predictors()))
    per_round = predictors * max(1, len(setup.trainset))
    breadth = max(2, min(4, setup.budget // max(1, 2 * per_round)))
    depth = max(1, min(3, setup.budget // max(1, breadth * per_round)))
    optimizer = dspy.COPRO(prompt_model=setup.models.reflection, metric=setup.metric, breadth=breadth, depth=depth,
                           init_temperature=1.0)
    return optimizer.compile(setup.student, trainset=setup.trainset,
                             eval_kwargs={"num_threads": 1, "display_progress": False})


def _simba(setup: _Setup) -> dspy.Module:
    bsize = max(1, min(4, len(setup.trainset)))
    candidates = 2
    steps = max(1, setup.budget // (bsize * (candidates + 2)))
    optimizer = dspy.SIMBA(metric=setup.metric, bsize=bsize, num_candidates=candidates, max_steps=min(steps, 8),
                           max_demos=0, prompt_model=setup.models.reflection, num_threads=1)
    return optimizer.compile(setup.student, trainset=setup.trainset, seed=setup.seed)


def _optuna_blind(setup: _Setup) -> dspy.Module:
    from memtrace_opt.optimizers.comparison.optuna_blind import blind_search

    return blind_search(setup.student.memory, setup.trainset, setup.valset, task_lm=setup.models.task,
                        memo=setup.context.memo, metric=setup.answer_metric or AnswerMetric(), seed=setup.seed,
                        details=setup.details)


def _bootstrap(setup: _Setup) -> dspy.Module:
    optimizer = dspy.BootstrapFewShot(metric=setup.metric, max_bootstrapped_demos=1, max_labeled_demos=0,
                                      max_rounds=1)
    return optimizer.compile(setup.student, trainset=setup.trainset)


class _GuardedModels:
    """Every role but the judge's guarded by the budget (the judge is the metric's, outside the budget)."""

    def __init__(self, models: Any, budget: LMBudget) -> None:
        self.task = guard_lm(models.task, budget)
        self.reflection = guard_lm(models.reflection, budget)
        self.attributor = guard_lm(models.attributor, budget)
        self.judge = models.judge
        self.usage = models.usage


BASELINES: dict[str, Callable[[_Setup], dspy.Module]] = {
    "gepa": _gepa,
    "mipro": _mipro,
    "copro": _copro,
    "simba": _simba,
    "bootstrap": _bootstrap,
    "gepa_attributed": _gepa_attributed,
    "optuna_blind": _optuna_blind,
}


def run_baseline(
    name: str,
    program: dspy.Module,
    trainset: Sequence[dspy.Example],
    valset: Sequence[dspy.Example],
    *,
    models: Any,
    budget: int,
    metric: AnswerMetric | None = None,
    context: QAContext | None = None,
    seed: int = 0,
    time_budget: float | None = None,
) -> BaselineRun:
    """Run DSPy optimizer `name` on `program` (a MemoryProgram or MemoryQA) within `budget` LM calls (and
    `time_budget` of wall time, if given: no LM call is made after it).

    `context` (optional) is a warmed-up QAContext to start from (forked: memorized states and memo are
    copied, so optimizers compared from one context do not feed each other)."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    metric = metric or AnswerMetric()
    roles = (*BASELINE_ROLES, "attributor") if name == "gepa_attributed" else BASELINE_ROLES
    limit = LMBudget(models.usage, budget, roles).run_for(time_budget)
    book = ScoreBook(clock=limit.spent)
    context = context.fork(budget=limit, book=book) if context is not None else QAContext(budget=limit, book=book)
    memory = unwrap_memory(program)
    student = MemoryQA(memory.deepcopy(), context)
    guarded = _GuardedModels(models, limit)
    setup = _Setup(
        student=student, trainset=list(trainset), valset=list(valset), metric=book.wrap(dspy_metric(metric)),
        feedback_metric=book.wrap(dspy_metric(metric, feedback=True)), models=guarded, budget=budget, seed=seed,
        context=context, answer_metric=metric,
    )
    started = time.perf_counter()
    stopped, error = False, None
    result: dspy.Module = student
    with dspy.context(lm=guarded.task):
        try:
            result = BASELINES[name](setup)
        except BudgetExhausted:
            stopped = True
            log.info("%s: budget of %d LM calls%s spent; taking its best evaluated program", name, budget,
                     "" if time_budget is None else f" or {time_budget:.0f} s")
            best = book.best([c.case_id for c in case_refs(valset)])
            result = best[0] if best is not None else student
        except Exception as exc:  # noqa: BLE001 - one optimizer's crash is a row in the table, not the end
            log.exception("%s failed", name)
            error = f"{type(exc).__name__}: {exc}"
    stopped = stopped or (error is None and limit.exhausted())  # an optimizer that caught the stop itself
    optimized = unwrap_memory(result) if isinstance(result, (MemoryQA, MemoryProgram)) else memory
    return BaselineRun(
        name=name, program=optimized, lm_calls=limit.spent(), tokens=limit.tokens(),
        seconds=time.perf_counter() - started, stopped_by_budget=stopped, error=error,
        calls_to_best=book.calls_to_reach(optimized), details=setup.details,
    )

