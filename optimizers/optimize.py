"""`memtrace optimize`: optimize a memory system's prompts on a train/val split and test it on held-out questions.

`optimize_system(OptimizeRequest)` is what the CLI and the tests call. It writes the run directory:

    config.yaml     system, settings, data slice and splits, models by role, loop settings, study
    optuna.db       the study (the rounds recorded, one trial per candidate; a killed run resumes from it)
    replies.sqlite  every LM reply of the run by what the model was sent: a resumed run pays for none twice
    manifest.json   kind "optimize": baseline {val_accuracy}, rounds [...], optimizer summary, test accuracy
                    before/after, LM usage by role, timings
    verdicts.jsonl  every attribution verdict of every round (with its round)
    program.json    the optimized program (DSPy state: `Mem0Memory().load(path)` or `load_optimized(path)`)
    mem0_config.json  (`mem0ai` only) the Mem0 configuration its prompts amount to, for a user to merge into theirs
    cases.jsonl     the optimized program's test answers (baseline answer and correctness in `extra`)
    graphs/*.json   the evolution graphs of the optimized program's test runs
    report.html     the page of `memtrace report` (the rounds, and the failed test questions)
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from memtrace_opt import progress
from memtrace_opt.data import Dataset, load_data
from memtrace_opt.errors import ConfigError, Interrupted, MemtraceError
from memtrace_opt.estimate import job_rates, learn_replies
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.optimizers.core.program_io import instructions_of, save_program, write_deployment_files
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.examples import case_refs, evaluation_steps, make_examples
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.evaluation.splits import SplitRequest, Splits, make_splits
from memtrace_opt.optimizers.loop.records import RoundRecord, redact_storage
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.optimizers.loop.study import default_storage
from memtrace_opt.optimizers.loop.teleprompter import MemTraceOptimizer
from memtrace_opt.programs import make_program
from memtrace_opt.rundir import CaseRecord, RunDir, add_usage, versions

__all__ = ["PRESETS", "OptimizeRequest", "OptimizeSummary", "optimize_system", "apply_preset"]

log = logging.getLogger(__name__)

REPLIES = "replies.sqlite"  # the run's reply cache, in its directory

# `quick`: one short conversation slice and a couple of rounds, sized for the embedded model on 2 cores.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "data": "sample",
        "split": "0.4,0.3,0.3",
        "attribution": "lineage",
        "settings": {"rounds": 2, "patience": 2, "candidates": 2, "minibatch": 4, "budget": 60,
                     "evidence_cases": 2, "time_budget": 540},
    },
}


@dataclass(frozen=True)
class OptimizeRequest(SplitRequest):
    """Everything one `memtrace optimize` needs (see `SplitRequest` for the data and the splits)."""

    program_settings: dict[str, Any] = field(default_factory=dict)
    program_path: Path | None = None
    settings: LoopSettings = field(default_factory=LoopSettings)
    attribution: str = "graphtrace"
    judge: bool = False
    storage: str | None = None
    seed: int = 0
    preset: str | None = None


@dataclass(frozen=True)
class OptimizeSummary:
    run_dir: Path
    baseline_val: float
    best_val: float
    test_baseline: float | None
    test_optimized: float | None
    rounds: int
    stop_reason: str
    lm_calls: int
    seconds: float


def apply_preset(request: OptimizeRequest, explicit: set[str]) -> OptimizeRequest:
    """`request` with the preset's values for every field the user did not set (`explicit` names them)."""
    if request.preset is None:
        return request
    preset = PRESETS.get(request.preset)
    if preset is None:
        raise ConfigError(f"unknown preset {request.preset!r}; presets: {', '.join(PRESETS)}")
    changes: dict[str, Any] = {k: v for k, v in preset.items() if k != "settings" and k not in explicit}
    if "settings" not in explicit:
        changes["settings"] = request.settings.with_values(preset["settings"])
    return replace(request, **changes)


def _record_case(run: RunDir, system: str, dataset: str, optimized: EvalResult, baseline: EvalResult) -> None:
    before = baseline.by_id()
    for case in optimized.cases:
        prior = before.get(case.case_id)
        run.append_case(CaseRecord(
            case_id=f"{system}:{case.case_id}",
            system=system,
            dataset=dataset,
            sample_id=case.conversation_key.split("@", 1)[0],
            question_id=case.case_id,
            question=case.question.question,
            gold=case.question.answer,
            prediction=case.prediction,
            category=case.question.category,
            evidence=list(case.question.evidence),
            abstention=case.question.abstention,
            scores=dict(case.score.scores),
            correct=case.correct,
            graph=str(run.graph_path(case.conversation_key.split("@", 1)[0]).relative_to(run.root)),
            error=case.error,
            extra={"split": "test", "baseline_prediction": prior.prediction if prior else None,
                   "baseline_correct": prior.correct if prior else None},
        ))


def optimize_system(
    request: OptimizeRequest,
    *,
    models: Models | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
    optimizer_options: dict[str, Any] | None = None,
    estimate: bool | None = None,
) -> OptimizeSummary:
    """Optimize, save and test (see the module docstring). Resumes a killed run found in `request.out`.
    Phases go to the current progress reporter; `estimate` (default: when one is installed) tells what the run
    will do and how long it should take first, and keeps the estimate in the manifest.

    Holds the run directory's lock throughout (RunLocked for a second writer). Each finished round writes the
    manifest with `status: "running"` and the LM usage so far, so a resumed run's usage counts every process;
    a Ctrl-C writes it with `status: "interrupted"` and raises Interrupted. Trials a killed process left
    RUNNING in the run's own study file are marked FAIL first.
    """
    # validate first, create after: a usage error (a model that cannot answer, a conversation named by two splits)
    # leaves no run directory behind; the models first, as compare does, so that the splits' note is not said
    # before an error line
    if models is None:
        from memtrace_opt.lm.roles import check_roles

        check_roles(request.roles, _roles_needed(request))
    data = _DataSplits.of(request)
    run = RunDir(request.out)
    with run.lock("optimize"):
        started = time.time()
        prior = run.read_manifest()
        if models is None:
            models = Models.from_roles(request.roles)
        progress.watch(models.usage)
        if request.storage is None and (run.root / "optuna.db").exists():
            _fail_orphan_trials(default_storage(run.root))
        metered = models

        def checkpoint(status: str) -> None:
            run.write_manifest({"kind": "optimize", "status": status, "versions": versions(),
                                "started_at": prior.get("started_at")
                                or datetime.fromtimestamp(started, timezone.utc).isoformat(),
                                "usage": add_usage(prior.get("usage") or {}, metered.usage.to_dict())})

        def round_done(record: RoundRecord) -> None:
            checkpoint("running")
            if on_round is not None:
                on_round(record)

        try:
            return _optimize(request, run, data, prior.get("usage") or {}, models=models, on_round=round_done,
                             optimizer_options=optimizer_options,
                             estimate=progress.active() if estimate is None else estimate)
        except KeyboardInterrupt:
            checkpoint("interrupted")
            raise Interrupted(f"{run.root}: stopped; the study keeps every finished candidate (run the same "
                              "command again to resume)") from None
        finally:
            learn_replies(models)  # how long the model's replies were: later estimates price them so


class _DataSplits(NamedTuple):
    """The request's data slice and its splits (a ConfigError when the split flags contradict each other)."""

    dataset: Dataset
    splits: Splits

    @classmethod
    def of(cls, request: OptimizeRequest) -> _DataSplits:
        dataset = load_data(request.data, request.data_slice)
        return cls(dataset, make_splits(dataset, train=request.train, val=request.val, test=request.test,
                                        split=request.split, per_split=request.per_split, seed=request.seed))


def _roles_needed(request: OptimizeRequest) -> tuple[str, ...]:
    roles = ["task", "reflection", "attributor"]  # a role sharing the task's model costs no extra check
    if request.judge:
        roles.append("judge")
    return tuple(roles)


def _fail_orphan_trials(storage_url: str) -> None:
    """Mark FAIL every trial left RUNNING in a study file only this (locked) run directory writes."""
    import optuna
    from optuna.trial import TrialState

    storage = optuna.storages.RDBStorage(storage_url)
    for study in storage.get_all_studies():
        for trial in storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            log.info("%s: trial %d of a killed run marked FAIL", study.study_name, trial.number)


def _optimize(
    request: OptimizeRequest,
    run: RunDir,
    data: _DataSplits,
    prior_usage: dict[str, Any],
    *,
    models: Models,
    on_round: Callable[[RoundRecord], None] | None,
    optimizer_options: dict[str, Any] | None,
    estimate: bool = False,
) -> OptimizeSummary:
    started = time.time()
    if run.cases_path.exists():
        raise MemtraceError(f"{run.root} already holds a finished optimization (cases.jsonl); choose another --out")
    run.create()
    dataset, splits = data
    student = make_program(request.system, request.program_settings)
    if request.program_path is not None:
        from memtrace_opt.runner import load_program_state

        load_program_state(student, request.program_path)
    storage = request.storage or default_storage(run.root)
    _write_config(run, request, student, dataset, splits, storage)
    estimated = _estimate(request, student, models, splits) if estimate else None
    # every role's replies in the run directory: a resumed run pays for no request twice
    models.use_replies(ReplyCache(run.root / REPLIES))
    rates, _ = job_rates(models, measure=False)
    # a storage given (`--storage`) may be shared by other workers: they split each round's work (`loop/crew.py`)
    optimizer = MemTraceOptimizer.from_models(
        models, judge=request.judge, settings=request.settings, attribution=request.attribution,
        storage=storage, on_round=on_round, shared=request.storage is not None, rates=rates,
        replies=models.reply_cache, **(optimizer_options or {}),
    )
    optimized = optimizer.compile(student, trainset=make_examples(splits.train), valset=make_examples(splits.val))
    result = optimizer.result
    assert result is not None
    save_program(optimized, run.program_path, extra={"study": result.study_name})
    write_deployment_files(optimized, run.root)
    with run.verdicts_path.open("w", encoding="utf-8") as handle:
        for verdict in result.verdicts:
            handle.write(json.dumps(verdict, sort_keys=True, ensure_ascii=False) + "\n")
    test = _test(run, request, optimizer, models, dataset.name, splits, student, optimized)
    test.update(_blame_held_out(run, request.attribution))
    seconds = time.time() - started
    run.write_manifest({
        "kind": "optimize",
        "status": "complete",
        "versions": versions(),
        "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(),
        "ended_at": datetime.now(timezone.utc).isoformat(),
        "seconds": round(seconds, 2),
        **({"estimate": estimated} if estimated is not None else {}),
        "usage": add_usage(prior_usage, models.usage.to_dict()),
        **result.manifest_part(),
        "test": test,
        "splits": splits.to_dict(),
        "gold": _gold_by_split(dataset, splits),
        "instructions": {"before": instructions_of(student), "after": instructions_of(optimized)},
    })
    try:
        from memtrace_opt.report import write_report

        write_report(run.root)
    except Exception:  # noqa: BLE001 - the page is a convenience; the run's artifacts are already written
        log.warning("could not write %s", run.report_path, exc_info=True)
    return OptimizeSummary(
        run_dir=run.root, baseline_val=result.baseline_val, best_val=result.best_val,
        test_baseline=test["baseline_accuracy"], test_optimized=test["optimized_accuracy"], rounds=len(result.rounds),
        stop_reason=result.stop_reason, lm_calls=result.lm_calls, seconds=seconds,
    )


def _gold_by_split(dataset: Any, splits: Splits) -> dict[str, Any] | None:
    """The manifest's `gold`: the gold answers read and, per split, how many questions each revision rule changed
    (None when the gold was not revised)."""
    if dataset.gold_revision is None:
        return None
    return dataset.gold_revision.by_split({name: [q.question_id for c in getattr(splits, name) for q in c.questions]
                                           for name in ("train", "val", "test")})


def _write_config(run: RunDir, request: OptimizeRequest, student: Any, dataset: Any, splits: Splits,
                  storage: str) -> None:
    """config.yaml: what the run was asked (the loop's settings by their knob names), no secrets."""
    run.write_config({
        "kind": "optimize",
        "system": request.system,
        "program": student.config.to_dict(),
        "program_path": str(request.program_path) if request.program_path else None,
        "dataset": dataset.name,
        "data": {"spec": request.data, "path": str(dataset.path), "slice": request.data_slice.to_dict(),
                 "gold": dataset.gold_summary()},
        "splits": splits.to_dict(),
        "models": request.roles.to_dict(),
        "optimizer": {"settings": request.settings.to_dict(), "attribution": request.attribution,
                      "metric": AnswerMetric(judge=request.judge).name, "storage": redact_storage(storage),
                      "preset": request.preset},
        "seed": request.seed,
    })


def _blame_held_out(run: RunDir, method: str) -> dict[str, Any]:
    """The held-out failures of the optimized program attributed with the run's method where it needs no LM (the
    verdicts appended to verdicts.jsonl, as `memtrace attribute` does): the manifest's `test.blame`, {method,
    ops: {op or error: n}, error_types: {type: n}}. An LM method is left to `memtrace attribute` (minutes per case
    on a small model); {} then, or when attribution fails (the run's artifacts are written already)."""
    from memtrace_opt.attribution.protocol import LM_FREE_METHODS
    from memtrace_opt.attribution.runs import attribute_run

    if method not in LM_FREE_METHODS:
        return {}
    try:
        verdicts = attribute_run(run.root, method).verdicts
    except Exception:  # noqa: BLE001 - the blame is a convenience; the test's cases are recorded already
        log.warning("could not attribute the held-out failures of %s", run.root, exc_info=True)
        return {}
    ops = Counter(v.op or ("error" if v.error else v.error_type or "none") for v in verdicts)
    types = Counter(v.error_type for v in verdicts if v.error_type)
    return {"blame": {"method": method, "ops": dict(ops.most_common()), "error_types": dict(types.most_common())}}


def _test(run: RunDir, request: OptimizeRequest, optimizer: MemTraceOptimizer, models: Models, dataset: str,
          splits: Splits, student: Any, optimized: Any) -> dict[str, Any]:
    """The held-out test of the student and the optimized program: cases.jsonl and graphs/ of the optimized
    program's runs; the manifest's `test` part."""
    from memtrace_opt.tracing import save_graph

    test_cases = case_refs(make_examples(splits.test))
    out: dict[str, Any] = {"baseline_accuracy": None, "optimized_accuracy": None, "questions": len(test_cases),
                           "label": splits.test_label}
    if not test_cases:
        run.cases_path.touch()
        return out
    progress.stage(splits.test_label, total=2 * evaluation_steps(test_cases))
    evaluator = CachedEvaluator(optimizer.metric, memo=optimizer.memo, task_lm=models.task,
                                meta={"system": request.system, "dataset": dataset, "models": models.names()},
                                threads=request.settings.threads)
    before = evaluator.evaluate(student, test_cases)
    after = evaluator.evaluate(optimized, test_cases)
    for key, traced in after.traces.items():
        save_graph(traced.graph(), run.graph_path(key.split("@", 1)[0]))
    _record_case(run, request.system, dataset, after, before)
    return {**out, "baseline_accuracy": before.accuracy, "optimized_accuracy": after.accuracy}


def _estimate(request: OptimizeRequest, student: Any, models: Models, splits: Splits) -> dict[str, Any]:
    """Say what the optimization will do and how long it should take; the manifest's `estimate`."""
    from memtrace_opt.estimate import plural
    from memtrace_opt.optimizers.comparison.estimate import announce_estimate, optimize_estimate

    settings, sizes = request.settings, splits.sizes()
    conversations = {c.sample_id for c in [*splits.train, *splits.val, *splits.test]}
    budgets = [f"budget {settings.budget} LM calls" if settings.budget is not None else "",
               f"{settings.time_budget:g} s" if settings.time_budget is not None else ""]
    plan = (f"optimize {request.system} on {request.data}: train {sizes['train']} / val {sizes['val']} / test "
            f"{sizes['test']} questions in {plural(len(conversations), 'conversation')}; up to "
            f"{plural(settings.rounds, 'round')} of {plural(settings.proposal.candidates, 'candidate')}"
            + "".join(f", {b}" for b in budgets if b))
    cap = request.roles.spec("task").max_tokens
    return announce_estimate(plan, student, splits, models, judge=request.judge, reply_cap=cap, estimate=lambda work, rates:
                             optimize_estimate(work, splits, settings, rates, judge=request.judge,
                                               attribution=request.attribution, reply_cap=cap))
