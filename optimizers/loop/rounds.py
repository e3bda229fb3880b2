"""One round of the closed loop, as a pipeline of typed candidates:

1. plan: trace the minibatch, route its failures (attribution, `routing.py`), choose the predictor (the
   selector), repair its blamed calls where a replay and the lineage test confirm it (`repairs.py`), ask the
   candidate sources for `Candidate`s (the reflection LM's rewrites, the diagnosed patterns' rules, the demos
   candidate, the repair-demos candidate);
2. the gates, in a chain (`trials.py`): the local check on the blamed calls (an upstream predictor), the
   minibatch, the valset for the best rewrite and for the demos candidate, the rewrite with the demos when
   both pass;
3. the choice: at most one candidate is taken; every candidate ends with a `Decision`.

Every step that costs LM calls is recorded in the study before the next begins, so a killed round resumes:
the round's plan is study attribute `round:N` (`RoundPlan`); each candidate is a trial keyed by
`Candidate.key`; the outcome is `round_done:N` (`RoundRecord`). Until its plan is recorded, what each step found is
in the round's `RoundSoFar`, so a round the budget cuts short keeps it (`interrupted.py`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dspy

from memtrace_opt import progress
from memtrace_opt.attribution import Verdict, attribute_cases
from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.budget import BudgetExhausted
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.evidence import ProposalEvidence
from memtrace_opt.optimizers.core.program_io import instructions_digest, instructions_of
from memtrace_opt.optimizers.core.repair import RepairSet
from memtrace_opt.optimizers.evaluation.blame import Blame, attribute_failures, blame_of, failed_cases
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.evidence import build_evidence, describe
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.local_set import (
    GOLD_ERROR_TARGETS,
    LocalSet,
    build_local_set,
    made_from,
)
from memtrace_opt.optimizers.evaluation.repairs import confirmed_repairs
from memtrace_opt.optimizers.evaluation.scoped import evidence_scope
from memtrace_opt.optimizers.gates.local_check import LocalCase, local_cases
from memtrace_opt.optimizers.gates.settings import SettingsObjective, target_op
from memtrace_opt.optimizers.loop.choice import policy_for
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Job
from memtrace_opt.optimizers.loop.interrupted import InterruptedRound, RoundPhase, RoundSoFar
from memtrace_opt.optimizers.loop.plan import RoundPlan
from memtrace_opt.optimizers.loop.records import RoundRecord
from memtrace_opt.optimizers.loop.selection import RoundOutcome
from memtrace_opt.optimizers.loop.study import StudyLedger, StudyReplyBook
from memtrace_opt.optimizers.loop.trials import RoundTrials
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.demo_context import writes_answers
from memtrace_opt.optimizers.sources.settings_source import SettingsSource
from memtrace_opt.programs.tunable import changed_settings, tunables_for
from memtrace_opt.tracing import OpEvent

__all__ = ["RoundOutcomeFull", "run_round", "interrupted_round", "predictor_ops", "round_trials",
           "shared_job"]

log = logging.getLogger(__name__)


def predictor_ops(evaluation: EvalResult) -> dict[str, int]:
    """Each predictor's op calls in `evaluation`'s traced runs, replayed ones included: what a change to its
    prompt makes run again."""
    counts = Counter(e.predictor for trace in evaluation.traces.values() for e in trace.events
                     if isinstance(e, OpEvent) and e.predictor)
    return dict(counts)


@dataclass
class RoundOutcomeFull:
    """A finished round: its record, the program after it, its verdicts (dicts) and whether it was cut short."""

    record: RoundRecord
    program: dspy.Module
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    cut: bool = False


def _plan(ctx: RoundContext, number: int, program: dspy.Module, minibatch: Sequence[CaseRef],
          history: Sequence[RoundOutcome], so_far: RoundSoFar) -> RoundPlan:
    """Trace the minibatch, attribute failures, choose the target, ask the sources; record the plan. What each step
    finds goes into `so_far` as it ends, so a round the budget cuts short keeps it."""
    progress.stage(f"round {number}: plan (trace, attribute)")
    evaluation = ctx.evaluator.evaluate(program, minibatch)
    if ctx.routing is not None:
        blame = ctx.routing.route(evaluation, evaluation.failed(), ctx.predictors)
    elif ctx.runner.shared and len(evaluation.failed()) > 1:
        blame = _shared_blame(ctx, number, program, evaluation)
    else:
        blame = attribute_failures(
            evaluation, evaluation.failed(), method=ctx.attribution, lm=ctx.attributor_lm,
            predictors=ctx.predictors, system=ctx.system, config=ctx.attribution_config,
            num_threads=ctx.evaluator.threads,  # against a served model, failures are attributed in parallel
        )
    targets = _targets(ctx, program, blame)
    chosen = ctx.selector.select(targets, history)
    not_fixable = {op: n for op, n in blame.not_fixable.items() if op not in targets}
    so_far.blame_counts, so_far.not_fixable, so_far.chosen_predictor = dict(targets), dict(not_fixable), chosen
    instructions = instructions_of(program)
    proposed = _Proposed()
    if chosen is not None and not ctx.budget.exhausted():
        proposed = _propose(ctx, number, program, chosen, evaluation, blame, so_far)
    candidates, repairs, local_set = proposed.candidates, proposed.repairs, proposed.local_set
    plan = RoundPlan(
        round=number, minibatch=tuple(case.case_id for case in minibatch), minibatch_score=evaluation.accuracy,
        minibatch_ops=predictor_ops(evaluation), blame_counts=targets, not_fixable=not_fixable,
        chosen_predictor=chosen, previous_instruction=instructions.get(chosen) if chosen else None,
        candidates=tuple(candidates), evidence=proposed.evidence,
        verdicts=tuple({**v.to_dict(), "round": number} for v in blame.verdicts),
        local_cases=tuple(case.to_dict() for case in proposed.checks),
        repairs=tuple(r.to_dict() for r in repairs.repairs),
        repair_counts=repairs.counts.to_dict() if ctx.repairs > 0 and chosen is not None else {},
        evidence_ops=evidence_scope(evaluation) if ctx.scoped_replay and chosen and not writes_answers(chosen, [evaluation]) else {},
        local_set=local_set.to_dict() if local_set is not None else {},
    )
    ctx.minibatch_runs[number] = evaluation
    existing = ctx.plan(number)
    if existing is not None:  # another worker sharing the study planned this round first: follow its plan
        return existing
    ctx.ledger.put(f"round:{number}", plan.to_dict())
    ctx.runner.publish()  # the workers that run its candidates replay what tracing it recorded
    return plan


@dataclass
class _Proposed:
    """What a round proposed for its target: the candidates, the evidence summary, the local check's cases, the
    repairs and the local set."""

    candidates: list[Candidate] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    checks: list[LocalCase] = field(default_factory=list)
    repairs: RepairSet = field(default_factory=RepairSet)
    local_set: LocalSet | None = None


def _targets(ctx: RoundContext, program: dspy.Module, blame: Blame) -> dict[str, int]:
    """What the round may choose, with its failures: the blamed predictors, and with the settings search the blamed
    ops without a prompt that declare tunable settings (a retrieval's top-k), most blamed first."""
    counts = blame.counts()
    if ctx.search is not None:
        counts.update({op: n for op, n in blame.not_fixable.items() if tunables_for(program.config, [op])})
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _propose(ctx: RoundContext, number: int, program: dspy.Module, chosen: str, evaluation: EvalResult,
             blame: Blame, so_far: RoundSoFar) -> _Proposed:
    """The candidates for `chosen`: for a predictor, its repairs, evidence, local set and every source's
    proposals; for an op without a prompt, its settings alone. `so_far` follows the steps."""
    out = _Proposed()
    left_out = ctx.left_out(number, blame.verdicts)  # GoldError cases: no training signal
    objective = _settings_objective(ctx, number, program, chosen, left_out)
    earlier = [plan for plan in map(ctx.plan, range(1, number)) if plan is not None]
    if chosen not in ctx.predictors:
        request = SourceRequest(number, program, chosen, ProposalEvidence(chosen, chosen, ""), evaluation,
                                ctx.evaluator.memo, 0, earlier, (), None, objective)
        progress.stage(f"round {number}: settings")
        so_far.phase = RoundPhase.PROPOSALS
        out.candidates = [c for source in ctx.sources if isinstance(source, SettingsSource)
                          for c in source.propose(request, [])]
        return out
    if ctx.repairs > 0:
        progress.stage(f"round {number}: repairs")
        so_far.phase = RoundPhase.REPAIRS
        out.repairs = confirmed_repairs(program, chosen, evaluation, blame, ctx.evaluator, max_repairs=ctx.repairs,
                                        config=ctx.attribution_config)
        so_far.repairs = out.repairs.counts.to_dict()
    evidence = build_evidence(chosen, instructions_of(program), evaluation, blame, ctx.evaluator.memo,
                              max_cases=ctx.proposal.evidence_cases)
    evidence = evidence.with_targets({r.case_id: r.target() for r in out.repairs.repairs})
    out.evidence = describe(evidence)
    so_far.findings = [dict(f) for f in out.evidence.get("findings") or []]
    if ctx.local_check:
        out.checks = local_cases(chosen, evaluation, blame, ctx.evaluator.memo, max_cases=ctx.proposal.evidence_cases,
                                 targets={r.case_id: r.added for r in out.repairs.repairs})
    if ctx.local is not None:
        so_far.phase = RoundPhase.LOCAL_SET
        out.local_set = _local_set(ctx, number, program, chosen, out.repairs, left_out)
        so_far.local_set = out.local_set.summary()
    request = SourceRequest(number, program, chosen, evidence, evaluation, ctx.evaluator.memo,
                            ctx.proposal.candidates, earlier, tuple(out.repairs.repairs), out.local_set, objective)
    progress.stage(f"round {number}: proposals")
    so_far.phase = RoundPhase.PROPOSALS
    candidates: list[Candidate] = []
    for source in ctx.sources:
        candidates += source.propose(request, candidates)
    if out.local_set is not None:  # what each was made from: the local objective scores it on the other calls
        shown = [case.shown for case in [*evidence.failures, *evidence.successes]]
        candidates = [replace(c, built_from=made_from(out.local_set, c.demo_list(), () if c.sets_demos else shown))
                      if not c.sets_settings else c for c in candidates]
    unique: dict[str, Candidate] = {}
    for candidate in candidates:  # one trial per prompt: two sources may propose the same one
        unique.setdefault(candidate.key(number, ""), candidate)
    out.candidates = list(unique.values())
    return out


def _settings_objective(ctx: RoundContext, number: int, program: dspy.Module, chosen: str,
                        left_out: frozenset[str]) -> SettingsObjective | None:
    """The settings objective of the round's target, where the settings search is on and its op declares any, on the
    training questions less `left_out`."""
    if ctx.search is None:
        return None
    op = target_op(program, chosen)
    if op is None or not tunables_for(program.config, [op.op_name]):
        return None
    return SettingsObjective(chosen, ctx.evaluator, ctx.training(left_out), program,
                             StudyReplyBook(ctx.ledger, f"settings:{number}"), cost_limit=ctx.search.cost_limit)


def _local_set(ctx: RoundContext, number: int, program: dspy.Module, chosen: str, repairs: RepairSet,
               left_out: frozenset[str]) -> LocalSet:
    """The chosen predictor's local set in a traced run of the training questions (the memo serves what an earlier
    round traced), a confirmed repair's additions as its call's target, the targets of `left_out` (GoldError cases)
    left out, sampled to `local_calls` calls."""
    assert ctx.local is not None
    progress.stage(f"round {number}: local set")
    training = ctx.evaluator.evaluate(program, ctx.trainset)
    local_set = build_local_set(program, chosen, training, ctx.evaluator.memo).with_repairs(repairs.repairs, training)
    local_set = local_set.without(left_out, GOLD_ERROR_TARGETS)
    local_set = local_set.sample(ctx.local.local_calls, seed=number)
    log.info("round %d: local set of %s: %s", number, chosen, local_set.summary())
    return local_set


def _attribution_job(number: int, program: dspy.Module, case: Any) -> Job:
    parent = instructions_digest(instructions_of(program))
    return Job(f"attribute:r{number}:{parent}:{case.conversation_key}:{case.case_id}",
               {"round": number, "parent": parent, "job": "attribute", "case": case.case_id,
                "conversation": case.conversation_key})


def _shared_blame(ctx: RoundContext, number: int, program: dspy.Module, evaluation: EvalResult) -> Blame:
    """The minibatch's failures attributed by whichever workers claim them (`crew.py`): each traces the minibatch
    again from the shared memo, which the planner's trace has just fed."""
    ctx.runner.publish()
    jobs = [_attribution_job(number, program, case) for case in evaluation.failed()]
    results = ctx.runner.run(jobs, lambda attrs: attribute_one(ctx, evaluation, attrs))
    if cut := next((r["budget"] for r in results.values() if "budget" in r), None):
        raise BudgetExhausted(cut)
    return blame_of([Verdict.from_dict(results[job.key]["verdict"]) for job in jobs], ctx.predictors)


def attribute_one(ctx: RoundContext, evaluation: EvalResult, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """An attribution job (`_attribution_job`): the verdict on one failed case of `evaluation`."""
    failed = [case for case in evaluation.failed()
              if case.case_id == attrs["case"] and case.conversation_key == attrs["conversation"]]
    if not failed:
        raise MemtraceError(f"case {attrs['case']} did not fail in this worker's trace of round {attrs['round']}")
    verdicts = attribute_cases(failed_cases(evaluation, failed, ctx.system), ctx.attribution, lm=ctx.attributor_lm,
                               config=ctx.attribution_config)
    return {"verdict": verdicts[0].to_dict(), "worker": ctx.runner.worker}


def shared_job(ctx: RoundContext, number: int, program: dspy.Module, current_val: float,
               minibatch: Sequence[CaseRef], attrs: Mapping[str, Any], trials: list[RoundTrials]) -> dict[str, Any]:
    """A job of round `number` run by a worker that does not lead it: an attribution (on its own trace of the
    minibatch, replayed from the shared memo) or a job of the round's gate chain (`RoundTrials.run_job`, built
    once into `trials`)."""
    if attrs.get("job") == "attribute":
        if number not in ctx.minibatch_runs:
            ctx.minibatch_runs[number] = ctx.evaluator.evaluate(program, minibatch)
        return attribute_one(ctx, ctx.minibatch_runs[number], attrs)
    if not trials:
        built = round_trials(ctx, number, program, current_val, minibatch)
        if built is None:
            raise MemtraceError(f"round {number} has shared jobs but no recorded plan")
        trials.append(built)
    return dict(trials[0].run_job(attrs))


def run_round(ctx: RoundContext, number: int, program: dspy.Module, current_val: float,
              minibatch: Sequence[CaseRef], history: Sequence[RoundOutcome],
              so_far: RoundSoFar | None = None) -> RoundOutcomeFull:
    """Run (or resume) round `number` from `program` whose valset accuracy is `current_val`; `so_far` (the caller's,
    to read when the budget cuts the round short: `interrupted_round`) follows its steps."""
    so_far = so_far or RoundSoFar(number, ctx.budget.spent())
    plan = ctx.plan(number)
    if plan is None:
        plan = _plan(ctx, number, program, minibatch, history, so_far)
    else:
        minibatch = _planned_minibatch(plan, minibatch)
    local_set = LocalSet.from_dict(plan.local_set).summary() if plan.local_set else None
    so_far.planned(plan, local_set)
    tested = RoundTrials(ctx, plan, program, current_val, minibatch).run(policy_for)
    if tested.cut_in is not None:
        so_far.phase = tested.cut_in
    new_program = tested.taken.apply(program) if tested.taken is not None else program
    record = RoundRecord(
        round=number, blame_counts=dict(plan.blame_counts), not_fixable=dict(plan.not_fixable),
        chosen_predictor=plan.chosen_predictor, previous_instruction=plan.previous_instruction,
        candidates=tested.records, accepted=tested.taken is not None, val_accuracy=tested.val,
        lm_calls=ctx.budget.spent() - so_far.calls_before, seconds=so_far.seconds(), findings=plan.findings,
        repairs=dict(plan.repair_counts) or None, local_set=local_set,
        settings_changed={name: [before, after] for name, (before, after) in
                          changed_settings(program.config, dict(tested.taken.settings)).items()}
        if tested.taken is not None and tested.taken.sets_settings else None,
    )
    return RoundOutcomeFull(record, new_program, [dict(v) for v in plan.verdicts], tested.cut)


def _planned_minibatch(plan: RoundPlan, minibatch: Sequence[CaseRef]) -> list[CaseRef]:
    by_id = {case.case_id: case for case in minibatch}
    return [by_id[i] for i in plan.minibatch if i in by_id] or list(minibatch)


def round_trials(ctx: RoundContext, number: int, program: dspy.Module, current_val: float,
                 minibatch: Sequence[CaseRef]) -> RoundTrials | None:
    """Round `number`'s gate chain from its recorded plan, as a worker that did not plan it runs the round's
    shared jobs (`crew.py`); None while no plan is recorded."""
    plan = ctx.plan(number)
    return None if plan is None else RoundTrials(ctx, plan, program, current_val, _planned_minibatch(plan, minibatch))


def interrupted_round(ledger: StudyLedger, so_far: RoundSoFar, program: dspy.Module, why: str,
                      lm_calls: int) -> InterruptedRound:
    """How far round `so_far.round` (started from `program`) got before the budget cut it short, `lm_calls` into
    it: what `so_far` reached, and once its plan is recorded the minibatch score of each candidate evaluated (None
    for the others)."""
    number = so_far.round
    stored = ledger.get(f"round:{number}")
    if stored is None:
        return InterruptedRound.of(so_far, why, lm_calls)
    plan = RoundPlan.from_dict(stored)
    parent = instructions_digest(instructions_of(program))
    candidates = []
    for candidate in plan.candidates:
        key = candidate.key(number, parent)
        attrs = ledger.finished(key, wait_seconds=0) or ledger.partial(key) or {}
        entry: dict[str, Any] = {"instruction": candidate.instruction, "minibatch_score": attrs.get("minibatch_score")}
        if candidate.demos is not None:
            entry["demos"] = len(candidate.demos)
        if attrs.get("local") is not None:
            entry["local"] = attrs["local"]
        if attrs.get("local_rejected"):
            entry["why"] = attrs.get("why", "")
        candidates.append(entry)
    return InterruptedRound.of(so_far, why, lm_calls, candidates)
