"""`optuna_blind`: an Optuna search over every tunable setting the program declares (`programs/tunable.py`), with no
attribution: what a settings search is worth without knowing which op to tune, beside our loop's.

A TPE sampler (seeded) proposes a value for every declared setting; a proposal over the cost limit (more than
`cost_limit` times the seed's LM calls per conversation or prompt words per answer, by a dry run) is told the
worst score and never run; the others are scored on the training questions (cached replay, the token rule or the
judge as the comparison scores), and a proposal that beats the best so far on them is validated: it is taken when
the valset's acceptance rule says it improves on the program taken so far. The search stops at the budget (or the
clock), with the program taken so far. Each trial is logged, and kept in `details` when given (compare.json's
row `details`: what the search tried and how each did).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import dspy

from memtrace_opt.optimizers.core.budget import BudgetExhausted
from memtrace_opt.optimizers.core.program_io import with_settings
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.programs.tunable import tunables

__all__ = ["MAX_TRIALS", "blind_search"]

log = logging.getLogger(__name__)

MAX_TRIALS = 64  # proposals at most, scored or refused for their cost: the budget usually stops it first


def blind_search(memory: dspy.Module, trainset: list[Any], valset: list[Any], *, task_lm: Any, memo: Any,
                 metric: AnswerMetric, seed: int = 0, cost_limit: float = 1.5, acceptance: Any = None,
                 details: dict[str, Any] | None = None) -> dspy.Module:
    """The best settings of `memory` the search found within the budget its guarded `task_lm` carries (module
    doc); `memory` itself when none beat it on the valset. `details` (given): filled with the seed's scores
    (`seed`: train, valset) and one entry a trial (`trials`: its settings, then its train score or why it was
    refused, its valset score where validated and whether it was taken; a trial the budget cut has neither)."""
    import optuna

    from memtrace_opt.optimizers.gates.acceptance import AcceptanceSettings
    from memtrace_opt.optimizers.gates.settings import program_cost

    declared = tunables(memory.config)
    if not declared:
        return memory
    evaluator = CachedEvaluator(metric, memo=memo, task_lm=task_lm)
    train, val = case_refs(trainset), case_refs(valset)
    rule = acceptance if acceptance is not None else AcceptanceSettings().rule(len(val))
    seed_cost = program_cost(memory, train)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    distributions = {t.name: t.distribution() for t in declared}
    taken, taken_val, best_train = memory, None, -1.0
    kept = details if details is not None else {}
    tried: list[dict[str, Any]] = kept.setdefault("trials", [])
    try:
        taken_val = evaluator.evaluate(memory, val).accuracy
        best_train = evaluator.evaluate(memory, train).accuracy
        kept["seed"] = {"train": round(best_train, 4), "valset": round(taken_val, 4)}
        for _ in range(MAX_TRIALS):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                trial = study.ask(distributions)
            program = with_settings(memory, trial.params)
            cost = program_cost(program, train)
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in trial.params.items()}
            entry: dict[str, Any] = {"trial": trial.number, "settings": shown}
            tried.append(entry)
            if cost.over(seed_cost, cost_limit):
                entry["refused"] = (f"{cost.calls_per_conversation:.1f} LM calls a conversation, "
                                    f"{cost.prompt_words_per_answer:.0f} prompt words an answer (the seed "
                                    f"{seed_cost.calls_per_conversation:.1f}, {seed_cost.prompt_words_per_answer:.0f})")
                study.tell(trial, -1.0)
                log.info("optuna_blind: trial %d %s refused: over %.1fx the seed's cost (%s)", trial.number, shown,
                         cost_limit, entry["refused"])
                continue
            accuracy = evaluator.evaluate(program, train).accuracy
            entry["train"] = round(accuracy, 4)
            study.tell(trial, accuracy)
            log.info("optuna_blind: trial %d %s: train %.3f (the best so far, the seed's first: %.3f)", trial.number,
                     shown, accuracy, best_train)
            if accuracy <= best_train:
                continue
            best_train = accuracy
            val_accuracy = evaluator.evaluate(program, val).accuracy
            taken_now = rule.on_valset(taken_val, val_accuracy).ok
            entry.update(valset=round(val_accuracy, 4), taken=taken_now)
            log.info("optuna_blind: trial %d valset %.3f against %.3f: %s", trial.number, val_accuracy,
                     taken_val if taken_val is not None else float("nan"), "taken" if taken_now else "not taken")
            if taken_now:
                taken, taken_val = program, val_accuracy
    except BudgetExhausted:
        log.info("optuna_blind: the budget is spent; %d settings tried", len(study.trials))
    return taken

