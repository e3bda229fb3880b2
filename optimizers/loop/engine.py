"""The engine: the one place that owns how a round is run. It prices each phase before it starts, keeps the
study, runs jobs through the runner it is handed (this process, or workers sharing the study), cuts a round where the
budget or the clock says, and resumes an optimization a run before left; the round's steps (`steps.py`) and the
choice policy (`choice.py`) only compute.

A round, phase by phase (`RoundPhase`; each priced before it starts and measured as it runs, the manifest's
`phases`):

1. plan: the training minibatch traced, its failures attributed, the target chosen (`steps.plan`). The validation
   of a change to the target is priced and reserved: nothing after may spend what it needs.
2. local set: the target's local set, from the write path's traces (`steps.local_set`).
3. repairs: blamed calls repaired by rule, each confirmed on the first rung of the local set's other calls.
4. proposals: the sources that cost no LM call, then the reflection LM's rewrites (and the demo pool), each only
   where the round can afford it with validation reserved.
5. settings: the settings search, in a slice of what the round has left (`SETTINGS_SHARE`), as many trials as
   the slice pays for.
6. candidates and validation: the choice policy (`choice.py`), every piece of work priced before it starts.

A round's share of the calls and seconds left is the rest divided by the rounds that can still run: those the round
limit leaves (`--rounds`), or the plateau's patience less the rounds since the last accepted change, whichever are
fewer (a limit of 30 rounds does not starve the four a plateau allows). A round may go over its share only for its
reserved validation. A round that cannot afford its validation is not started; one the clock or the budget cuts
anyway is recorded as cut (`RoundRecord.cut`) and not among the rounds. Its replies are in the reply cache: a resumed
run goes through it again without a live call where nothing changed.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dspy

from memtrace_opt import progress
from memtrace_opt.attribution import Verdict, attribute_cases
from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.budget import BudgetExhausted, LMBudget
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Status
from memtrace_opt.optimizers.core.program_io import instructions_digest, instructions_of, settings_of
from memtrace_opt.optimizers.core.repair import RepairSet
from memtrace_opt.optimizers.evaluation.blame import Blame, attribute_failures, blame_of, failed_cases
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.evidence import describe
from memtrace_opt.optimizers.evaluation.examples import CaseRef, evaluation_steps
from memtrace_opt.optimizers.evaluation.local_set import LocalSet
from memtrace_opt.optimizers.evaluation.scoped import evidence_scope
from memtrace_opt.optimizers.gates.local_check import LocalCase, local_cases
from memtrace_opt.optimizers.gates.local_objective import DictReplyBook, LocalObjective, ReplyBook
from memtrace_opt.optimizers.gates.settings import SettingsObjective
from memtrace_opt.optimizers.loop import keys, steps
from memtrace_opt.optimizers.loop.allowance import Allowance, Meter, Phases
from memtrace_opt.optimizers.loop.choice import RUNG_CALLS, policy_for
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Crew, Job, conversations, joined_accuracy
from memtrace_opt.optimizers.loop.jobs import RoundJobs
from memtrace_opt.optimizers.loop.phase_prices import PhasePrices
from memtrace_opt.optimizers.loop.pricing import Price, Pricer
from memtrace_opt.optimizers.loop.records import (
    CandidateRecord,
    RoundPhase,
    RoundPlan,
    RoundRecord,
)
from memtrace_opt.optimizers.loop.runner import Runner
from memtrace_opt.optimizers.loop.selection import RoundOutcome
from memtrace_opt.optimizers.loop.stop import StopPolicy, StopReason
from memtrace_opt.optimizers.loop.study import StudyLedger, StudyReplyBook
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.settings_source import SettingsSource
from memtrace_opt.programs.tunable import changed_settings

__all__ = ["SETTINGS_SHARE", "Engine", "LoopState"]

log = logging.getLogger(__name__)

SETTINGS_SHARE = 0.3  # of what a round has left after its validation, the settings search's slice


@dataclass
class LoopState:
    """Where the optimization stands: the program and its valset accuracy, the rounds recorded, their verdicts, and
    what stopped the run (None: it ran out of rounds), with the round cut short, if one was."""

    program: dspy.Module
    baseline: float
    current_val: float
    rounds: list[RoundRecord] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    reason: StopReason | None = None
    interrupted: RoundRecord | None = None

    @property
    def history(self) -> list[RoundOutcome]:
        return [RoundOutcome(r.chosen_predictor, r.accepted) for r in self.rounds]


class Engine:
    """Runs an optimization's rounds (module doc) over `ctx` with `budget`, recording them in `ledger`."""

    def __init__(self, ctx: RoundContext, *, ledger: StudyLedger, budget: LMBudget, stop: StopPolicy, pricer: Pricer,
                 runner: Runner, settings: Any, study_name: str, prior_calls: int, task_lm: Any,
                 on_round: Callable[[RoundRecord], None] | None = None) -> None:
        self.ctx, self.ledger, self.budget, self.stop, self.pricer = ctx, ledger, budget, stop, pricer
        self.runner, self.settings, self.study_name, self.prior_calls = runner, settings, study_name, prior_calls
        self.task_lm, self.on_round = task_lm, on_round
        self.joined = time.time()  # when this worker joined (a leader's word binds it after)
        self.minibatch_runs: dict[int, EvalResult] = {}
        self._partial = RoundRecord(0)  # the round running, as far as it got
        self.prices = PhasePrices(ctx, pricer)

    @property
    def crew(self) -> Crew | None:
        return self.runner if isinstance(self.runner, Crew) else None

    def calls_total(self) -> int:
        return self.prior_calls + self.budget.spent()

    def checkpoint(self) -> None:
        """The calls spent so far, in the study: a resumed run's budget starts from them. A worker sharing the
        study also gives the others its memo and its own spend."""
        self.ledger.put(keys.LM_CALLS_TOTAL, self.calls_total())
        if self.crew is not None:
            self.crew.publish()
            self.crew.report_spend(self.budget.own())

    # the run ------------------------------------------------------------------------------------------------
    def run(self, program: dspy.Module, val: Sequence[CaseRef], order: Sequence[CaseRef]) -> LoopState:
        baseline = self.baseline(program, val)
        state = LoopState(program, baseline, baseline)
        for number in range(1, self.settings.rounds + 1):
            going = self._shared_round(state, number, order) if self.crew is not None else self._round(state, number, order)
            if not going:
                break
        return state

    def baseline(self, program: dspy.Module, val: Sequence[CaseRef]) -> float:
        """The student's valset accuracy (from the study when a run before this one measured it); its traced run
        prices every validation. Workers sharing the study split it by conversation."""
        crew = self.crew
        stored = self.ledger.get(keys.BASELINE)
        while stored is None and crew is not None:  # one worker leads it, every worker runs conversations of it
            with crew.lead("baseline") as lead:
                if lead is not None:
                    stored = self._measure_baseline(program, val)
                    break
            crew.follow("baseline", lambda: self.ledger.get(keys.BASELINE) is not None,
                        lambda attrs: attrs.get("job") == "baseline",
                        lambda attrs: self._baseline_share(program, val, attrs["conversation"]))
            stored = self.ledger.get(keys.BASELINE)
        if stored is None:
            stored = self._measure_baseline(program, val)
        else:  # what a run before this one watched prices the validations
            self.pricer.restore(dict(self.ledger.get(keys.CALL_STATS) or {}), dict(self.ledger.get(keys.VAL_OPS) or {}))
        if crew is not None:
            crew.pull()
        log.info("baseline valset accuracy %.3f (%s)", stored["val_accuracy"], self.study_name)
        val_ops = dict(self.ledger.get(keys.VAL_OPS) or {})
        self.stop.least_validation = min((n for n in val_ops.values() if n > 0), default=0)
        self.ctx.adapter.evaluator.task_lm = self.task_lm
        return float(stored["val_accuracy"])

    def _measure_baseline(self, program: dspy.Module, val: Sequence[CaseRef]) -> dict[str, Any]:
        progress.stage("baseline: valset", total=evaluation_steps(val))
        parts = conversations(val)
        if self.runner.shared and len(parts) > 1:
            jobs = [Job(f"baseline@{key}", {"job": "baseline", "conversation": key}) for key in parts]
            shares = list(self.runner.run(jobs, lambda attrs: self._baseline_share(program, val,
                                                                                    attrs["conversation"])).values())
            accuracy = joined_accuracy(shares)
            ops: Counter[str] = Counter()
            stats: dict[str, dict[str, float]] = {}
            for share in shares:
                ops.update(share["ops"])
                for name, stat in share["stats"].items():
                    mine = stats.setdefault(name, {})
                    for field_name, value in stat.items():
                        mine[field_name] = mine.get(field_name, 0) + value
            val_ops = dict(ops)
            self.pricer.restore(stats, val_ops)
        else:
            result = self.ctx.adapter.evaluate(program, val)
            accuracy, val_ops = result.accuracy, steps.predictor_ops(result)
            self.pricer.restore({}, val_ops)
            self.pricer.watch(result)
        stored = {"val_accuracy": accuracy}
        self.ledger.put(keys.VAL_OPS, val_ops)
        self.ledger.put(keys.CALL_STATS, self.pricer.stats_dict())
        self.ledger.put(keys.BASELINE, stored)
        self.checkpoint()
        return stored

    def _baseline_share(self, program: dspy.Module, val: Sequence[CaseRef], conversation: str) -> dict[str, Any]:
        result = self.ctx.adapter.evaluate(program, [c for c in val if c.conversation_key == conversation])
        watched = Pricer()
        watched.watch(result)
        return {"correct": sum(c.correct for c in result.cases), "cases": len(result.cases),
                "score": result.accuracy, "ops": steps.predictor_ops(result), "stats": watched.stats_dict()}

    def _minibatch(self, order: Sequence[CaseRef], number: int) -> list[CaseRef]:
        size = min(self.settings.minibatch, len(order))
        start = ((number - 1) * size) % len(order)
        return [order[(start + i) % len(order)] for i in range(size)]

    def _round(self, state: LoopState, number: int, order: Sequence[CaseRef]) -> bool:
        """Round `number` as an earlier run finished it, or run now; False when the run stops (before or after)."""
        record = self._resumed(state, number)
        if record is None:
            record = self._new_round(state, number, order)
            if record is None:
                return False
        return self._after(state, record)

    def _after(self, state: LoopState, record: RoundRecord) -> bool:
        state.rounds.append(record)
        progress.stage(None)
        if self.on_round is not None:
            self.on_round(record)
        state.reason = self.stop.after(record, self.budget, False)
        return state.reason is None

    def _resumed(self, state: LoopState, number: int) -> RoundRecord | None:
        done = self.ledger.get(keys.done(number))
        if done is None:
            return None
        record = RoundRecord.from_dict(done)
        taken = record.accepted_candidate
        if record.accepted and taken is not None:
            state.program, state.current_val = taken.apply(state.program), record.val_accuracy
        plan = self.ctx.plan(number)
        state.verdicts.extend(dict(v) for v in (plan.verdicts if plan is not None else ()))
        return record

    # one round ----------------------------------------------------------------------------------------------
    def _allowance(self, number: int) -> Allowance:
        """The round's share of the calls and seconds left: the rest over the rounds that can still run (module
        doc)."""
        rounds_left = max(1, min(self.settings.rounds - number + 1, self.stop.rounds_before_plateau()))
        left = self.budget.left()
        seconds = None if self.budget.deadline is None else max(0.0, self.budget.deadline - self.budget.now())
        return Allowance(self.budget, None if left is None else math.ceil(left / rounds_left),
                         None if seconds is None else seconds / rounds_left, self.budget.spent())

    def _new_round(self, state: LoopState, number: int, order: Sequence[CaseRef]) -> RoundRecord | None:
        """Round `number` run; None when it does not start or the budget cuts it short (`state` says why)."""
        state.reason = self.stop.before(number, self.budget)
        if state.reason is None and (why := self._cannot_start()):
            log.info("round %d not started: %s", number, why)
            state.reason = StopReason.spent(self.budget) if self.budget.exhausted() else StopReason.BUDGET
        if state.reason is not None:
            return None
        before = state.program
        phases = Phases(self.budget, number)
        started, calls_before, cached_before = self.budget.now(), self.budget.spent(), self.budget.cached()
        self._partial = RoundRecord(number)
        try:
            record = self._steps(state, number, order, phases)
        except _NotAfforded as short:
            log.info("%s", short)
            state.reason = StopReason.spent(self.budget) if self.budget.exhausted() else StopReason.BUDGET
            self.checkpoint()
            return None
        except BudgetExhausted as spent:
            log.info("round %d stopped in its %s: %s", number, phases.current.value, spent)
            record = replace(self._partial, cut={"phase": phases.current.value, "why": f"cut short: {spent}"})
        record = replace(record, lm_calls=self.budget.spent() - calls_before, cached_calls=self.budget.cached() - cached_before,
                         seconds=self.budget.now() - started, phases=phases.ordered(),
                         lm_calls_total=self.calls_total())
        self.checkpoint()
        if record.cut:
            state.reason = StopReason.spent(self.budget)
            state.interrupted = record
            return None
        if record.accepted:
            taken = record.accepted_candidate
            assert taken is not None
            state.program, state.current_val = taken.apply(before), record.val_accuracy
            self._check_one_change(before, state.program, record)
        self.ledger.put(keys.done(number), record.to_dict())
        return record

    def _cannot_start(self) -> str:
        """Why no round can start: the clock left cannot carry the cheapest validation ("" when one can)."""
        cheapest = [p for p in (self.pricer.validation(name) for name in self.ctx.predictors) if p.calls]
        if not cheapest or self.budget.deadline is None:
            return ""
        least = min(cheapest, key=lambda p: p.seconds or 0.0)
        left = self.budget.deadline - self.budget.now()
        if least.seconds is not None and least.seconds > left:
            return f"{left:.0f} s left, a validation takes about {least.seconds:.0f} s"
        return ""

    def _check_one_change(self, before: dspy.Module, after: dspy.Module, record: RoundRecord) -> None:
        from memtrace_opt.optimizers.core.program_io import changed_prompts

        changed = changed_prompts(before, after)
        taken = record.accepted_candidate
        if taken is not None and taken.sets_settings:
            assert changed == [] and settings_of(before) != settings_of(after), f"settings step changed {changed}"
        else:
            assert changed == [record.chosen_predictor], f"an accepted step changed {changed}"

    def _keep(self, record: RoundRecord) -> RoundRecord:
        """`record` as far as the round got: what a cut keeps."""
        self._partial = record
        return record

    def _steps(self, state: LoopState, number: int, order: Sequence[CaseRef], phases: Phases) -> RoundRecord:
        """The round's phases in order (module doc), its record filled in as each ends (a cut keeps what it
        reached: `_keep`)."""
        ctx, program, record = self.ctx, state.program, self._partial
        allowance = self._allowance(number)
        minibatch = self._minibatch(order, number)
        with phases.run(RoundPhase.PLAN, self.prices.plan(program, minibatch)):
            planned = steps.plan(ctx, number, program, minibatch, state.history, self._attribute(number, program))
        self.minibatch_runs[number] = planned.evaluation
        state.verdicts.extend({**v.to_dict(), "round": number} for v in planned.blame.verdicts)
        chosen = planned.chosen
        record = self._keep(replace(record, blame_counts=dict(planned.targets), not_fixable=dict(planned.not_fixable),
                         chosen_predictor=chosen, previous_instruction=instructions_of(program).get(chosen or ""),
                         val_accuracy=state.current_val))
        if chosen is None:
            return replace(record, outcome="nothing blamed that a prompt or a setting can fix")
        allowance.reserve = self.pricer.validation(chosen)
        checks = self._local_checks(planned)
        least = self.prices.least_scoring_of(chosen, planned, len(checks))
        allowance.widen(self.prices.least_round(chosen, planned, allowance.reserve, len(checks)))
        if why := allowance.shortfall(least, share=False):
            raise _NotAfforded(f"round {number} not started: {why} (scoring one candidate for {chosen} and "
                               "validating it)")
        book = self._book(number, program)
        local_set: LocalSet | None = None
        if planned.prompts and (ctx.local is not None or (ctx.repairs and steps.writes_memory(program, chosen))):
            with phases.run(RoundPhase.LOCAL_SET, self.prices.write(program, order)):
                local_set = self._local_set(number, program, chosen, planned.left_out)
            record = self._keep(replace(record, local_set=local_set.summary()))
        proposed = steps.proposed_repairs(program, chosen, planned.evaluation, planned.blame, ctx.adapter.memo,
                                          max_repairs=ctx.repairs, config=ctx.attribution_config) \
            if planned.prompts and ctx.repairs > 0 else RepairSet()
        repairs = self._repairs(number, program, chosen, planned, proposed, local_set, book, allowance, phases)
        if planned.prompts and ctx.repairs > 0:
            record = self._keep(replace(record, repairs=repairs.counts.to_dict()))
        if local_set is not None and repairs.repairs:
            local_set = local_set.with_repairs(repairs.repairs, planned.evaluation)
            record = self._keep(replace(record, local_set=local_set.summary()))
        evidence = steps.evidence_for(ctx, program, chosen, planned, repairs) if planned.prompts else None
        if evidence is not None:
            record = self._keep(replace(record, findings=[dict(f) for f in describe(evidence).get("findings") or []]))
        objective = steps.settings_objective(ctx, number, program, chosen, planned.left_out,
                                             StudyReplyBook(self.ledger, keys.replies(f"settings:{number}")))
        request = SourceRequest(number, program, chosen, evidence or _no_evidence(chosen), planned.evaluation,
                                ctx.adapter.memo, ctx.proposal.candidates if planned.prompts else 0,
                                ctx.earlier(number), tuple(repairs.repairs),
                                local_set if ctx.local is not None else None, objective)
        candidates = self._proposals(request, planned, allowance, phases) if planned.prompts else []
        candidates += self._settings(request, local_set, allowance, phases)
        plan = self._record_plan(number, planned, program, minibatch, candidates, evidence, repairs, local_set, checks)
        jobs = RoundJobs(ctx, plan, program, state.current_val, minibatch, runner=self.runner, pricer=self.pricer,
                         book=book, allowance=allowance, phases=phases, settings=objective)
        with phases.run(RoundPhase.CANDIDATES):
            choice = policy_for(jobs, ctx.local is not None and jobs.local_size > 0).choose()
        self._separate_validation(phases, jobs.priced)
        self._record_trials(number, program, choice.records, plan)
        record = self._keep(replace(record, candidates=choice.records, accepted=choice.taken is not None,
                         val_accuracy=choice.val if choice.val is not None else state.current_val,
                         outcome=choice.outcome))
        if choice.taken is not None and choice.taken.sets_settings:
            record = self._keep(replace(record, settings_changed={
                name: [old, new] for name, (old, new) in changed_settings(program.config, dict(choice.taken.settings)).items()}))
        if choice.cut and choice.taken is None:
            phases.current = jobs.cut_in
            raise BudgetExhausted(choice.cut)
        return record

    # the phases' own work -------------------------------------------------------------------------------------
    def _attribute(self, number: int, program: dspy.Module) -> Callable[[EvalResult], Blame]:
        ctx = self.ctx

        def attribute(evaluation: EvalResult) -> Blame:
            if self.runner.shared and len(evaluation.failed()) > 1:
                return self._shared_blame(number, program, evaluation)
            return attribute_failures(evaluation, evaluation.failed(), method=ctx.attribution, lm=ctx.attributor_lm,
                                      predictors=ctx.predictors, system=ctx.system, config=ctx.attribution_config,
                                      num_threads=ctx.threads)
        return attribute

    def _local_set(self, number: int, program: dspy.Module, chosen: str, left_out: frozenset[str]) -> LocalSet:
        ctx = self.ctx
        if ctx.local is None:  # only to confirm repairs on: the local objective does not rank (`--no-local-objective`)
            ctx = replace(ctx, local=replace(self.settings.local, local_objective=True))
        return steps.local_set(ctx, number, program, chosen, left_out)

    def _repairs(self, number: int, program: dspy.Module, chosen: str, planned: steps.Planned,
                 proposed: RepairSet, local_set: LocalSet | None, book: ReplyBook, allowance: Allowance,
                 phases: Phases) -> RepairSet:
        """The proposed repairs confirmed on the local set's first rung of calls, where the round affords it."""
        if not proposed.repairs:
            return proposed
        if local_set is None or not local_set.calls:
            phases.skip(RoundPhase.REPAIRS, "no local set to confirm the repairs on")
            return replace(proposed, repairs=[], counts=replace(proposed.counts, not_confirmed=len(proposed.repairs)))
        objective = LocalObjective(local_set, program, self.ctx.adapter.evaluator.task_lm, book, threads=self.ctx.threads)
        first = min(len(local_set.calls), RUNG_CALLS)
        price = self.prices.repair(program, chosen, planned, proposed.repairs, objective, first)
        if why := allowance.shortfall(price):
            phases.skip(RoundPhase.REPAIRS, why, price)
            return replace(proposed, repairs=[], counts=replace(proposed.counts, not_confirmed=len(proposed.repairs)))
        with phases.run(RoundPhase.REPAIRS, price):
            kept, _ = steps.confirm_repairs(proposed, program, chosen, planned.evaluation, objective, first)
        log.info("round %d: repairs of %s: %s", number, chosen, kept.counts.to_dict())
        return kept

    def _proposals(self, request: SourceRequest, planned: steps.Planned, allowance: Allowance,
                   phases: Phases) -> list[Candidate]:
        """The free sources' candidates, then each paying source's where the round affords it."""
        sources = list(self.ctx.sources)
        with phases.run(RoundPhase.PROPOSALS, Price(0, 0.0)):
            candidates = steps.propose(request, steps.free_sources(sources))
        for source in steps.paid_sources(sources):
            price = self.prices.source(source, request)
            need = price + self.prices.least_scoring(request, len(candidates) + request.slots)
            reflection = steps.spends(source) == "reflection"
            if reflection:  # part of the least a round needs (`least_round`), whatever its repairs spent of the
                allowance.reach(need)  # share widened to it: only the budget and the clock can refuse it
            if why := allowance.shortfall(need, share=not reflection):
                phases.skip(RoundPhase.PROPOSALS, f"{type(source).__name__}: {why}", price)
                continue
            before = Meter(self.budget)
            with phases.run(RoundPhase.PROPOSALS, price):
                candidates += steps.propose(request, [source], candidates)
            if steps.spends(source) == "reflection":
                spent = before.cost(RoundPhase.PROPOSALS, None)
                self.pricer.proposed(spent.calls, spent.seconds)
        return candidates

    def _settings(self, request: SourceRequest, local_set: LocalSet | None, allowance: Allowance,
                  phases: Phases) -> list[Candidate]:
        """The settings source's candidates, as many trials as `SETTINGS_SHARE` of the round's left pays for."""
        source = next((s for s in self.ctx.sources if isinstance(s, SettingsSource)), None)
        if source is None or request.settings is None:
            return []
        objective = request.settings
        if isinstance(objective, SettingsObjective) and not objective.seeded:  # what a trial runs is what it ran
            seed = self.prices.settings_seed(request, objective)
            if why := allowance.shortfall(seed):
                phases.skip(RoundPhase.SETTINGS, f"the seed's scoped run: {why}", seed)
                return []
            with phases.run(RoundPhase.SETTINGS, seed):
                objective.seed()
        trial = self.prices.trial(request, local_set)
        share = allowance.left()
        trials = source.search.settings_trials
        if trial.calls:
            trials = min(trials, int(share.calls * SETTINGS_SHARE // trial.calls))
        if trial.seconds and share.seconds is not None:
            trials = min(trials, int(share.seconds * SETTINGS_SHARE // trial.seconds))
        if trials < 1:
            phases.skip(RoundPhase.SETTINGS, "its slice of the round pays for no trial", trial)
            return []
        with phases.run(RoundPhase.SETTINGS, trial.times(trials)):
            return steps.settings_candidates(request, source, trials)

    def _local_checks(self, planned: steps.Planned) -> list[LocalCase]:
        """The local check's calls (`--no-local-objective`: a candidate's first test before the minibatch), their
        repairs' targets filled in once the round has confirmed them (`_record_plan`)."""
        ctx, chosen = self.ctx, planned.chosen
        if ctx.local is not None or not ctx.local_check or not planned.prompts or chosen is None:
            return []
        return local_cases(chosen, planned.evaluation, planned.blame, ctx.adapter.memo,
                           max_cases=ctx.proposal.evidence_cases)

    def _book(self, number: int, program: dspy.Module) -> ReplyBook:
        """Where the local objective keeps its replies: the study, where workers share the round; else the run's
        reply cache serves a repeated call and the book is this round's own."""
        if self.runner.shared:
            parent = instructions_digest(instructions_of(program))
            return StudyReplyBook(self.ledger, keys.replies(f"local:{number}:{parent}"))
        return DictReplyBook()

    def _record_plan(self, number: int, planned: steps.Planned, program: dspy.Module, minibatch: Sequence[CaseRef],
                     candidates: Sequence[Candidate], evidence: Any, repairs: RepairSet,
                     local_set: LocalSet | None, checks: Sequence[LocalCase]) -> RoundPlan:
        ctx, chosen = self.ctx, planned.chosen
        added = {r.case_id: tuple(r.added) for r in repairs.repairs}  # what each confirmed repair adds
        checks = [replace(c, target=added.get(c.case_id, ())) if c.blamed else c for c in checks]
        scoped = ctx.scoped_replay and chosen is not None and steps.writes_memory(program, chosen) \
            if chosen in ctx.predictors else False
        plan = RoundPlan(
            round=number, minibatch=tuple(c.case_id for c in minibatch), minibatch_score=planned.evaluation.accuracy,
            minibatch_ops=steps.predictor_ops(planned.evaluation), blame_counts=planned.targets,
            not_fixable=planned.not_fixable, chosen_predictor=chosen,
            previous_instruction=instructions_of(program).get(chosen or ""), candidates=tuple(candidates),
            evidence=describe(evidence) if evidence is not None else {},
            verdicts=tuple({**v.to_dict(), "round": number} for v in planned.blame.verdicts),
            local_cases=tuple(c.to_dict() for c in checks), repairs=tuple(r.to_dict() for r in repairs.repairs),
            repair_counts=repairs.counts.to_dict() if ctx.repairs > 0 and planned.prompts else {},
            evidence_ops=evidence_scope(planned.evaluation) if scoped else {},
            local_set=local_set.to_dict() if local_set is not None and ctx.local is not None else {},
        )
        self.ledger.put(keys.plan(number), plan.to_dict())
        self.runner.publish()  # the workers that run its candidates replay what tracing it recorded
        return plan

    def _record_trials(self, number: int, program: dspy.Module, records: Sequence[CandidateRecord],
                       plan: RoundPlan) -> None:
        """Each candidate as a finished trial of the study: the optimization's durable record of what it tried."""
        parent = instructions_digest(instructions_of(program))
        for index, record in enumerate(records):
            candidate = record.candidate(plan.chosen_predictor or "")
            attrs = {"round": number, "candidate": index, "worker": self.runner.worker, **record.to_dict()}
            self.ledger.record(candidate.key(number, parent), attrs, record.val_score)
            if record.status == Status.NOT_VALIDATED.value:  # said as it happens, beside the skipped phases
                log.info("round %d: candidate %d (%s) %s", number, index + 1, candidate.origin, record.why)

    @staticmethod
    def _separate_validation(phases: Phases, priced: Price) -> None:
        """The candidates' phase less the validations that ran inside it (each is a phase of its own), priced at
        what its scoring was priced at, rung by rung."""
        val, cand = phases.costs.get(RoundPhase.VALIDATION), phases.costs.get(RoundPhase.CANDIDATES)
        if cand is None:
            return
        cand = replace(cand, estimated_seconds=priced.seconds, estimated_calls=priced.calls)
        if val is None:
            phases.costs[RoundPhase.CANDIDATES] = cand
            return
        phases.costs[RoundPhase.CANDIDATES] = replace(
            cand, seconds=max(0.0, cand.seconds - val.seconds), calls=max(0, cand.calls - val.calls),
            cached=max(0, cand.cached - val.cached), prompt_tokens=max(0, cand.prompt_tokens - val.prompt_tokens),
            completion_tokens=max(0, cand.completion_tokens - val.completion_tokens))

    # workers sharing the study ------------------------------------------------------------------------------------
    def _shared_blame(self, number: int, program: dspy.Module, evaluation: EvalResult) -> Blame:
        """The minibatch's failures attributed by whichever workers claim them (`crew.py`)."""
        self.runner.publish()
        parent = instructions_digest(instructions_of(program))
        jobs = [Job(f"attribute:r{number}:{parent}:{c.conversation_key}:{c.case_id}",
                    {"round": number, "parent": parent, "job": "attribute", "case": c.case_id,
                     "conversation": c.conversation_key}) for c in evaluation.failed()]
        results = self.runner.run(jobs, lambda attrs: self.attribute_one(evaluation, attrs))
        if cut := next((r["budget"] for r in results.values() if "budget" in r), None):
            raise BudgetExhausted(cut)
        return blame_of([Verdict.from_dict(results[job.key]["verdict"]) for job in jobs], self.ctx.predictors)

    def attribute_one(self, evaluation: EvalResult, attrs: Mapping[str, Any]) -> dict[str, Any]:
        failed = [case for case in evaluation.failed()
                  if case.case_id == attrs["case"] and case.conversation_key == attrs["conversation"]]
        if not failed:
            raise MemtraceError(f"case {attrs['case']} did not fail in this worker's trace of round {attrs['round']}")
        verdicts = attribute_cases(failed_cases(evaluation, failed, self.ctx.system), self.ctx.attribution,
                                   lm=self.ctx.attributor_lm, config=self.ctx.attribution_config)
        return {"verdict": verdicts[0].to_dict(), "worker": self.runner.worker}

    def _shared_round(self, state: LoopState, number: int, order: Sequence[CaseRef]) -> bool:
        """Round `number` with other workers sharing the study (`crew.py`): the worker that leads it runs it and
        records it (`round_done:N`, then `next:N`); the others run its jobs until it is decided and then apply the
        same outcome. A leader that dies is replaced; a decision to stop binds the workers running when taken."""
        crew, ledger = self.crew, self.ledger
        assert crew is not None

        def told(name: str) -> dict[str, Any] | None:
            word = ledger.get(name)
            return word if word is not None and float(word.get("at", 0)) >= self.joined else None

        def decided() -> bool:
            return (ledger.get(keys.done(number)) is not None and told(keys.going_on(number)) is not None) \
                or told(keys.stopped(number)) is not None

        while True:
            crew.pull()
            record = self._resumed(state, number) if ledger.get(keys.done(number)) is not None else None
            if record is not None:
                going = self._after(state, record)
                word = told(keys.going_on(number))
                if word is not None:  # the leader's budget and clock decide for every worker
                    state.reason = StopReason(word["reason"]) if word["reason"] else None
                    going = state.reason is None
                return going
            stopped = told(keys.stopped(number))
            if stopped is not None:
                state.reason = StopReason(stopped["reason"])
                cut = stopped.get("interrupted")
                state.interrupted = RoundRecord.from_dict(cut) if cut else None
                return False
            with crew.lead(f"round-{number}") as lead:
                if lead is not None:
                    going = self._lead_round(state, number, order)
                    if ledger.get(keys.done(number)) is None:
                        lead.undecided()  # stopped before deciding it: a later run leads it again
                    return going
            self._follow_round(state, number, order, decided)

    def _lead_round(self, state: LoopState, number: int, order: Sequence[CaseRef]) -> bool:
        record = self._new_round(state, number, order)
        if record is None:
            reason = (state.reason or StopReason.MAX_ROUNDS).value
            cut = state.interrupted.to_dict() if state.interrupted is not None else None
            self.ledger.put(keys.stopped(number), {"reason": reason, "interrupted": cut, "at": time.time()})
            return False
        going = self._after(state, record)
        self.ledger.put(keys.going_on(number), {"reason": state.reason.value if state.reason else "", "at": time.time()})
        return going

    def _follow_round(self, state: LoopState, number: int, order: Sequence[CaseRef], decided: Callable[[], bool]) -> None:
        assert self.crew is not None
        program = state.program
        parent = instructions_digest(instructions_of(program))
        minibatch = self._minibatch(order, number)
        built: list[RoundJobs] = []

        def execute(attrs: Mapping[str, Any]) -> dict[str, Any]:
            if attrs.get("job") == "attribute":
                if number not in self.minibatch_runs:
                    self.minibatch_runs[number] = self.ctx.adapter.evaluate(program, minibatch)
                return self.attribute_one(self.minibatch_runs[number], attrs)
            if not built:
                plan = self.ctx.plan(number)
                if plan is None:
                    raise MemtraceError(f"round {number} has shared jobs but no recorded plan")
                planned = [c for c in minibatch if c.case_id in set(plan.minibatch)] or minibatch
                objective = None
                if any(c.sets_settings for c in plan.candidates) and plan.chosen_predictor:
                    objective = steps.settings_objective(self.ctx, number, program, plan.chosen_predictor,
                                                         self.ctx.left_out(number, map(Verdict.from_dict, plan.verdicts)),
                                                         StudyReplyBook(self.ledger, keys.replies(f"settings:{number}")))
                built.append(RoundJobs(self.ctx, plan, program, state.current_val, planned, runner=self.runner,
                                       pricer=self.pricer, book=self._book(number, program), settings=objective))
            return built[0].run_job(attrs)

        self.crew.follow(f"round-{number}", decided,
                         lambda attrs: attrs.get("round") == number and attrs.get("parent") == parent, execute)


class _NotAfforded(Exception):  # noqa: N818 - a round that cannot afford its validation does not run
    """The calls or seconds left cannot carry the round's validation: the run stops before the round."""


def _no_evidence(target: str) -> Any:
    from memtrace_opt.optimizers.core.evidence import ProposalEvidence

    return ProposalEvidence(target, target, "")
