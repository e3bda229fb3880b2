"""What each phase of a round costs, priced before it runs (`Price`: LM calls and seconds), from the round's
context and the run's `Pricer`: the minibatch traced, the write path a conversation the memo has not seen needs,
confirming the repairs, a paying source's calls, a settings trial, the least a round needs to tell anything."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.memory import OpRole
from memtrace_opt.optimizers.core.repair import Repair
from memtrace_opt.optimizers.evaluation.evidence import describe
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.local_set import LocalSet
from memtrace_opt.optimizers.gates.local_objective import LocalObjective
from memtrace_opt.optimizers.gates.settings import SettingsObjective
from memtrace_opt.optimizers.loop import steps
from memtrace_opt.optimizers.loop.choice import RUNG_CALLS
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.pricing import Price, Pricer
from memtrace_opt.optimizers.sources.base import SourceRequest

__all__ = ["LEAST_SCORED", "PhasePrices"]

LEAST_SCORED = 3  # the candidates the least a round needs pays to score (`least_round`)


@dataclass
class PhasePrices:
    """The prices of a round's phases (module doc)."""

    ctx: RoundContext
    pricer: Pricer

    def plan(self, program: dspy.Module, minibatch: Sequence[CaseRef]) -> Price:
        """Tracing the minibatch: its questions this program has not answered yet in this run, and the write path of
        any conversation the memo has not seen (attribution's own calls are not priced: lineage makes none)."""
        answer = self.ctx.predictors[-1] if self.ctx.predictors else ""
        per = self.pricer.per_call(answer)
        fresh = self.ctx.adapter.unanswered(program, minibatch)
        return Price(len(fresh), None if per is None else len(fresh) * per) + self.write(program, minibatch)

    def write(self, program: dspy.Module, order: Sequence[CaseRef]) -> Price:
        fresh = {c.conversation_key for c in order if not self.ctx.adapter.knows(c.conversation_key)}
        if not fresh:
            return Price(0, 0.0)
        val_keys = {c.conversation_key for c in self.ctx.valset}
        writes = [n for n in self.pricer.val_calls if steps.writes_memory(program, n)]
        per_conversation = sum(self.pricer.val_calls[n] for n in writes) / max(1, len(val_keys))
        per = [self.pricer.per_call(n) or 0.0 for n in writes]
        seconds = per_conversation * (sum(per) / len(per) if per else 0.0)
        return Price(int(per_conversation * len(fresh)), seconds * len(fresh))

    def repair(self, program: dspy.Module, chosen: str, planned: steps.Planned, repairs: Sequence[Repair],
                      objective: LocalObjective, first: int) -> Price:
        price = Price(0, 0.0)
        cases = planned.evaluation.by_id()
        for repair in repairs:
            case = cases.get(repair.case_id)
            candidate = steps.repair_candidate(program, chosen, repair, f"{case.conversation_key}/{repair.op_id}") \
                if case is not None else None
            if candidate is not None:
                calls = objective.calls_for(candidate, first)
                price += self.pricer.local_calls([(c.prompt, c.response) for c in calls],
                                                 objective.head_words(program, candidate), chosen)
        return price

    def least_scoring(self, request: SourceRequest, candidates: int) -> Price:
        """Scoring `candidates` on the first rung: what a paying source must leave room for (its own candidates'
        and those proposed before it)."""
        local = request.local
        if local is None or not local.calls or not candidates:
            return Price(0, 0.0)
        first = local.calls[:RUNG_CALLS]
        per = self.pricer.local_calls([(c.prompt, c.response) for c in first], 0, request.predictor)
        return per.times(candidates)

    def source(self, source: Any, request: SourceRequest) -> Price:
        kind = steps.spends(source)
        if kind == "reflection":
            shown = len(json.dumps(describe(request.evidence)).split()) + len(request.instruction.split()) * 2
            reply = max(160.0, len(request.instruction.split()) * 1.5 * 1.35)
            return self.pricer.reflection(request.slots, shown, reply)
        pool = getattr(source, "pool", ())
        if kind == "task" and pool and not getattr(source, "pool_results", None):
            fresh = self.ctx.adapter.unanswered(request.program, pool)
            per = self.pricer.per_call(self.ctx.predictors[-1] if self.ctx.predictors else "")
            return Price(len(fresh), None if per is None else len(fresh) * per)
        return Price(0, 0.0)

    def settings_seed(self, request: SourceRequest, objective: SettingsObjective) -> Price:
        """The seed's own scoped run, which the settings objective scores every trial against: the write path of a
        training conversation the memo has not seen, and (a target that reads memory or answers) the training
        questions not answered yet."""
        price = self.write(request.program, objective.trainset)
        if objective.role in (OpRole.FORMS, OpRole.UPDATES, OpRole.DELETES):
            return price
        per = self.pricer.per_call(self.ctx.predictors[-1] if self.ctx.predictors else "")
        fresh = self.ctx.adapter.unanswered(request.program, objective.trainset)
        return price + Price(len(fresh), None if per is None else len(fresh) * per)

    def trial(self, request: SourceRequest, local_set: LocalSet | None) -> Price:
        """One settings trial: the calls the seed's scoped run made in scope (`SettingsObjective.in_scope`, served
        or live) of the target's predictor and of those after it, which a setting changes what they are given (the
        predictors before it are served). Before the seed has run: the target's calls that read a training
        question's evidence; for an op without a prompt, the training questions answered again."""
        scope = getattr(request.settings, "in_scope", None) or {}
        predictors = list(self.ctx.predictors)
        if request.predictor in predictors and scope:
            price = Price(0, 0.0)
            for name in predictors[predictors.index(request.predictor):]:
                count, per = scope.get(name, 0), self.pricer.per_call(name)
                price += Price(count, None if per is None else count * per)
            return price
        if request.predictor in predictors:
            calls = len(local_set.calls) + int(local_set.excluded.get("over_max_calls", 0)) if local_set else len(self.ctx.trainset)
            per = self.pricer.per_call(request.predictor)
        else:
            calls = len(self.ctx.training(frozenset()))
            per = self.pricer.per_call(self.ctx.predictors[-1] if self.ctx.predictors else "")
        return Price(calls, None if per is None else calls * per)

    def least_scoring_of(self, chosen: str, planned: steps.Planned, checks: int = 0) -> Price:
        """Scoring one candidate for `chosen` on the least the round's objective takes: a first rung of the local set,
        or (`--no-local-objective`) its `checks` local-check calls and the minibatch."""
        per = self.pricer.per_call(chosen if chosen in self.ctx.predictors else self.ctx.predictors[-1])
        calls = self._scoring_calls(chosen, planned, checks)
        return Price(calls, None if per is None else calls * per)

    def least_round(self, chosen: str, planned: steps.Planned, reserve: Price, checks: int = 0) -> Price:
        """What a round needs to tell anything: its validation, `LEAST_SCORED` candidates scored on the least the
        round's objective takes (a first rung of the local set, or the minibatch) and the reflection LM's
        proposals. A round's share is widened to it (the rounds after get less), and at the proposals again by
        what the repairs before them spent (`Allowance.reach`)."""
        per = self.pricer.per_call(chosen)
        calls = LEAST_SCORED * self._scoring_calls(chosen, planned, checks)
        scoring = Price(calls, None if per is None else calls * per)
        reflect = self.pricer.per_call("reflection") or per
        proposals = Price(self.ctx.proposal.candidates,
                          None if reflect is None else self.ctx.proposal.candidates * reflect)
        return reserve + scoring + proposals

    def _scoring_calls(self, chosen: str, planned: steps.Planned, checks: int) -> int:
        """The calls scoring one candidate for `chosen` takes at least: a first rung of the local set, or (without
        the local objective, `MinibatchFirst`) its `checks` local-check calls and `chosen`'s calls on the minibatch
        (`RoundJobs.minibatch_price`)."""
        if self.ctx.local is not None:
            return RUNG_CALLS
        return checks + steps.predictor_ops(planned.evaluation).get(chosen, 0)
