"""The trials of a round plan's candidates: each candidate's way through the objectives, run as jobs.

Each candidate is a `Trial`: its study trial, its scores and the `Decision` it ends with. `RoundTrials` runs the
jobs a choice policy (`choice.py`) asks for, through the round's runner (`runner.py`: this process, or the workers
sharing the study) and records each result in the study; the policy decides what goes on and what is taken:

- `LocalSearch` (the default): every candidate scored on the local objective (`gates/local_objective.py`), the
  best that beat the seed by the margin validated;
- `MinibatchFirst` (`--no-local-objective`): the local check, the minibatch, then the valset for the best rewrite
  and for the best of each demo-setting source, the rewrite joined with the demos when both pass.

A candidate the calls left cannot carry is not started; one that passed its ranking objective but cannot be
validated stays unfinished in the study (`cut`), and a resumed run validates it from its recorded score. A job
the budget stopped is a `TrialOutcome` with `cut`: the round then stops where it stands (`RoundTested.cut`, and
`cut_in`: scoring the candidates or validating them, the phase the first cut came in).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

from memtrace_opt import progress
from memtrace_opt.attribution import Verdict
from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.core.program_io import instructions_digest, instructions_of
from memtrace_opt.optimizers.evaluation.examples import CaseRef, evaluation_steps
from memtrace_opt.optimizers.evaluation.local_set import LocalSet
from memtrace_opt.optimizers.evaluation.scoped import ReplayedOps, replayed_ops, scoped_reuse
from memtrace_opt.optimizers.gates.local_check import LocalCase, LocalCheckGate
from memtrace_opt.optimizers.gates.local_objective import LocalGate, LocalObjective
from memtrace_opt.optimizers.gates.minibatch import MinibatchGate
from memtrace_opt.optimizers.gates.settings import SettingsGate, SettingsObjective
from memtrace_opt.optimizers.gates.validation import ValidationGate
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.crew import Job, conversation_share, conversations, joined_accuracy
from memtrace_opt.optimizers.loop.interrupted import RoundPhase
from memtrace_opt.optimizers.loop.outcome import Share, TrialOutcome
from memtrace_opt.optimizers.loop.plan import RoundPlan, calls_to_rerun
from memtrace_opt.optimizers.loop.records import CandidateRecord
from memtrace_opt.optimizers.loop.study import StudyReplyBook, TrialHandle
from memtrace_opt.optimizers.sources.combination import combine

__all__ = ["ChoicePolicy", "RoundTested", "RoundTrials", "Trial"]

log = logging.getLogger(__name__)


@dataclass
class Trial:
    """One candidate's way through the round's objectives: its study trial, its scores, the decision it ended
    with. `restored` holds the attributes of a trial a run before this one finished: its decision stands."""

    number: int  # 1-based, as the log and the reasons name it
    candidate: Candidate
    key: str
    restored: Mapping[str, Any] | None = None
    handle: TrialHandle | None = None
    local: dict[str, Any] | None = None
    minibatch: float | None = None
    val: float | None = None
    decision: Decision | None = None
    cut: bool = False  # passed its ranking objective, not validated for want of calls: resumed from its score
    replayed: dict[str, Any] = field(default_factory=dict)  # which calls its evaluations re-ran (`scoped.py`)
    parts: tuple[int, ...] = ()  # the plan's candidates it is made of (a combination: two)

    @classmethod
    def restore(cls, number: int, candidate: Candidate, key: str, done: Mapping[str, Any]) -> Trial:
        accepted = bool(done.get("accepted"))
        status = Status(done["status"]) if done.get("status") else Status.ACCEPTED if accepted else Status.REJECTED
        rejected_locally = bool(done.get("local_rejected"))
        return cls(number, candidate, key, restored=done, local=done.get("local"), replayed=dict(done.get("replayed") or {}),
                   minibatch=None if rejected_locally or done.get("minibatch_score") is None else float(done["minibatch_score"]),
                   val=done.get("val_score"), decision=Decision.recorded(status, str(done.get("why", ""))))

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.status is Status.ACCEPTED

    @property
    def local_gain(self) -> int | None:
        """Targets the candidate gained on the local objective, net (None: not scored on it)."""
        return None if self.local is None or "fixed" not in self.local or "targets" not in self.local \
            else int(self.local["fixed"]) - int(self.local["lost"])

    def record(self) -> CandidateRecord:
        candidate, decision = self.candidate, self.decision
        minibatch = self.restored.get("minibatch_score") if self.restored is not None else self.minibatch
        return CandidateRecord.of(candidate, minibatch, self.val, self.accepted, decision.why if decision else "",
                                  self.local, self.replayed)

    def close(self) -> None:
        """The trial's end in the study: COMPLETE with a valset score, else PRUNED (a cut one stays unfinished:
        a resumed run validates it from its recorded score)."""
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
    round, whether the budget cut it short and in which phase (None: it was not cut)."""

    records: list[CandidateRecord]
    taken: Candidate | None
    val: float
    cut: bool
    cut_in: RoundPhase | None = None


class ChoicePolicy(Protocol):
    """How a round chooses among its candidates (`choice.py`): `choose()` returns the trial taken and the trials it
    made beyond the plan's candidates."""

    def choose(self) -> tuple[Trial | None, list[Trial]]: ...


class RoundTrials:
    """The jobs of a round's trials and their study records (module doc); `run()` applies the choice policy."""

    def __init__(self, ctx: RoundContext, plan: RoundPlan, program: dspy.Module, current_val: float,
                 minibatch: Sequence[CaseRef]) -> None:
        self.ctx, self.plan, self.program, self.current_val = ctx, plan, program, current_val
        self.number, self.chosen = plan.round, plan.chosen_predictor or ""
        self.parent = instructions_digest(instructions_of(program))
        self.runner = ctx.runner
        checks = [LocalCase.from_dict(case) for case in plan.local_cases] if ctx.local_check else []
        self.local_check = LocalCheckGate(checks, ctx.evaluator.task_lm) if checks else None
        local_set = LocalSet.from_dict(plan.local_set) if plan.local_set else None
        self.local = None if local_set is None or not local_set.calls else LocalGate(
            LocalObjective(local_set, program, ctx.evaluator.task_lm,
                           StudyReplyBook(ctx.ledger, f"local:{self.number}:{self.parent}"),
                           threads=ctx.evaluator.threads), ctx.local_margin)
        training = ctx.training(ctx.left_out(self.number, map(Verdict.from_dict, plan.verdicts)))  # less GoldError
        self.settings = None if ctx.search is None or not any(c.sets_settings for c in plan.candidates) else SettingsGate(
            SettingsObjective(self.chosen, ctx.evaluator, training, program,
                              StudyReplyBook(ctx.ledger, f"settings:{self.number}"), cost_limit=ctx.search.cost_limit),
            ctx.local_margin)
        self.minibatch_gate = MinibatchGate(ctx.evaluator, minibatch, plan.minibatch_score, ctx.acceptance)
        self.validation_gate = ValidationGate(ctx.evaluator, ctx.valset, current_val, ctx.acceptance, ctx.budget)
        self.minibatch_calls = calls_to_rerun(plan.minibatch_ops, self.chosen)
        self.local_calls = len(local_set.calls) if local_set is not None else 0
        # a candidate's validation re-runs the valset questions its minibatch run did not answer already (the memo
        # keeps those): with a valset that holds training questions (a caller may pass the trainset), they overlap
        shared = {case.case_id for case in minibatch} & {case.case_id for case in ctx.valset}
        size = len(ctx.valset)
        self.val_calls = ctx.validation_calls(self.chosen) * (size - len(shared)) // max(1, size)
        self.trials: list[Trial] = []
        self.validated: dict[str, TrialOutcome] = {}  # validations run ahead of the choice, by job key
        self.cut = False
        self.phase = RoundPhase.CANDIDATES  # where the round is: scoring candidates, or validating them
        self.cut_in: RoundPhase | None = None  # the phase the budget first cut it in
        self.stack = contextlib.ExitStack()

    def run(self, policy: Callable[[RoundTrials], ChoicePolicy]) -> RoundTested:
        """The round's choice under `policy` (`choice.policy_for`), its trials closed in the study."""
        if not self.plan.chosen_predictor or not self.plan.candidates:
            return RoundTested([], None, self.current_val, False)
        with self.stack:
            taken, extra = policy(self).choose()
            for trial in [*self.trials, *extra]:
                trial.close()
            records = [trial.record() for trial in self.trials] + [t.record() for t in extra]
        val = self.current_val if taken is None or taken.val is None else float(taken.val)
        return RoundTested(records, None if taken is None else taken.candidate, val, self.cut, self.cut_in)

    def cut_short(self) -> None:
        """The budget stopped (or would not start) work of the round: it stops where it stands, cut in `phase`."""
        self.cut = True
        self.cut_in = self.cut_in or self.phase

    # scoring the plan's candidates --------------------------------------------------------------------------
    def score_candidates(self, kind: str, per_candidate: int) -> None:
        """Every candidate of the plan through `kind` ("minibatch": the local check and the minibatch; "local":
        the local objective) as jobs, as many as the calls left carry (each `per_candidate` calls and a
        validation after); candidates a run before this one scored are restored. Fills `trials`."""
        ctx = self.ctx
        self.phase = RoundPhase.CANDIDATES
        jobs: list[Job] = []
        pending: list[Trial] = []
        for i, candidate in enumerate(self.plan.candidates):
            key = candidate.key(self.number, self.parent)
            finished = ctx.ledger.finished(key)
            if finished is not None:
                self.trials.append(Trial.restore(i + 1, candidate, key, finished))
                continue
            prior = ctx.ledger.partial(key)
            if prior is None and not ctx.budget.can_afford((len(jobs) + 1) * per_candidate + self.val_calls):
                # what is left cannot carry this candidate through its scoring and a validation: the calls go to
                # validating the candidates scored so far, and the round resumes with a larger budget
                log.info("round %d: candidates from %d on not evaluated: %s LM calls left, at least %d needed",
                         self.number, i + 1, ctx.budget.left(), per_candidate + self.val_calls)
                self.cut_short()
                break
            trial = self.open_trial(Trial(i + 1, candidate, key, parts=(i,)))
            if prior is not None:
                self.restore_partial(trial, prior)
            else:
                jobs.append(self.job(kind, [i], key))
                pending.append(trial)
        by_key = {job.key: trial for job, trial in zip(jobs, pending, strict=True)}

        def done(key: str, result: dict[str, Any]) -> None:  # recorded at once: a killed run keeps it
            scored, outcome = by_key[key], TrialOutcome.from_dict(result)
            if outcome.cut:
                scored.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=outcome.cut)
                self.cut_short()
            else:
                self.record_outcome(scored, outcome)

        if jobs:
            self.runner.run(jobs, self.run_job, done)

    def open_trial(self, trial: Trial) -> Trial:
        """`trial` with its RUNNING study trial, among the round's trials."""
        candidate = trial.candidate
        attrs = {"round": self.number, "predictor": self.chosen, "candidate": trial.number - 1,
                 "instruction": candidate.instruction, "origin": candidate.origin,
                 **({"demos": len(candidate.demos)} if candidate.demos is not None else {})}
        trial.handle = self.stack.enter_context(self.ctx.ledger.trial(trial.key, attrs))
        self.trials.append(trial)
        return trial

    def restore_partial(self, trial: Trial, prior: Mapping[str, Any]) -> None:
        """An unfinished trial a run before this one scored: its scores stand, it goes on from there."""
        assert trial.handle is not None
        if prior.get("local") is not None:
            trial.local = dict(prior["local"])
            trial.handle.set("local", trial.local)
        if prior.get("minibatch_score") is not None:
            trial.minibatch = float(prior["minibatch_score"])
            trial.handle.minibatch(trial.minibatch)

    def record_outcome(self, trial: Trial, outcome: TrialOutcome) -> None:
        """What a scoring job found for `trial`, in its study trial and in the log."""
        handle = trial.handle
        assert handle is not None
        handle.set("worker", outcome.worker)
        if outcome.local is not None:
            trial.local = dict(outcome.local)
            handle.set("local", trial.local)
            log.info("round %d candidate %d for %s: %s (%d LM calls)", self.number, trial.number, self.chosen,
                     outcome.local_why, outcome.local_calls)
        if outcome.rejected is not None:
            trial.decision = outcome.rejected
            handle.pruned(accepted=False, why=outcome.rejected.why, local_rejected=True, status=outcome.rejected.status.value)
            return
        if outcome.minibatch is None:
            return
        trial.minibatch = outcome.minibatch
        trial.replayed.update(outcome.replayed)
        handle.set("replayed", trial.replayed)
        handle.minibatch(trial.minibatch)
        demos = trial.candidate.demos
        log.info("round %d candidate %d for %s%s: minibatch %.3f (current %.3f)", self.number, trial.number, self.chosen,
                 f" (+{len(demos)} demos)" if demos is not None else "", trial.minibatch, self.plan.minibatch_score)

    # jobs ---------------------------------------------------------------------------------------------------
    def job(self, kind: str, indices: Sequence[int], key: str) -> Job:
        return Job(_job_key(kind, key), {"round": self.number, "parent": self.parent, "job": kind,
                                         "candidates": list(indices)})

    def accepts(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a shared job is one of this round's, from this program."""
        return attrs.get("round") == self.number and attrs.get("parent") == self.parent

    def candidate_of(self, indices: Sequence[int]) -> Candidate:
        parts = [self.plan.candidates[i] for i in indices]
        return parts[0] if len(parts) == 1 else combine(parts[0], parts[1])

    def run_job(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """A job of this round (`job`), run here: a candidate's scoring, or (a share of) its validation."""
        if not self.accepts(attrs):
            raise MemtraceError(f"job {attrs.get('key')} is not one of round {self.number} from this program")
        candidate = self.candidate_of(attrs["candidates"])
        which = f"{attrs['candidates'][0] + 1}/{len(self.plan.candidates)}" if len(attrs["candidates"]) == 1 else "joined"
        if attrs["job"] == "local":
            progress.stage(f"round {self.number}: candidate {which} (local objective)")
            return self._local_job(candidate).to_dict()
        if attrs["job"] == "minibatch":
            progress.stage(f"round {self.number}: candidate {which}")
            return self._minibatch_job(candidate).to_dict()
        part = attrs.get("conversation")
        if part is None:  # the whole valset
            score = self.validation_gate.score(self.program, candidate)  # the leader decides
            return TrialOutcome(self.runner.worker, val=score.accuracy, replayed=score.replayed.to_dict()).to_dict()
        result, share = conversation_share(self.ctx.evaluator, candidate.apply(self.program), self.ctx.valset, part)
        return TrialOutcome(self.runner.worker, val=share["score"], replayed=replayed_ops(result, "full").to_dict(),
                            share=Share(share["correct"], share["cases"])).to_dict()

    def _local_job(self, candidate: Candidate) -> TrialOutcome:
        """`candidate` on its local objective: the settings objective for new settings, else the local set."""
        gate: LocalGate | SettingsGate | None = self.settings if candidate.sets_settings else self.local
        if gate is None:
            decision = Decision.of(Status.REJECTED, "rejected: no local objective scores it (no local set)")
            return TrialOutcome(self.runner.worker, local={}, rejected=decision)
        score, decision = gate.check(self.program, candidate)
        return TrialOutcome(self.runner.worker, local=score.to_dict(), local_why=decision.why,
                            local_calls=score.lm_calls, rejected=None if decision.ok else decision)

    def _minibatch_job(self, candidate: Candidate) -> TrialOutcome:
        """`candidate` through the local check (an upstream predictor) and the minibatch."""
        local: dict[str, Any] | None = None
        why, calls = "", 0
        if self.local_check is not None and not candidate.sets_settings:
            result, decision = self.local_check.check(self.program, candidate)
            local, why, calls = result.to_dict(), decision.why, result.lm_calls
            if not decision.ok:
                return TrialOutcome(self.runner.worker, local=local, local_why=why, local_calls=calls, rejected=decision)
        score = self.minibatch_gate.score(self.program, candidate, self._reuse(candidate))
        return TrialOutcome(self.runner.worker, local=local, local_why=why, local_calls=calls, minibatch=score.accuracy,
                            replayed={"minibatch": score.replayed.to_dict()})

    def _reuse(self, candidate: Candidate) -> dict[str, dict[str, dict[str, Any]]] | None:
        """What a scoped minibatch replay of `candidate` serves from the current program's run (None: a full
        replay): the plan's scope is set for a write-path predictor only (`scoped.py`). A round resumed by a later
        run has no traced minibatch of the current program at hand: its candidates replay in full. A worker sharing
        the round traces it again from the shared memo, so that it scores as the planner would."""
        if not self.plan.evidence_ops or candidate.predictor != self.chosen:
            return None
        if self.number not in self.ctx.minibatch_runs and self.runner.shared:
            self.ctx.minibatch_runs[self.number] = self.ctx.evaluator.evaluate(self.program, self.minibatch_gate.cases)
        parent = self.ctx.minibatch_runs.get(self.number)
        if parent is None:
            return None
        return scoped_reuse(parent, candidate.apply(self.program), self.chosen, self.plan.evidence_ops) or None

    # validations --------------------------------------------------------------------------------------------
    def val_jobs(self, indices: Sequence[int], key: str) -> list[Job]:
        """A validation as jobs: one per valset conversation where other workers may share it, else one."""
        job = self.job("val", indices, key)
        parts = conversations(self.ctx.valset)
        if not self.runner.shared or len(parts) < 2:
            return [job]
        return [Job(f"{job.key}@{conversation}", {**job.attrs, "conversation": conversation}) for conversation in parts]

    def joined(self, key: str, results: Mapping[str, TrialOutcome]) -> TrialOutcome | None:
        """A validation's result from the results of its jobs (`val_jobs`); None when some are missing."""
        whole = results.get(_job_key("val", key))
        if whole is not None:
            return whole
        parts = [result for job_key, result in results.items() if job_key.startswith(_job_key("val", key) + "@")]
        if not parts:
            return None
        if cut := next((part for part in parts if part.cut), None):
            return cut
        by_op: dict[str, int] = {}
        rerun: dict[str, list[str]] = {}
        for part in parts:
            for op, count in part.replayed["rerun_by_op"].items():
                by_op[op] = by_op.get(op, 0) + count
            rerun.update(part.replayed["rerun"])
        replayed = ReplayedOps("full", dict(sorted(by_op.items())), rerun, sum(p.replayed["served"] for p in parts))
        shares = [{"correct": p.share.correct, "cases": p.share.cases} for p in parts if p.share is not None]
        return TrialOutcome(",".join(sorted({p.worker for p in parts})), val=joined_accuracy(shares),
                            replayed=replayed.to_dict())

    def validate_ahead(self, wanted: Sequence[Trial], pair: tuple[Trial, Trial] | None = None) -> None:
        """The validations the choice needs first (`wanted`, and the first candidate of `pair` with the second's
        demos), at once, so that workers sharing the study run them side by side; as many as the calls left carry.
        Only where the work is shared: alone, each validation runs when the choice comes to it."""
        if not self.runner.shared:
            return
        self.phase = RoundPhase.VALIDATION
        ctx, cost = self.ctx, 0
        jobs: list[Job] = []
        for trial in wanted:
            cost += self.val_calls
            if ctx.budget.can_afford(cost):
                jobs += self.val_jobs([trial.number - 1], trial.key)
        if pair is not None:
            candidate = combine(pair[0].candidate, pair[1].candidate)
            key = candidate.key(self.number, self.parent)
            cost += ctx.validation_calls(self.chosen)
            if ctx.ledger.finished(key, wait_seconds=0) is None and ctx.budget.can_afford(cost):
                jobs += self.val_jobs([pair[0].number - 1, pair[1].number - 1], key)
        if jobs:
            self.validated.update({k: TrialOutcome.from_dict(v) for k, v in self.runner.run(jobs, self.run_job).items()})

    def valset_score(self, key: str, indices: Sequence[int], calls: int) -> TrialOutcome | Decision:
        """The candidate's validation (its score, the calls it `replayed`, the `worker` that ran it), or the
        decision not to validate it (fewer than `calls` LM calls left, or the budget stopped it)."""
        self.phase = RoundPhase.VALIDATION
        result = self.joined(key, self.validated)
        if result is None:
            refused = self.validation_gate.unaffordable(calls)
            if refused is not None:
                return refused
            progress.stage(f"round {self.number}: validation", total=evaluation_steps(self.ctx.valset))
            raw = self.runner.run(self.val_jobs(indices, key), self.run_job)
            result = self.joined(key, {k: TrialOutcome.from_dict(v) for k, v in raw.items()})
            assert result is not None
        if result.cut:
            return Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=result.cut)
        return result

    def validate(self, trial: Trial) -> None:
        """`trial` through the validation gate, or marked cut when the calls left cannot take it there."""
        got = self.valset_score(trial.key, [trial.number - 1], self.val_calls)
        if isinstance(got, Decision):
            trial.decision, trial.cut = got, True
            self.cut_short()
            return
        assert got.val is not None
        trial.val, trial.replayed["val"] = got.val, dict(got.replayed)
        trial.decision = self.validation_gate.decide(trial.val)
        if trial.handle is not None:
            trial.handle.set("replayed", trial.replayed)
            trial.handle.set("val_worker", got.worker)
        log.info("round %d candidate %d for %s: %s", self.number, trial.number, self.chosen, trial.decision.why)


def _job_key(kind: str, candidate_key: str) -> str:
    return f"{kind}:{candidate_key}"
