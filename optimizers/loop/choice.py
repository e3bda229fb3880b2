"""How a round chooses among its candidates: which objective ranks them, which go to validation, which is taken.

Contract of a choice policy: `choose()` runs the jobs it needs through `RoundTrials` (which records each trial
in the study) and returns the trial taken (None: the round changes nothing; it is validated and accepted) and
any trial it made beyond the plan's candidates (a combination), each with its decision. At most one is taken.

- `LocalSearch`: every candidate is scored on the local objective (the chosen predictor's local set re-run,
  `gates/local_objective.py`); those below the margin are rejected there. The best instruction and the best
  candidate that sets demos, when both pass, are joined and scored too. The best `validate_top` go to the valset,
  which decides as the acceptance rule says; the best on the valset is taken.
- `MinibatchFirst` (`--no-local-objective`): the local check and the minibatch; a minibatch ranks candidates of
  one kind only, so the best of each source (instructions, and each demo-setting source) goes to the valset, and
  the best rewrite is validated joined with the best demos when both pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.loop.interrupted import RoundPhase
from memtrace_opt.optimizers.loop.outcome import TrialOutcome
from memtrace_opt.optimizers.loop.trials import RoundTrials, Trial
from memtrace_opt.optimizers.sources.combination import combine

__all__ = ["LocalSearch", "MinibatchFirst", "policy_for", "source_of"]


def source_of(candidate: Candidate) -> str:
    """The source family a candidate competes in on a minibatch: instructions ("instruction": reflection, pattern
    rules), or the origin of a candidate that sets demos (each demo-setting source has its own slot)."""
    return candidate.origin if candidate.sets_demos else "instruction"


@dataclass
class LocalSearch:
    """The local objective ranks every candidate; the best that beat the seed are validated (module doc)."""

    trials: RoundTrials

    def choose(self) -> tuple[Trial | None, list[Trial]]:
        t = self.trials
        t.score_candidates("local", t.local_calls)
        joined = self._joined(self._ranked(t.trials))
        extra = [joined] if joined is not None else []
        ranked = self._ranked([*t.trials, *extra])
        count = t.ctx.local.validate_top if t.ctx.local is not None else 2
        top, rest = ranked[:count], ranked[count:]
        for trial in rest:
            if trial.restored is None:
                trial.decision = Decision.of(Status.OUTRANKED, "not validated: {n} candidates go first on the local "
                                             "objective (this one +{gain} net)", n=len(top), gain=trial.local_gain or 0)
        t.validate_ahead([trial for trial in top if trial.restored is None])
        for trial in top:
            if trial.restored is None:
                t.validate(trial)
        passed = [trial for trial in top if trial.accepted]
        decided = [trial for trial in passed if trial.restored is not None]  # accepted before the run was cut
        best = decided[0] if decided else max(passed, key=lambda x: (x.val or 0.0, x.local_gain or 0, -x.number),
                                              default=None)
        for trial in passed:
            if best is not None and trial is not best and trial.restored is None:
                trial.decision = Decision.of(
                    Status.OUTRANKED, "passed, but candidate {best} is taken (valset {best_val:.3f}; this one "
                    "{val:.3f})", best=best.number, best_val=best.val or 0.0, val=trial.val or 0.0)
        return best, extra

    def _ranked(self, trials: list[Trial]) -> list[Trial]:
        """The candidates that passed the local objective (or were accepted before a resumed run), best first: the
        largest net gain, then the fewest lost."""
        going = [x for x in trials if x.local is not None and (x.decision is None or x.decision.ok or x.accepted)]
        return sorted(going, key=lambda x: (not x.accepted, -(x.local_gain or 0), int((x.local or {}).get("lost", 0)),
                                            x.number))

    def _joined(self, ranked: list[Trial]) -> Trial | None:
        """The best instruction joined with the best demos, when both passed, scored on the local objective (None:
        no such pair, or no calls left for it)."""
        t = self.trials
        rewrite = next((x for x in ranked if not x.candidate.sets_demos and not x.candidate.sets_settings
                        and len(x.parts) == 1), None)
        demos = next((x for x in ranked if x.candidate.sets_demos and len(x.parts) == 1), None)
        if rewrite is None or demos is None:
            return None
        joined = combine(rewrite.candidate, demos.candidate)
        candidate = Candidate(joined.predictor, joined.instruction, joined.demos, joined.origin,
                              tuple(sorted({*rewrite.candidate.built_from, *demos.candidate.built_from})))
        key = candidate.key(t.number, t.parent)
        done = t.ctx.ledger.finished(key)
        if done is not None:
            return Trial.restore(0, candidate, key, done)
        if not t.ctx.budget.can_afford(t.local_calls + t.val_calls):
            return None
        trial = t.open_trial(Trial(0, candidate, key, parts=(rewrite.number - 1, demos.number - 1)))
        t.trials.remove(trial)  # recorded after the plan's candidates, as the round's extra
        job = t.job("local", trial.parts, key)
        t.phase = RoundPhase.CANDIDATES
        outcome = TrialOutcome.from_dict(t.runner.run([job], t.run_job)[job.key])
        if outcome.cut:
            trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=outcome.cut)
            t.cut_short()
        else:
            t.record_outcome(trial, outcome)
        return trial


@dataclass
class MinibatchFirst:
    """The local check and the minibatch; the best of each source validated (module doc)."""

    trials: RoundTrials

    def choose(self) -> tuple[Trial | None, list[Trial]]:
        """The best rewrite and the best of each demo-setting source go on: a minibatch of six or eight ranks
        candidates of one kind, but in a long_context run it put a rewrite (0.333) above two demos (0.167) that
        would have gained two validation questions where the rewrite gained one. When a rewrite and demos both pass
        the minibatch, the rewrite is validated with the best demos, the demos alone beside it."""
        t = self.trials
        t.score_candidates("minibatch", t.minibatch_calls)
        scored = sorted((x for x in t.trials if x.minibatch is not None), key=lambda x: (-(x.minibatch or 0.0), x.number))
        leaders: dict[str, Trial] = {}
        for trial in scored:
            leaders.setdefault(source_of(trial.candidate), trial)
        contenders = sorted(leaders.values(), key=lambda x: (-(x.minibatch or 0.0), x.number))
        gates = {x.number: t.minibatch_gate.decide(x.minibatch or 0.0) for x in contenders}
        rewrite = leaders.get("instruction")
        demos = next((x for x in contenders if x.candidate.sets_demos and gates[x.number].ok), None)
        together = rewrite is not None and demos is not None and gates[rewrite.number].ok
        decided_before = any(x.restored is not None and x.accepted for x in contenders)
        t.validate_ahead([x for x in contenders if x.restored is None and gates[x.number].ok
                          and not (together and x is rewrite)],
                         (rewrite, demos) if together and not decided_before and rewrite and demos else None)
        for trial in scored:
            if trial.restored is not None:
                continue
            if trial not in contenders:
                leader = leaders[source_of(trial.candidate)]
                trial.decision = Decision.of(
                    Status.OUTRANKED, "not validated: candidate {leader} goes first on the minibatch ({first:.3f}; "
                    "this one {this:.3f})", leader=leader.number, first=leader.minibatch, this=trial.minibatch)
                continue
            gate = gates[trial.number]
            if together and demos is not None and rewrite is not None and trial is rewrite:
                trial.decision = Decision.of(Status.DEFERRED, "not validated alone: validated with the demos of "
                                             "candidate {demos}", demos=demos.number)
            else:
                trial.decision = gate
                if gate.ok:
                    t.validate(trial)
        passed = [x for x in contenders if x.accepted]
        decided = [x for x in passed if x.restored is not None]  # accepted before the run was cut: it stands
        best = decided[0] if decided else max(passed, key=lambda x: (x.val or 0.0, x.minibatch or 0.0, -x.number),
                                              default=None)
        combined = None
        if together and not decided and rewrite is not None and demos is not None:
            combined = self._combination(rewrite, demos, best.val if best is not None else None)
            # cut for want of calls after the demos passed: the round stands with the demos, and the next round
            # proposes its rewrites on top of them; before they passed, the round resumes
            if best is None and combined.decision is not None and combined.decision.status is Status.NOT_VALIDATED:
                t.cut_short()
            if rewrite.restored is None and best is None and combined.val is not None and not combined.accepted:
                t.validate(rewrite)  # neither the demos nor the two together passed: the rewrite may do better alone
                if rewrite.accepted:
                    passed, best = [rewrite], rewrite
        if combined is not None and combined.accepted:
            for trial in passed:
                if trial.restored is None:
                    trial.decision = Decision.of(
                        Status.OUTRANKED, "passed, but the rewrite of candidate {rewrite} with these demos is taken "
                        "(valset {joined:.3f}; these demos alone {alone:.3f})", rewrite=rewrite.number if rewrite else 0,
                        joined=combined.val or 0.0, alone=trial.val or 0.0)
            best = None
        for trial in passed:  # two passed: the better on the valset is taken
            if best is not None and trial is not best and trial.restored is None:
                trial.decision = Decision.of(
                    Status.OUTRANKED, "passed, but candidate {best} is taken (valset {best_val:.3f}, minibatch "
                    "{best_mb:.3f}; this one {val:.3f}, {mb:.3f})", best=best.number, best_val=best.val or 0.0,
                    best_mb=best.minibatch or 0.0, val=trial.val or 0.0, mb=trial.minibatch or 0.0)
        taken = best or (combined if combined is not None and combined.accepted else None)
        return taken, [combined] if combined is not None else []

    def _combination(self, rewrite: Trial, demos: Trial, rival: float | None) -> Trial:
        """The rewrite with the demos, validated: taken when it passes the acceptance rule and, if the demos alone
        passed too (valset `rival`), beats them. A run cut short and resumed finds its decision in the study."""
        t = self.trials
        candidate = combine(rewrite.candidate, demos.candidate)
        key = candidate.key(t.number, t.parent)
        done = t.ctx.ledger.finished(key)
        if done is not None:
            return Trial.restore(0, candidate, key, done)
        trial = Trial(0, candidate, key, parts=(rewrite.number - 1, demos.number - 1))
        # all of the valset's calls: no minibatch run answered any under this prompt
        got = t.valset_score(key, list(trial.parts), t.ctx.validation_calls(t.chosen))
        if isinstance(got, Decision):  # no study trial: a resumed run tries it
            trial.decision = got
            return trial
        handle = t.stack.enter_context(t.ctx.ledger.trial(key, {
            "round": t.number, "predictor": t.chosen, "instruction": candidate.instruction,
            "demos": len(candidate.demos or ()), "origin": candidate.origin}))
        assert got.val is not None
        val, trial.replayed["val"] = got.val, dict(got.replayed)
        handle.set("replayed", trial.replayed)
        handle.set("worker", got.worker)
        decision = t.validation_gate.decide(val)
        if decision.ok and rival is not None:
            decision = (decision.also(", and above the demos alone ({rival:.3f})", rival=rival) if val > rival else
                        Decision.of(Status.REJECTED, "rejected: valset {val:.3f} not above the demos alone "
                                    "({rival:.3f})", val=val, rival=rival))
        trial.val, trial.decision = val, decision
        handle.validated(val, accepted=trial.accepted, why=decision.why, status=decision.status.value)
        return trial


def policy_for(trials: RoundTrials) -> LocalSearch | MinibatchFirst:
    """The round's choice policy: the local search where the round has a local set, or only settings candidates
    (an op without a prompt), else the minibatch first."""
    settings_only = trials.settings is not None and all(c.sets_settings for c in trials.plan.candidates)
    return LocalSearch(trials) if trials.local is not None or settings_only else MinibatchFirst(trials)
