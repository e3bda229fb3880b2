"""The gate chain over a round plan's candidates, and the round's choice among them.

Each candidate is a `Trial`: its study trial, its scores and the `Decision` it ends with. In order: the local
check (an upstream predictor's blamed calls re-run), the minibatch, then the valset for the best rewrite and
for the demos candidate (a minibatch of six or eight ranks candidates of one kind only), the rewrite joined with
the demos when both pass; at most one candidate is taken. A candidate the calls left cannot carry is not
started; one that passed the minibatch but cannot be validated stays unfinished in the study (`cut`), and a
resumed run validates it from its minibatch score.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dspy

from memtrace_opt import progress
from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.estimate import evaluation_steps
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.program_io import instructions_digest, instructions_of
from memtrace_opt.optimizers.evaluation.scoped import ReplayedOps, replayed_ops, scoped_reuse
from memtrace_opt.optimizers.gates.decision import Decision, Status
from memtrace_opt.optimizers.gates.local_check import LocalCase, LocalCheckGate
from memtrace_opt.optimizers.gates.minibatch import MinibatchGate
from memtrace_opt.optimizers.gates.validation import ValidationGate
from memtrace_opt.optimizers.loop.crew import (
    Job,
    conversation_share,
    conversations,
    joined_accuracy,
    worker_name,
)
from memtrace_opt.optimizers.loop.plan import RoundPlan, calls_to_rerun
from memtrace_opt.optimizers.loop.records import CandidateRecord
from memtrace_opt.optimizers.loop.study import TrialHandle
from memtrace_opt.optimizers.sources.base import Candidate
from memtrace_opt.optimizers.sources.combination import combine

if TYPE_CHECKING:
    from memtrace_opt.optimizers.loop.rounds import RoundContext

__all__ = ["RoundTested", "RoundTrials", "Trial"]

log = logging.getLogger(__name__)


@dataclass
class Trial:
    """One candidate's way through the round's gates: its study trial, its scores, the decision it ended with.
    `restored` holds the attributes of a trial a run before this one finished: its decision stands."""

    number: int  # 1-based, as the log and the reasons name it
    candidate: Candidate
    key: str
    restored: Mapping[str, Any] | None = None
    handle: TrialHandle | None = None
    local: dict[str, Any] | None = None
    minibatch: float | None = None
    val: float | None = None
    decision: Decision | None = None
    cut: bool = False  # passed the minibatch, not validated for want of calls: resumed from its score
    replayed: dict[str, Any] = field(default_factory=dict)  # which calls its evaluations re-ran (`scoped.py`)

    @classmethod
    def restore(cls, number: int, candidate: Candidate, key: str, done: Mapping[str, Any]) -> Trial:
        accepted = bool(done.get("accepted"))
        status = Status(done["status"]) if done.get("status") else Status.ACCEPTED if accepted else Status.REJECTED
        rejected_locally = bool(done.get("local_rejected"))
        return cls(number, candidate, key, restored=done, local=done.get("local"), replayed=dict(done.get("replayed") or {}),
                   minibatch=None if rejected_locally else float(done.get("minibatch_score") or 0.0),
                   val=done.get("val_score"), decision=Decision.recorded(status, str(done.get("why", ""))))

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.status is Status.ACCEPTED

    def record(self) -> CandidateRecord:
        candidate, decision = self.candidate, self.decision
        minibatch = self.restored.get("minibatch_score") if self.restored is not None else self.minibatch
        return CandidateRecord.of(candidate, minibatch, self.val, self.accepted, decision.why if decision else "",
                                  self.local, self.replayed)

    def close(self) -> None:
        """The trial's end in the study: COMPLETE with a valset score, else PRUNED (a cut one stays unfinished:
        a resumed run validates it from its minibatch score)."""
        if self.handle is None or self.restored is not None or self.handle.state != "running":
            return
        why, status = (self.decision.why, self.decision.status.value) if self.decision else ("", "")
        if self.val is not None:
            self.handle.validated(self.val, accepted=self.accepted, why=why, status=status)
        elif not self.cut:
            self.handle.pruned(accepted=False, why=why, status=status)


@dataclass
class RoundTested:
    """The candidates' records, the one taken (None: the round changed nothing), the valset accuracy after the
    round and whether the budget cut it short."""

    records: list[CandidateRecord]
    taken: Candidate | None
    val: float
    budget_hit: bool


class RoundTrials:
    """The gate chain over a plan's candidates and the round's choice (see the module docstring)."""

    def __init__(self, ctx: RoundContext, plan: RoundPlan, program: dspy.Module, current_val: float,
                 minibatch: Sequence[CaseRef]) -> None:
        self.ctx, self.plan, self.program, self.current_val = ctx, plan, program, current_val
        self.number, self.chosen = plan.round, plan.chosen_predictor or ""
        self.parent = instructions_digest(instructions_of(program))
        checks = [LocalCase.from_dict(case) for case in plan.local_cases] if ctx.local_check else []
        self.local_gate = LocalCheckGate(checks, ctx.evaluator.task_lm) if checks else None
        self.minibatch_gate = MinibatchGate(ctx.evaluator, minibatch, plan.minibatch_score, ctx.acceptance)
        self.validation_gate = ValidationGate(ctx.evaluator, ctx.valset, current_val, ctx.acceptance, ctx.budget)
        self.minibatch_calls = calls_to_rerun(plan.minibatch_ops, self.chosen)
        # a candidate's validation re-runs the valset questions its minibatch run did not answer already (the memo
        # keeps those): with a valset that holds training questions (a caller may pass the trainset), they overlap
        shared = {case.case_id for case in minibatch} & {case.case_id for case in ctx.valset}
        size = len(ctx.valset)
        self.val_calls = ctx.validation_calls(self.chosen) * (size - len(shared)) // max(1, size)
        self.trials: list[Trial] = []
        self.validated: dict[str, dict[str, Any]] = {}  # shared validations' results by job key
        self.budget_hit = False
        self.stack = contextlib.ExitStack()

    def run(self) -> RoundTested:
        if not self.plan.chosen_predictor or not self.plan.candidates:
            return RoundTested([], None, self.current_val, False)
        with self.stack:
            self._through_minibatch()
            best, combined = self._choose()
            for trial in self.trials:
                trial.close()
            records = [trial.record() for trial in self.trials]
            if combined is not None:
                records.append(combined.record())
        taken = best or (combined if combined is not None and combined.accepted else None)
        val = self.current_val if taken is None or taken.val is None else float(taken.val)
        return RoundTested(records, None if taken is None else taken.candidate, val, self.budget_hit)

    # the local check and the minibatch --------------------------------------------------------------------
    def _through_minibatch(self) -> None:
        ctx = self.ctx
        shared = self._shared_minibatches() if ctx.crew is not None else {}
        for i, candidate in enumerate(self.plan.candidates):
            key = candidate.key(self.number, self.parent)
            done = ctx.ledger.finished(key)
            if done is not None:
                self.trials.append(Trial.restore(i + 1, candidate, key, done))
                continue
            prior = ctx.ledger.partial_score(key)
            needed = self.minibatch_calls + self.val_calls
            outcome = shared.get(_job_key("minibatch", key))
            if prior is None and (not ctx.budget.can_afford(needed) if ctx.crew is None
                                  else outcome is None or "budget" in outcome):
                # what is left cannot carry this candidate through its minibatch and a validation: the calls go
                # to validating the candidates scored so far, and the round resumes with a larger budget
                log.info("round %d: candidates from %d on not evaluated: %s LM calls left, at least %d needed",
                         self.number, i + 1, ctx.budget.left(), needed)
                self.budget_hit = True
                return
            trial = Trial(i + 1, candidate, key)
            progress.stage(f"round {self.number}: candidate {i + 1}/{len(self.plan.candidates)}")
            attrs = {"round": self.number, "predictor": self.chosen, "candidate": i, "instruction": candidate.instruction,
                     "origin": candidate.origin, **({"demos": len(candidate.demos)} if candidate.demos is not None else {})}
            trial.handle = self.stack.enter_context(ctx.ledger.trial(key, attrs))
            self.trials.append(trial)
            if prior is not None:
                trial.minibatch = prior
                trial.handle.minibatch(prior)
            else:
                self._record(trial, outcome if outcome is not None else self.evaluate(candidate))

    def evaluate(self, candidate: Candidate) -> dict[str, Any]:
        """`candidate` through the local check (an upstream predictor) and the minibatch: its `local` result,
        and `minibatch_score` with the calls it `replayed`, or `local_rejected` with the decision (`why`,
        `status`). JSON-ready: another worker may have run it (`crew.py`)."""
        out: dict[str, Any] = {"worker": self.ctx.crew.worker if self.ctx.crew is not None else worker_name()}
        if self.local_gate is not None:
            result, decision = self.local_gate.check(self.program, candidate)
            out.update(local=result.to_dict(), local_calls=result.lm_calls, local_why=decision.why)
            if not decision.ok:
                return {**out, "local_rejected": True, "why": decision.why, "status": decision.status.value}
        score, replayed = self.minibatch_gate.run(self.program, candidate, self._reuse(candidate))
        return {**out, "minibatch_score": score, "score": score, "replayed": {"minibatch": replayed.to_dict()}}

    def _record(self, trial: Trial, outcome: Mapping[str, Any]) -> None:
        """What `evaluate` found for `trial`, in its study trial and in the log."""
        handle = trial.handle
        assert handle is not None
        handle.set("worker", outcome.get("worker"))
        if outcome.get("local") is not None:
            trial.local = dict(outcome["local"])
            handle.set("local", trial.local)
            log.info("round %d candidate %d for %s: %s (%d LM calls)", self.number, trial.number, self.chosen,
                     outcome.get("local_why", ""), outcome.get("local_calls", 0))
        if outcome.get("local_rejected"):
            trial.decision = Decision.recorded(Status(outcome["status"]), str(outcome["why"]))
            handle.pruned(accepted=False, why=outcome["why"], local_rejected=True, status=outcome["status"])
            return
        trial.minibatch = float(outcome["minibatch_score"])
        trial.replayed.update(outcome.get("replayed") or {})
        handle.set("replayed", trial.replayed)
        handle.minibatch(trial.minibatch)
        demos = trial.candidate.demos
        log.info("round %d candidate %d for %s%s: minibatch %.3f (current %.3f)", self.number, trial.number, self.chosen,
                 f" (+{len(demos)} demos)" if demos is not None else "", trial.minibatch, self.plan.minibatch_score)

    # work shared with other workers (`crew.py`) -------------------------------------------------------------
    def _job(self, kind: str, indices: Sequence[int], key: str) -> Job:
        return Job(_job_key(kind, key), {"round": self.number, "parent": self.parent, "job": kind,
                                         "candidates": list(indices)})

    def accepts(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a shared job is one of this round's, from this program."""
        return attrs.get("round") == self.number and attrs.get("parent") == self.parent

    def run_job(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """A shared job of this round (`_job`), run here: a candidate's `evaluate`, or a validation's score."""
        if not self.accepts(attrs):
            raise MemtraceError(f"job {attrs.get('key')} is not one of round {self.number} from this program")
        parts = [self.plan.candidates[i] for i in attrs["candidates"]]
        candidate = parts[0] if len(parts) == 1 else combine(parts[0], parts[1])
        if attrs["job"] == "minibatch":
            return self.evaluate(candidate)
        worker = self.ctx.crew.worker if self.ctx.crew is not None else worker_name()
        part = attrs.get("conversation")
        if part is None:  # the whole valset
            val, _, replayed = self.validation_gate.run_recorded(self.program, candidate)  # the leader decides
            return {"val_score": val, "score": val, "replayed": replayed.to_dict(), "worker": worker}
        result, share = conversation_share(self.ctx.evaluator, candidate.apply(self.program), self.ctx.valset, part)
        return {**share, "worker": worker, "replayed": replayed_ops(result, "full").to_dict()}

    def _shared_minibatches(self) -> dict[str, dict[str, Any]]:
        """The candidates not evaluated yet, through the other workers too; as many as the calls left carry."""
        ctx = self.ctx
        jobs: list[Job] = []
        for i, candidate in enumerate(self.plan.candidates):
            key = candidate.key(self.number, self.parent)
            if ctx.ledger.finished(key, wait_seconds=0) is not None or ctx.ledger.partial_score(key) is not None:
                continue
            if not ctx.budget.can_afford((len(jobs) + 1) * self.minibatch_calls + self.val_calls):
                break
            jobs.append(self._job("minibatch", [i], key))
        assert ctx.crew is not None
        return ctx.crew.run(jobs, self.run_job) if jobs else {}

    def _val_jobs(self, indices: Sequence[int], key: str) -> list[Job]:
        """A validation as shared jobs: one per valset conversation, so that the workers split it."""
        parts = conversations(self.ctx.valset)
        job = self._job("val", indices, key)
        if len(parts) < 2:
            return [job]
        return [Job(f"{job.key}@{conversation}", {**job.attrs, "conversation": conversation}) for conversation in parts]

    def _joined(self, key: str, results: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
        """A validation's result from the results of its jobs (`_val_jobs`); None when some are missing."""
        whole = results.get(_job_key("val", key))
        if whole is not None:
            return whole
        parts = [result for job_key, result in results.items() if job_key.startswith(_job_key("val", key) + "@")]
        if not parts:
            return None
        if cut := next((part for part in parts if "budget" in part), None):
            return cut
        by_op: dict[str, int] = {}
        rerun: dict[str, list[str]] = {}
        for part in parts:
            for op, count in part["replayed"]["rerun_by_op"].items():
                by_op[op] = by_op.get(op, 0) + count
            rerun.update(part["replayed"]["rerun"])
        replayed = ReplayedOps("full", dict(sorted(by_op.items())), rerun, sum(p["replayed"]["served"] for p in parts))
        return {"val_score": joined_accuracy(parts), "replayed": replayed.to_dict(), "worker": ",".join(sorted({str(p["worker"]) for p in parts}))}

    def _shared_validations(self, wanted: Sequence[Trial], pair: tuple[Trial, Trial] | None) -> None:
        """The validations the choice needs first (`wanted`, and the rewrite with the demos of `pair`), run at
        once through the other workers too, each split by conversation; as many as the calls left carry."""
        ctx, cost = self.ctx, 0
        jobs: list[Job] = []
        for trial in wanted:
            cost += self.val_calls
            if ctx.budget.can_afford(cost):
                jobs += self._val_jobs([trial.number - 1], trial.key)
        if pair is not None:
            candidate = combine(pair[0].candidate, pair[1].candidate)
            key = candidate.key(self.number, self.parent)
            cost += ctx.validation_calls(self.chosen)
            if ctx.ledger.finished(key, wait_seconds=0) is None and ctx.budget.can_afford(cost):
                jobs += self._val_jobs([pair[0].number - 1, pair[1].number - 1], key)
        assert ctx.crew is not None
        if jobs:
            self.validated.update(ctx.crew.run(jobs, self.run_job))

    def _valset_score(self, key: str, indices: Sequence[int], candidate: Candidate,
                      calls: int) -> dict[str, Any] | Decision:
        """The candidate's validation (`val_score`, the calls it `replayed`, the `worker` that ran it), or the
        decision not to validate it (fewer than `calls` LM calls left)."""
        result = self._joined(key, self.validated)
        if result is None:
            refused = self.validation_gate.unaffordable(calls)
            if refused is not None:
                return refused
            progress.stage(f"round {self.number}: validation", total=evaluation_steps(self.ctx.valset))
            if self.ctx.crew is None:
                result = self.run_job(self._job("val", indices, key).attrs)
            else:
                result = self._joined(key, self.ctx.crew.run(self._val_jobs(indices, key), self.run_job))
                assert result is not None
        if "budget" in result:
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=result["budget"])
        return result

    # the valset and the choice ------------------------------------------------------------------------------
    def _choose(self) -> tuple[Trial | None, Trial | None]:
        """The best rewrite and the demos candidate each go on: a minibatch of six or eight ranks candidates of
        one kind, but in a long_context run it put a rewrite (0.333) above two demos (0.167) that would have
        gained two validation questions where the rewrite gained one. When both pass the minibatch, the rewrite
        is validated with the demos, the demos alone beside it. Returns the trial taken among the plan's
        candidates and the combination's trial (None when there is none)."""
        scored = sorted((t for t in self.trials if t.minibatch is not None), key=lambda t: (-(t.minibatch or 0.0), t.number))
        leaders: dict[bool, Trial] = {}
        for trial in scored:
            leaders.setdefault(trial.candidate.sets_demos, trial)
        contenders = sorted(leaders.values(), key=lambda t: (-(t.minibatch or 0.0), t.number))
        gates = {t.number: self.minibatch_gate.decide(t.minibatch or 0.0) for t in contenders}
        together = len(leaders) == 2 and all(gate.ok for gate in gates.values())
        if self.ctx.crew is not None:  # what the choice validates first runs at once, spread over the workers
            decided_before = any(t.restored is not None and t.accepted for t in contenders)
            self._shared_validations(
                [t for t in contenders if t.restored is None and gates[t.number].ok and not (together and t is leaders[False])],
                (leaders[False], leaders[True]) if together and not decided_before else None)
        for trial in scored:
            if trial.restored is not None:
                continue
            if trial not in contenders:
                leader = leaders[trial.candidate.sets_demos]
                trial.decision = Decision.of(
                    Status.OUTRANKED, "not validated: candidate {leader} goes first on the minibatch ({first:.3f}; "
                    "this one {this:.3f})", leader=leader.number, first=leader.minibatch, this=trial.minibatch)
                continue
            trial.decision = gates[trial.number]
            if together and trial is leaders[False]:
                trial.decision = Decision.of(Status.DEFERRED, "not validated alone: validated with the demos of "
                                             "candidate {demos}", demos=leaders[True].number)
            elif trial.decision.ok:
                self._validate(trial)
        passed = [t for t in contenders if t.accepted]
        decided = [t for t in passed if t.restored is not None]  # accepted before the run was cut: it stands
        best = decided[0] if decided else max(passed, key=lambda t: (t.val or 0.0, t.minibatch or 0.0, -t.number),
                                              default=None)
        combined = None
        if together and not decided:
            combined = self._combination(leaders[False], leaders[True], best.val if best is not None else None)
            # cut for want of calls after the demos passed: the round stands with the demos, and the next round
            # proposes its rewrites on top of them; before they passed, the round resumes
            if best is None and combined.decision is not None and combined.decision.status is Status.NOT_VALIDATED:
                self.budget_hit = True
            lone = leaders[False]
            if (lone.restored is None and best is None and combined.val is not None and not combined.accepted):
                self._validate(lone)  # neither the demos nor the two together passed: the rewrite may do better alone
                if lone.accepted:
                    passed, best = [lone], lone
        if combined is not None and combined.accepted:
            for trial in passed:
                if trial.restored is None:
                    trial.decision = Decision.of(
                        Status.OUTRANKED, "passed, but the rewrite of candidate {rewrite} with these demos is taken "
                        "(valset {joined:.3f}; these demos alone {alone:.3f})", rewrite=leaders[False].number,
                        joined=combined.val or 0.0, alone=trial.val or 0.0)
            best = None
        for trial in passed:  # two passed: the better on the valset is taken
            if best is not None and trial is not best and trial.restored is None:
                trial.decision = Decision.of(
                    Status.OUTRANKED, "passed, but candidate {best} is taken (valset {best_val:.3f}, minibatch "
                    "{best_mb:.3f}; this one {val:.3f}, {mb:.3f})", best=best.number, best_val=best.val or 0.0,
                    best_mb=best.minibatch or 0.0, val=trial.val or 0.0, mb=trial.minibatch or 0.0)
        return best, combined

    def _reuse(self, candidate: Candidate) -> dict[str, dict[str, dict[str, Any]]] | None:
        """What a scoped minibatch replay of `candidate` serves from the current program's run (None: a full
        replay): the plan's scope is set for a write-path predictor only (`scoped.py`). A round resumed by a later
        run has no traced minibatch of the current program at hand: its candidates replay in full. A worker sharing
        the round (`crew.py`) traces it again from the shared memo, so that it scores as the planner would."""
        if not self.plan.evidence_ops or candidate.predictor != self.chosen:
            return None
        if self.number not in self.ctx.minibatch_runs and self.ctx.crew is not None:
            self.ctx.minibatch_runs[self.number] = self.ctx.evaluator.evaluate(self.program, self.minibatch_gate.cases)
        parent = self.ctx.minibatch_runs.get(self.number)
        if parent is None:
            return None
        return scoped_reuse(parent, candidate.apply(self.program), self.chosen, self.plan.evidence_ops) or None

    def _validate(self, trial: Trial) -> None:
        """`trial` through the validation gate, or marked cut when the calls left cannot take it there."""
        got = self._valset_score(trial.key, [trial.number - 1], trial.candidate, self.val_calls)
        if isinstance(got, Decision):
            trial.decision, trial.cut, self.budget_hit = got, True, True
            return
        trial.val, trial.replayed["val"] = float(got["val_score"]), dict(got["replayed"])
        trial.decision = self.validation_gate.decide(trial.val)
        if trial.handle is not None:
            trial.handle.set("replayed", trial.replayed)
            trial.handle.set("val_worker", got.get("worker"))
        log.info("round %d candidate %d for %s: %s", self.number, trial.number, self.chosen, trial.decision.why)

    def _combination(self, rewrite: Trial, demos: Trial, rival: float | None) -> Trial:
        """The rewrite with the demos, validated: taken when it passes the acceptance rule and, if the demos alone
        passed too (valset `rival`), beats them. A run cut short and resumed finds its decision in the study."""
        candidate = combine(rewrite.candidate, demos.candidate)
        key = candidate.key(self.number, self.parent)
        done = self.ctx.ledger.finished(key)
        if done is not None:
            return Trial.restore(0, candidate, key, done)
        trial = Trial(0, candidate, key)
        # all of the valset's calls: no minibatch run answered any under this prompt
        got = self._valset_score(key, [rewrite.number - 1, demos.number - 1], candidate,
                                 self.ctx.validation_calls(self.chosen))
        if isinstance(got, Decision):  # no study trial: a resumed run tries it
            trial.decision = got
            return trial
        handle = self.stack.enter_context(self.ctx.ledger.trial(key, {
            "round": self.number, "predictor": self.chosen, "instruction": candidate.instruction,
            "demos": len(candidate.demos or ()), "origin": candidate.origin}))
        val, trial.replayed["val"] = float(got["val_score"]), dict(got["replayed"])
        handle.set("replayed", trial.replayed)
        handle.set("worker", got.get("worker"))
        decision = self.validation_gate.decide(val)
        if decision.ok and rival is not None:
            decision = (decision.also(", and above the demos alone ({rival:.3f})", rival=rival) if val > rival else
                        Decision.of(Status.REJECTED, "rejected: valset {val:.3f} not above the demos alone "
                                    "({rival:.3f})", val=val, rival=rival))
        trial.val, trial.decision = val, decision
        handle.validated(val, accepted=trial.accepted, why=decision.why, status=decision.status.value)
        log.info("round %d: the rewrite with the demos for %s: %s", self.number, self.chosen, decision.why)
        return trial


def _job_key(kind: str, candidate_key: str) -> str:
    return f"{kind}:{candidate_key}"
