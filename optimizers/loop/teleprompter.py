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
   completes; a round cut short by the budget is not among the rounds, and resumes with a larger budget; what it
   had found by then is the result's `interrupted`, `interrupted.py`).
Invariant: an accepted step changes the prompt (instruction, or demos) of exactly one predictor (asserted).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from memtrace_opt import progress as progress_report
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.optimizers.core.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.core.program_io import (
    changed_prompts,
    instructions_digest,
    instructions_of,
    settings_of,
    system_name,
)
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.diagnosis import learned_patterns
from memtrace_opt.optimizers.evaluation.examples import CaseRef, case_refs, evaluation_steps
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo, lm_name
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, unwrap_memory
from memtrace_opt.optimizers.evaluation.usage import counting
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Crew, Job, conversation_share, conversations, joined_accuracy
from memtrace_opt.optimizers.loop.interrupted import InterruptedRound, RoundSoFar
from memtrace_opt.optimizers.loop.records import OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.rounds import (
    interrupted_round,
    predictor_ops,
    run_round,
    shared_job,
)
from memtrace_opt.optimizers.loop.routing import FailureRouting
from memtrace_opt.optimizers.loop.runner import LocalRunner
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed, RoundOutcome
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
        lms = {"task": self.task_lm, "reflection": self.reflection_lm, "attributor": self.attributor_lm}
        task_lm = self.task_lm if self.task_lm is not None else dspy.settings.lm
        with counting(lms, self.usage) as usage, dspy.context(lm=task_lm):
            return self._compile(student, case_refs(trainset), case_refs(valset or trainset), usage)

    def _compile(self, student: dspy.Module, train: list[CaseRef], val: list[CaseRef], usage: UsageTracker) -> dspy.Module:
        started = time.perf_counter()
        memory = unwrap_memory(student)
        session = self._open(memory, train, val, usage)
        baseline = self._baseline(session, memory, val)
        progress = _Progress(memory, baseline, current_val=baseline)
        for number in range(1, self.settings.rounds + 1):
            going = (self._shared_round(session, progress, number) if session.crew is not None
                     else self._round(session, progress, number))
            if not going:
                break
        return self._finish(student, session, progress, time.perf_counter() - started)

    def _round(self, session: _Session, progress: _Progress, number: int) -> bool:
        """Round `number` as an earlier run finished it, or run now; False when the run stops (before or after it)."""
        record = self._resumed_round(session, progress, number)
        if record is None:
            record = self._new_round(session, progress, number)
            if record is None:  # not started, or cut short: the run stops here
                return False
        return self._after(session, progress, record)

    def _after(self, session: _Session, progress: _Progress, record: RoundRecord) -> bool:
        """`record` in the progress and the stop policy; False when the run stops after it."""
        progress.rounds.append(record)
        progress.history.append(RoundOutcome(record.chosen_predictor, record.accepted))
        progress_report.stage(None)  # the round's last step ends with it
        if self.on_round is not None:
            self.on_round(record)
        progress.reason = session.stop.after(record, session.budget, progress.cut)
        return progress.reason is None

    def _shared_round(self, session: _Session, progress: _Progress, number: int) -> bool:
        """Round `number` with the other workers sharing the study (`crew.py`): the worker that leads it plans,
        decides and records it (`round_done:N`, then `next:N`, whether the run goes on); the others run its jobs
        until it is decided and then apply the same outcome. A leader that dies is replaced; the round resumes
        from the study. A decision to stop binds the workers running when it was taken."""
        crew, ledger, phase = session.crew, session.ledger, f"round-{number}"
        assert crew is not None

        def told(name: str) -> dict[str, Any] | None:  # a leader's word, if given while this worker ran
            word = ledger.get(name)
            return word if word is not None and float(word.get("at", 0)) >= session.joined else None

        def decided() -> bool:
            return ledger.get(f"round_done:{number}") is not None and told(f"next:{number}") is not None \
                or told(f"stopped:{number}") is not None

        while True:
            # recorded, and its leader is done with it (it writes `next:N` before it lets go): apply it
            if ledger.get(f"round_done:{number}") is not None and (decided() or not crew.leading(phase)):
                record = self._resumed_round(session, progress, number)
                assert record is not None
                going = self._after(session, progress, record)
                word = told(f"next:{number}")
                if word is not None:  # the leader's budget and clock decide for every worker
                    progress.reason = StopReason(word["reason"]) if word["reason"] else None
                    going = progress.reason is None
                return going
            stopped = told(f"stopped:{number}")
            if stopped is not None:
                progress.reason = StopReason(stopped["reason"])
                cut = stopped.get("interrupted")
                progress.interrupted = InterruptedRound.from_dict(cut) if cut else None
                return False
            with crew.lead(phase) as lead:
                if lead is not None:
                    going = self._lead_round(session, progress, number)
                    if ledger.get(f"round_done:{number}") is None:
                        lead.undecided()  # stopped before deciding it: a later run leads it again
                    return going
            self._follow_round(session, progress, number, decided)

    def _follow_round(self, session: _Session, progress: _Progress, number: int, decided: Callable[[], bool]) -> None:
        """Runs round `number`'s shared jobs until `decided()`, or until no live worker leads the round."""
        assert session.crew is not None
        parent = instructions_digest(instructions_of(progress.program))
        minibatch = self._minibatch(session.order, number)
        built: list[Any] = []  # the round's gate chain, once its plan is recorded

        def execute(attrs: Any) -> dict[str, Any]:
            return shared_job(session.ctx, number, progress.program, progress.current_val, minibatch, attrs, built)

        session.crew.follow(f"round-{number}", decided,
                            lambda attrs: attrs.get("round") == number and attrs.get("parent") == parent, execute)

    def _lead_round(self, session: _Session, progress: _Progress, number: int) -> bool:
        """Round `number` run by the worker that leads it: its outcome and the stop decision go to the study."""
        ledger = session.ledger
        record = self._new_round(session, progress, number)
        if record is None:
            reason = (progress.reason or StopReason.MAX_ROUNDS).value
            cut = progress.interrupted.to_dict() if progress.interrupted is not None else None
            ledger.put(f"stopped:{number}", {"reason": reason, "interrupted": cut, "at": time.time()})
            return False
        going = self._after(session, progress, record)
        ledger.put(f"next:{number}", {"reason": progress.reason.value if progress.reason else "", "at": time.time()})
        return going

    def _open(self, memory: Any, train: Sequence[CaseRef], val: Sequence[CaseRef], usage: UsageTracker) -> _Session:
        """The study (resumed if it exists), the budget left in it, and what every round shares."""
        settings = self.settings
        study_name = self.study_name or self._study_name(memory, train, val)
        ledger = StudyLedger.open(storage=self.storage, study_name=study_name, heartbeat=self.heartbeat)
        crew = Crew(ledger.study, self.memo) if self.shared and self.storage is not None else None
        prior_calls = int(ledger.get("lm_calls_total", 0))
        deadline = None if settings.time_budget is None else time.monotonic() + settings.time_budget
        limit = None if settings.budget is None else max(0, settings.budget - prior_calls)
        budget = LMBudget(usage, limit, METERED_ROLES, deadline, crew.others_spent if crew is not None else None)
        if crew is not None:
            crew.spend = budget.own
        system = system_name(memory)
        evaluator = CachedEvaluator(self.metric, memo=self.memo, task_lm=self.task_lm,
                                    meta={"system": system}, threads=settings.threads)
        task_lm = self.task_lm if self.task_lm is not None else dspy.settings.lm

        def guard(lm: Any) -> Any:  # rounds stop exactly at the budget; the baseline always completes
            return guard_lm(lm, budget) if lm is not None and budget.bounded else lm

        order = list(train)
        random.Random(settings.seed).shuffle(order)
        ctx = RoundContext(
            ledger=ledger, evaluator=evaluator, budget=budget, selector=self.selector,
            sources=self._sources(evaluator, guard(self.reflection_lm or task_lm), order, ledger, study_name),
            acceptance=self.acceptance_for(len(val)), attribution=self.attribution, attributor_lm=guard(self.attributor_lm),
            attribution_config=self.attribution_config, valset=val, proposal=settings.proposal, system=system,
            predictors=[name for name, _ in memory.named_predictors()], local_check=settings.local_check,
            routing=self.routing, repairs=settings.repairs, scoped_replay=settings.scoped_replay,
            runner=crew if crew is not None else LocalRunner(), trainset=order,
            local=settings.local if settings.local.local_objective else None,
            search=settings.search if settings.search.settings else None,
        )
        return _Session(study_name, ledger, budget, prior_calls, ctx, order, StopPolicy(settings.patience),
                        guard(task_lm))

    def _baseline(self, session: _Session, memory: Any, val: Sequence[CaseRef]) -> float:
        """The student's valset accuracy (from the study when a run before this one measured it); after it,
        the task LM is guarded by the budget and the stop policy knows the cheapest validation."""
        ledger, ctx, crew = session.ledger, session.ctx, session.crew
        baseline = ledger.get("baseline")
        while baseline is None and crew is not None:  # one worker leads it, every worker runs conversations of it
            with crew.lead("baseline") as lead:
                if lead is not None:
                    baseline = self._measure_baseline(session, memory, val)
                    break
            crew.follow("baseline", lambda: ledger.get("baseline") is not None,
                        lambda attrs: attrs.get("job") == "baseline",
                        lambda attrs: _baseline_share(session.ctx.evaluator, memory, val, attrs["conversation"]))
            baseline = ledger.get("baseline")
        if baseline is None:
            baseline = self._measure_baseline(session, memory, val)
        if crew is not None:
            crew.pull()
        log.info("baseline valset accuracy %.3f (%s)", baseline["val_accuracy"], session.study_name)
        ctx.val_ops = dict(ledger.get("val_ops") or {})
        session.stop.least_validation = min((n for n in map(ctx.validation_calls, ctx.predictors) if n > 0), default=0)
        ctx.evaluator.task_lm = session.guarded_task_lm
        return float(baseline["val_accuracy"])

    def _measure_baseline(self, session: _Session, memory: Any, val: Sequence[CaseRef]) -> dict[str, Any]:
        """The student on the valset: its accuracy, and each predictor's op calls (what a validation costs, per
        predictor changed). Workers sharing the study split it by conversation."""
        progress_report.stage("baseline: valset", total=evaluation_steps(val))
        parts = conversations(val)
        runner = session.ctx.runner
        if runner.shared and len(parts) > 1:
            jobs = [Job(f"baseline@{key}", {"job": "baseline", "conversation": key}) for key in parts]
            shares = list(runner.run(jobs, lambda attrs: _baseline_share(session.ctx.evaluator, memory, val,
                                                                          attrs["conversation"])).values())
            accuracy = joined_accuracy(shares)
            ops: Counter[str] = Counter()
            for share in shares:
                ops.update(share["ops"])
            val_ops = dict(ops)
        else:
            result = session.ctx.evaluator.evaluate(memory, val)
            accuracy, val_ops = result.accuracy, predictor_ops(result)
        baseline = {"val_accuracy": accuracy}
        session.ledger.put("val_ops", val_ops)
        session.ledger.put("baseline", baseline)
        session.checkpoint()
        return baseline

    def _resumed_round(self, session: _Session, progress: _Progress, number: int) -> RoundRecord | None:
        """Round `number` as an earlier run finished it (its outcome applied to the program), or None."""
        done = session.ledger.get(f"round_done:{number}")
        if done is None:
            return None
        record = RoundRecord.from_dict(done)
        taken = record.accepted_candidate
        if record.accepted and taken is not None:
            progress.program, progress.current_val = taken.apply(progress.program), record.val_accuracy
        plan = session.ctx.plan(number)
        progress.verdicts.extend(dict(v) for v in (plan.verdicts if plan is not None else ()))
        progress.cut = False
        return record

    def _new_round(self, session: _Session, progress: _Progress, number: int) -> RoundRecord | None:
        """Round `number` run (or resumed from its plan); None when it does not start or the budget cuts it
        short before it changes the program (`progress` says why, and how far it got)."""
        budget, ledger = session.budget, session.ledger
        progress.reason = session.stop.before(number, budget)
        if progress.reason is not None:
            return None
        before = progress.program
        so_far = RoundSoFar(number, budget.spent())  # what the round learns, kept if the budget cuts it short
        try:
            outcome = run_round(session.ctx, number, before, progress.current_val,
                                self._minibatch(session.order, number), progress.history, so_far)
        except BudgetExhausted as spent:
            log.info("round %d stopped in its %s: %s", number, so_far.phase.value, spent)
            session.checkpoint()
            progress.reason = StopReason.spent(budget)
            progress.interrupted = interrupted_round(ledger, so_far, before, f"cut short: {spent}",
                                                     budget.spent() - so_far.calls_before)
            return None
        record, progress.program, progress.cut = outcome.record, outcome.program, outcome.cut
        progress.verdicts.extend(outcome.verdicts)
        if progress.cut and not record.accepted:  # spent among its candidates: cut short, it resumes
            session.checkpoint()
            progress.reason = StopReason.spent(budget)
            why = budget.why_spent() or f"{budget.left()} LM calls left, too few to validate another candidate"
            progress.interrupted = interrupted_round(ledger, so_far, before, f"cut short: {why}",
                                                     budget.spent() - so_far.calls_before)
            return None
        record = replace(record, lm_calls_total=session.calls_total())
        if record.accepted:
            changed = changed_prompts(before, progress.program)
            taken = record.accepted_candidate
            if taken is not None and taken.sets_settings:  # new settings of the target op, no prompt
                assert changed == [] and settings_of(before) != settings_of(progress.program), f"settings step changed {changed}"
            else:
                assert changed == [record.chosen_predictor], f"an accepted step changed {changed}"
            progress.current_val = record.val_accuracy
        if not progress.cut:
            ledger.put(f"round_done:{number}", record.to_dict())
        session.checkpoint()
        return record

    def _finish(self, student: dspy.Module, session: _Session, progress: _Progress, seconds: float) -> dspy.Module:
        """The optimized program, of the student's kind, and `self.result`."""
        optimized: dspy.Module = progress.program
        if isinstance(student, MemoryQA):
            optimized = student.deepcopy()
            optimized.memory = progress.program
        stop_reason = (progress.reason or StopReason.MAX_ROUNDS).value
        self.result = OptimizationResult(
            program=optimized, baseline_val=progress.baseline, rounds=progress.rounds, stop_reason=stop_reason,
            lm_calls=session.calls_total(), lm_calls_by_role=session.budget.by_role(),
            tokens=session.budget.tokens(), seconds=seconds, study_name=session.study_name, storage=self.storage,
            trials=session.ledger.trials_count(), verdicts=progress.verdicts, interrupted=progress.interrupted,
        )
        log.info("optimization stopped (%s) after %d rounds; valset %.3f -> %.3f; %d LM calls", stop_reason,
                 len(progress.rounds), self.result.baseline_val, self.result.best_val, self.result.lm_calls)
        return optimized


def _baseline_share(evaluator: CachedEvaluator, memory: Any, val: Sequence[CaseRef], conversation: str) -> dict[str, Any]:
    """The student on the valset questions of one conversation (a worker's share of the baseline)."""
    result, share = conversation_share(evaluator, memory, val, conversation)
    return {**share, "ops": predictor_ops(result)}


@dataclass
class _Session:
    """What one `compile` shares across its rounds: the study, the budget left in it, the rounds' context, the
    training order, the stop policy and the budget-guarded task LM."""

    study_name: str
    ledger: StudyLedger
    budget: LMBudget
    prior_calls: int  # spent by the runs before this one on the same study
    ctx: RoundContext
    order: list[CaseRef]
    stop: StopPolicy
    guarded_task_lm: Any
    joined: float = field(default_factory=time.time)  # when this worker joined (a leader's word binds it after)

    @property
    def crew(self) -> Crew | None:
        return self.ctx.crew

    def calls_total(self) -> int:
        return self.prior_calls + self.budget.spent()

    def checkpoint(self) -> None:
        """The calls spent so far, in the study: a resumed run's budget starts from them. A worker sharing the
        study also gives the others its memo and its own spend."""
        self.ledger.put("lm_calls_total", self.calls_total())
        if self.crew is not None:
            self.crew.publish()
            self.crew.report_spend(self.budget.own())


@dataclass
class _Progress:
    """Where the rounds stand: the program and its valset accuracy, the rounds recorded, their verdicts, and
    what stopped the run (None: it ran out of rounds), with the round cut short, if one was."""

    program: dspy.Module
    baseline: float
    current_val: float
    rounds: list[RoundRecord] = field(default_factory=list)
    history: list[RoundOutcome] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    reason: StopReason | None = None
    interrupted: InterruptedRound | None = None
    cut: bool = False  # the last round ran out of calls among its candidates
