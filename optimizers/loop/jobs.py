"""`RoundJobs`: one round's candidates as jobs, the narrow interface a choice policy sees (`choice.Trials`): each
candidate scored on the local set rung by rung, on the settings objective or on the minibatch, and validated, through
the runner (this process, or the workers sharing the round). What it may run is what the round's `Allowance` says;
a job's result crosses to another worker as a JSON-ready dict and nowhere else."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from memtrace_opt import progress
from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.core.program_io import instructions_digest, instructions_of
from memtrace_opt.optimizers.evaluation.examples import CaseRef, evaluation_steps
from memtrace_opt.optimizers.evaluation.local_set import LocalSet
from memtrace_opt.optimizers.evaluation.scoped import replayed_ops, scoped_reuse
from memtrace_opt.optimizers.gates.local_check import LocalCase, LocalCheckGate
from memtrace_opt.optimizers.gates.local_objective import LocalObjective, LocalScore, ReplyBook
from memtrace_opt.optimizers.gates.settings import SettingsObjective
from memtrace_opt.optimizers.loop.allowance import Allowance, Phases
from memtrace_opt.optimizers.loop.choice import Scored, Validation
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Job, conversations, joined_accuracy
from memtrace_opt.optimizers.loop.pricing import Price, Pricer
from memtrace_opt.optimizers.loop.records import RoundPhase, RoundPlan
from memtrace_opt.optimizers.loop.runner import Runner

__all__ = ["RoundJobs"]


class RoundJobs:
    """One round's candidates as jobs (the `Trials` a choice policy sees, `choice.py`): each candidate scored on
    the local set rung by rung, on the settings objective or on the minibatch, and validated, through the runner
    (this process, or the workers sharing the round). The leader builds it from its plan; a worker that does not lead
    builds the same from the recorded plan and runs the jobs it claims (`run_job`)."""

    def __init__(self, ctx: RoundContext, plan: RoundPlan, program: dspy.Module, current_val: float,
                 minibatch: Sequence[CaseRef], *, runner: Runner, pricer: Pricer, book: ReplyBook,
                 allowance: Allowance | None = None, phases: Phases | None = None,
                 settings: SettingsObjective | None = None) -> None:
        self.ctx, self.plan, self.program, self.current_val = ctx, plan, program, current_val
        self.number, self.chosen = plan.round, plan.chosen_predictor or ""
        self.candidates = list(plan.candidates)
        self.parent = instructions_digest(instructions_of(program))
        self.runner, self.pricer, self.allowance, self.phases = runner, pricer, allowance, phases
        self.minibatch_cases = list(minibatch)
        local = LocalSet.from_dict(plan.local_set) if plan.local_set else None
        self.objective = None if local is None or not local.calls else LocalObjective(
            local, program, ctx.adapter.evaluator.task_lm, book, threads=ctx.threads)
        self.local_size = len(local.calls) if local is not None else 0
        checks = [LocalCase.from_dict(case) for case in plan.local_cases]
        self.check = LocalCheckGate(checks, ctx.adapter.evaluator.task_lm) if checks and ctx.local_check else None
        self.settings_objective = settings
        self.margin = ctx.local_margin
        self.validate_top = ctx.local.validate_top if ctx.local is not None else 2
        self.cut = ""
        self.cut_in = RoundPhase.CANDIDATES  # the phase the budget first stopped a job of the round in
        self.validations = 0
        self.priced = Price(0, 0.0)  # what the scoring this round ran was priced at (the phase's estimate)
        self._scored: dict[str, int] = {}  # candidate key -> calls of the local set it has been scored on

    # what the policy asks ------------------------------------------------------------------------------------
    def local(self, candidates: Sequence[Candidate], first: int) -> list[LocalScore | None]:
        self.priced += self.local_price(candidates, first)
        jobs = [self._job("local", c, first=first) for c in candidates]
        results = self.runner.run(jobs, self.run_job)
        out: list[LocalScore | None] = []
        for job, candidate in zip(jobs, candidates, strict=True):
            result = results[job.key]
            if "budget" in result:
                self.cut = self.cut or str(result["budget"])
                out.append(None)
                continue
            self._scored[candidate.key(self.number, self.parent)] = first
            out.append(LocalScore.from_dict(result["local"]))
        return out

    def local_price(self, candidates: Sequence[Candidate], first: int) -> Price:
        price = Price(0, 0.0)
        if self.objective is None:
            return price
        for candidate in candidates:
            done = self._scored.get(candidate.key(self.number, self.parent), 0)
            calls = self.objective.calls_for(candidate, first)[done:]
            price += self.pricer.local_calls([(c.prompt, c.response) for c in calls],
                                             self.objective.head_words(self.program, candidate), self.chosen)
        return price

    def settings(self, candidate: Candidate) -> Any:
        assert self.settings_objective is not None, "a settings candidate without a settings objective"
        return self.settings_objective.score(self.program, candidate)

    def minibatch(self, candidate: Candidate) -> Scored | None:
        self.priced += self.minibatch_price(candidate)
        result = self.runner.run([self._job("minibatch", candidate)], self.run_job)
        data = next(iter(result.values()))
        if "budget" in data:
            self.cut = self.cut or str(data["budget"])
            return None
        rejected = Decision.recorded(Status(data["status"]), data["why"]) if data.get("status") else None
        return Scored(data.get("local"), rejected, data.get("minibatch"), data.get("replayed") or {})

    def minibatch_price(self, candidate: Candidate) -> Price:
        per = self.pricer.per_call(self.chosen)
        calls = self.plan.minibatch_ops.get(self.chosen, 0) + len(self.plan.local_cases)
        return Price(calls, None if per is None else calls * per)

    def minibatch_rule(self, score: float) -> Decision:
        return self.ctx.acceptance.on_minibatch(self.plan.minibatch_score, score)

    def fits(self, price: Price) -> bool:
        """Whether the round affords `price` now, its validation reserved (no side effect: a policy sizing its work)."""
        return self.allowance is None or not self.allowance.shortfall(price)

    def shortfall(self, price: Price) -> str:
        """Why the round cannot afford `price` now ("" when it can). Past the budget or the clock the round is cut
        (`cut`: a resumed run finishes it); past its own share, the work is only skipped."""
        if self.allowance is None:
            return ""
        if why := self.allowance.shortfall(price, reserved=False, share=False):
            self.cut = self.cut or why
            return why
        return self.allowance.shortfall(price)

    def validate(self, candidate: Candidate) -> Validation | Decision:
        price = self.pricer.validation(self.chosen, settings=candidate.sets_settings)
        if self.allowance is not None and (why := self.allowance.shortfall(price, reserved=False, share=False)):
            if not self.cut and not self.validations:  # the budget left cannot validate it: a resumed run does
                self.cut, self.cut_in = why, RoundPhase.VALIDATION
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=why)
        if self.allowance is not None and self.validations and (why := self.allowance.shortfall(price, reserved=False)):
            # the reserve paid for the first: another must fit the round's share, or it would starve the rounds after
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why} (a second validation)", why=why)
        progress.stage(f"round {self.number}: validation", total=evaluation_steps(self.ctx.valset))
        context = self.phases.run(RoundPhase.VALIDATION, price) if self.phases is not None else contextlib.nullcontext()
        with context:
            results = self.runner.run(self._val_jobs(candidate), self.run_job)
        self.validations += 1
        if self.allowance is not None:
            self.allowance.reserve = Price()  # spent: a second validation must fit in what is left
        if cut := next((str(r["budget"]) for r in results.values() if "budget" in r), ""):
            if not self.cut:
                self.cut, self.cut_in = cut, RoundPhase.VALIDATION
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=cut)
        shares = [{"correct": r["correct"], "cases": r["cases"]} for r in results.values()]
        replayed = next(iter(results.values())).get("replayed") or {}
        return Validation(joined_accuracy(shares), replayed)

    def decide(self, accuracy: float) -> Decision:
        return self.ctx.acceptance.on_valset(self.current_val, accuracy)

    # jobs ----------------------------------------------------------------------------------------------------
    def _job(self, kind: str, candidate: Candidate, **attrs: Any) -> Job:
        key = f"{kind}:{candidate.key(self.number, self.parent)}" + "".join(f":{v}" for v in attrs.values())
        return Job(key, {"round": self.number, "parent": self.parent, "job": kind,
                         "candidate": candidate.to_dict(), **attrs})

    def _val_jobs(self, candidate: Candidate) -> list[Job]:
        """A validation as jobs: one per valset conversation where other workers may share it, else one."""
        job = self._job("val", candidate)
        parts = conversations(self.ctx.valset)
        if not self.runner.shared or len(parts) < 2:
            return [job]
        return [Job(f"{job.key}@{part}", {**job.attrs, "conversation": part}) for part in parts]

    def accepts(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a shared job is one of this round's, from this program."""
        return attrs.get("round") == self.number and attrs.get("parent") == self.parent

    def run_job(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """A job of this round run here (its JSON-ready result: what crosses to another worker)."""
        if not self.accepts(attrs):
            raise MemtraceError(f"job {attrs.get('key')} is not one of round {self.number} from this program")
        candidate = Candidate.from_dict(attrs["candidate"])
        if attrs["job"] == "local":
            assert self.objective is not None
            progress.stage(f"round {self.number}: candidates on {attrs['first']} local calls")
            return {"local": self.objective.score(self.program, candidate, int(attrs["first"])).to_dict()}
        if attrs["job"] == "minibatch":
            progress.stage(f"round {self.number}: candidates on the minibatch")
            return self._minibatch_job(candidate)
        cases = [c for c in self.ctx.valset if attrs.get("conversation") in (None, c.conversation_key)]
        result = self.ctx.adapter.evaluate(candidate.apply(self.program), cases)
        self.pricer.validated(self.chosen, result, settings=candidate.sets_settings)
        return {"correct": sum(c.correct for c in result.cases), "cases": len(result.cases),
                "replayed": replayed_ops(result, "full").to_dict()}

    def _minibatch_job(self, candidate: Candidate) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.check is not None and not candidate.sets_settings:
            result, decision = self.check.check(self.program, candidate)
            out["local"] = result.to_dict()
            if not decision.ok:
                return {**out, "status": decision.status.value, "why": decision.why}
        reuse = None
        if self.plan.evidence_ops and candidate.predictor == self.chosen:
            parent = self.ctx.adapter.evaluate(self.program, self.minibatch_cases)  # the memo serves it
            reuse = scoped_reuse(parent, candidate.apply(self.program), self.chosen, self.plan.evidence_ops) or None
        run = self.ctx.adapter.evaluate(candidate.apply(self.program), self.minibatch_cases, reuse=reuse)
        return {**out, "minibatch": run.accuracy, "replayed": replayed_ops(run, "evidence" if reuse else "full").to_dict()}
