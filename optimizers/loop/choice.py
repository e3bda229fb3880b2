"""How a round chooses among its candidates: which objective ranks them, which go to validation, which is taken.

A choice policy sees the round through a narrow interface (`Trials`: score candidates, price work, ask whether the
round can afford it, validate one) and never the round's internals: who runs the jobs, the budget's arithmetic,
the study. `choose()` returns a `Choice`: every candidate's record and the one taken (None: the round changes
nothing), at most one.

- `LocalSearch`: successive halving on the chosen predictor's local set (`gates/local_objective.py`). Every
  candidate is scored on the first few of its calls (the candidates that cost no reflection call come first in the
  plan's order, which breaks ties), the better half on twice as many, and so on to the whole set or as far as the
  round can afford; a settings candidate comes with its settings objective's score. The best instruction and the
  best candidate that sets demos, when both beat the seed by the margin, are joined and scored too. Those that beat
  the seed by `margin` net targets go to validation, best first; the first the acceptance rule accepts is taken.
- `MinibatchFirst` (`--no-local-objective`): the local check and the minibatch score each candidate, as far as the
  round can afford; the best of each source family that passes the minibatch goes on, the best rewrite joined with
  the best demos first when both pass; the first accepted on the valset is taken.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.gates.local_objective import LocalScore
from memtrace_opt.optimizers.loop.pricing import Price
from memtrace_opt.optimizers.loop.records import CandidateRecord
from memtrace_opt.optimizers.sources.combination import combine

__all__ = ["RUNG_CALLS", "Choice", "LocalSearch", "MinibatchFirst", "Scored", "Trials", "Validation", "policy_for",
           "source_of"]

RUNG_CALLS = 4  # local calls of the first rung of successive halving


@dataclass(frozen=True)
class Validation:
    """A candidate's valset accuracy and which calls the validation re-ran."""

    accuracy: float
    replayed: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scored:
    """A candidate through the minibatch's gates: its local check's counts (None: none ran), the check's rejection
    (None: it passed), its minibatch accuracy (None: not reached) and which calls that run re-ran."""

    local: Mapping[str, Any] | None = None
    rejected: Decision | None = None
    minibatch: float | None = None
    replayed: Mapping[str, Any] = field(default_factory=dict)


class Trials(Protocol):
    """What a choice policy sees of a round. A method that runs work returns None for a candidate the budget or the
    clock stopped (`cut` then says why); it never raises for a spent budget."""

    candidates: Sequence[Candidate]
    local_size: int  # calls in the round's local set (0: none)
    margin: int  # net targets a candidate must carry beyond the seed's before it is validated
    validate_top: int  # candidates validated a round, at most
    cut: str  # why the budget stopped work of the round ("" while it has not)

    def local(self, candidates: Sequence[Candidate], first: int) -> list[LocalScore | None]: ...

    def local_price(self, candidates: Sequence[Candidate], first: int) -> Price: ...

    def settings(self, candidate: Candidate) -> Any: ...

    def minibatch(self, candidate: Candidate) -> Scored | None: ...

    def minibatch_price(self, candidate: Candidate) -> Price: ...

    def minibatch_rule(self, score: float) -> Decision: ...

    def fits(self, price: Price) -> bool: ...

    def shortfall(self, price: Price) -> str: ...

    def validate(self, candidate: Candidate) -> Validation | Decision: ...

    def decide(self, accuracy: float) -> Decision: ...


@dataclass
class _Trial:
    """One candidate's way through the policy (the policy's own bookkeeping, turned into a record at the end)."""

    number: int  # 1-based, as the reasons name it (0: a joined candidate)
    candidate: Candidate
    rungs: list[LocalScore] = field(default_factory=list)
    local: dict[str, Any] | None = None
    minibatch: float | None = None
    val: float | None = None
    decision: Decision | None = None
    replayed: dict[str, Any] = field(default_factory=dict)

    @property
    def gain(self) -> int:
        return int((self.local or {}).get("fixed", 0)) - int((self.local or {}).get("lost", 0))

    @property
    def lost(self) -> int:
        return int((self.local or {}).get("lost", 0))

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.status is Status.ACCEPTED

    def record(self) -> CandidateRecord:
        decision = self.decision
        return CandidateRecord.of(self.candidate, minibatch_score=self.minibatch, val_score=self.val,
                                  accepted=self.accepted, why=decision.why if decision else "",
                                  local=self.local, replayed=self.replayed or None,
                                  status=decision.status.value if decision else "",
                                  rungs=[r.to_dict() for r in self.rungs])


@dataclass(frozen=True)
class Choice:
    """A policy's outcome: each candidate's record (the plan's, then any it joined), the one taken (None: none) with
    its valset accuracy, one line on how the round ended, and why the budget cut it ("" when it did not)."""

    records: list[CandidateRecord]
    taken: Candidate | None = None
    val: float | None = None
    outcome: str = ""
    cut: str = ""


def source_of(candidate: Candidate) -> str:
    """The source family a candidate competes in on a minibatch: instructions ("instruction": reflection, pattern
    rules), or the origin of a candidate that sets demos (each demo-setting source has its own slot)."""
    return candidate.origin if candidate.sets_demos else "instruction"


def _validate_in_order(t: Trials, contenders: Sequence[_Trial]) -> _Trial | None:
    """Validates `contenders` best first, at most `validate_top`, until one is accepted (it is taken); the rest are
    told why they were not validated."""
    taken: _Trial | None = None
    validated = 0
    for trial in contenders:
        if taken is not None:
            trial.decision = Decision.of(Status.OUTRANKED, "not validated: {taken} was accepted first",
                                         taken=f"candidate {taken.number}" if taken.number else "the joined candidate")
            continue
        if t.cut:  # the budget stopped the round: a resumed run validates what is left
            trial.decision = Decision.of(Status.NOT_VALIDATED, "not validated: {why}", why=t.cut)
            continue
        if validated >= t.validate_top:
            trial.decision = Decision.of(Status.OUTRANKED, "not validated: {n} candidates were validated first",
                                         n=validated)
            continue
        got = t.validate(trial.candidate)
        if isinstance(got, Decision):
            trial.decision = got
            continue
        validated += 1
        trial.val, trial.replayed["val"] = got.accuracy, dict(got.replayed)
        trial.decision = t.decide(got.accuracy)
        if trial.accepted:
            taken = trial
    return taken


def _outcome(taken: _Trial | None, trials: Sequence[_Trial], t: Trials) -> str:
    if taken is not None:
        return f"candidate {taken.number or 'joined'} ({taken.candidate.origin}) accepted on the valset"
    if t.cut:
        return f"cut short: {t.cut}"
    validated = [x for x in trials if x.val is not None]
    if validated:
        return f"{len(validated)} validated, none accepted"
    if not trials:
        return "no candidate proposed"
    unscored = [x for x in trials if x.decision is not None and x.decision.status is Status.NOT_VALIDATED]
    if len(unscored) == len(trials):
        return f"no candidate scored ({unscored[0].decision.why if unscored[0].decision else ''})"
    return "no candidate beat the seed by the margin"


@dataclass
class LocalSearch:
    """Successive halving on the local set, the best that beat the seed validated (module doc)."""

    trials: Trials

    def choose(self) -> Choice:
        t = self.trials
        trials = [_Trial(i + 1, c) for i, c in enumerate(t.candidates)]
        prompts = [x for x in trials if not x.candidate.sets_settings]
        for trial in (x for x in trials if x.candidate.sets_settings):
            self._settings(trial)
        alive = self._halving(prompts)
        passed = [x for x in alive if x.decision is None and x.local is not None and x.gain >= max(1, t.margin)]
        for trial in alive:
            if trial not in passed and trial.decision is None and trial.local is not None:
                trial.decision = Decision.of(Status.REJECTED, "rejected by the local objective: {why} (needs +{m} net)",
                                             why=LocalScore.from_dict(trial.local).why, m=max(1, t.margin))
        joined = self._joined(passed)
        extra = [joined] if joined is not None else []
        settings = [x for x in trials if x.candidate.sets_settings and x.decision is not None and x.decision.ok]
        contenders = [*passed, *(x for x in extra if x.decision is None), *settings]
        contenders.sort(key=lambda x: (-x.gain, x.lost, x.number or len(trials) + 1))
        for trial in contenders:
            trial.decision = None  # decided on the valset
        taken = _validate_in_order(t, contenders)
        every = [*trials, *extra]
        return Choice([x.record() for x in every], taken.candidate if taken else None,
                      taken.val if taken else None, _outcome(taken, every, t), t.cut)

    def _settings(self, trial: _Trial) -> None:
        score = self.trials.settings(trial.candidate)
        trial.local = score.to_dict()
        if score.over_cost:
            trial.decision = Decision.of(Status.REJECTED, "rejected: over the cost limit: {why}", why=score.why)
        elif score.gain < max(1, self.trials.margin):
            trial.decision = Decision.of(Status.REJECTED, "rejected by the settings objective: {why} (needs +{m} net)",
                                         why=score.why, m=max(1, self.trials.margin))
        else:
            trial.decision = Decision.of(Status.PASSED, "{why}", why=score.why)

    def _halving(self, alive: list[_Trial]) -> list[_Trial]:
        """Rungs of successive halving over `alive` (module doc); returns the candidates of the last rung scored."""
        t = self.trials
        first, rung = min(t.local_size, RUNG_CALLS), 0
        if not t.local_size:
            for trial in alive:
                trial.decision = Decision.of(Status.REJECTED, "rejected: no local set to score it on")
            return []
        if alive and not t.fits(t.local_price([x.candidate for x in alive], first)):
            # the first rung takes as many candidates as the round affords, in the plan's order (those that cost no
            # reflection call first); the others wait for a round with more to spend
            taken = next((n for n in range(len(alive) - 1, 0, -1)
                          if t.fits(t.local_price([x.candidate for x in alive[:n]], first))), 0)
            if taken:
                for trial in alive[taken:]:
                    trial.decision = Decision.of(Status.OUTRANKED, "not scored: the round affords the first rung for "
                                                 "{n} candidates, the first in its order", n=taken)
                alive = alive[:taken]
        while alive:
            why = t.shortfall(t.local_price([x.candidate for x in alive], first))
            if why:
                if rung == 0:
                    for trial in alive:
                        trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=why)
                    return []
                break
            scores = t.local([x.candidate for x in alive], first)
            if any(score is None for score in scores):
                for trial in alive:
                    trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=t.cut)
                return []
            rung += 1
            for trial, score in zip(alive, scores, strict=True):
                assert score is not None
                trial.rungs.append(score)
                trial.local = score.to_dict()
            if first >= t.local_size or len(alive) == 1:
                break
            ranked = sorted(alive, key=lambda x: (-x.gain, x.lost, x.number))
            keep = math.ceil(len(ranked) / 2)
            for trial in ranked[keep:]:
                trial.decision = Decision.of(
                    Status.OUTRANKED, "dropped at rung {rung} (+{gain} net on {calls} calls): the better half go on",
                    rung=rung, gain=trial.gain, calls=int((trial.local or {}).get("calls", 0)))
            alive, first = ranked[:keep], min(t.local_size, first * 2)
        return alive

    def _joined(self, passed: list[_Trial]) -> _Trial | None:
        """The best instruction joined with the best demos, when both passed, scored on the last rung's calls (None:
        no such pair, or the round cannot afford it)."""
        t = self.trials
        ranked = sorted(passed, key=lambda x: (-x.gain, x.lost, x.number))
        rewrite = next((x for x in ranked if not x.candidate.sets_demos), None)
        demos = next((x for x in ranked if x.candidate.sets_demos), None)
        if rewrite is None or demos is None:
            return None
        joined = combine(rewrite.candidate, demos.candidate)
        candidate = Candidate(joined.predictor, joined.instruction, joined.demos, joined.origin,
                              tuple(dict.fromkeys([*rewrite.candidate.built_from, *demos.candidate.built_from])))
        first = max(int((rewrite.local or {}).get("calls", 0)), int((demos.local or {}).get("calls", 0)))
        if t.shortfall(t.local_price([candidate], first)):
            return None
        scores = t.local([candidate], first)
        trial = _Trial(0, candidate)
        if scores[0] is None:
            trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=t.cut)
            return trial
        trial.rungs.append(scores[0])
        trial.local = scores[0].to_dict()
        if trial.gain < max(1, t.margin) or trial.gain <= max(rewrite.gain, demos.gain):
            trial.decision = Decision.of(Status.REJECTED, "rejected: joined, {why}, no better than its parts",
                                         why=scores[0].why)
        return trial


@dataclass
class MinibatchFirst:
    """The local check and the minibatch; the best of each source validated (module doc)."""

    trials: Trials

    def choose(self) -> Choice:
        t = self.trials
        trials = [_Trial(i + 1, c) for i, c in enumerate(t.candidates)]
        for trial in trials:
            why = t.shortfall(t.minibatch_price(trial.candidate))
            if why:
                trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=why)
                continue
            scored = t.minibatch(trial.candidate)
            if scored is None:
                trial.decision = Decision.of(Status.NOT_VALIDATED, "not scored: {why}", why=t.cut)
                break
            trial.local = dict(scored.local) if scored.local is not None else None
            trial.minibatch = scored.minibatch
            if scored.replayed:
                trial.replayed["minibatch"] = dict(scored.replayed)
            trial.decision = scored.rejected
        scored_ones = sorted((x for x in trials if x.minibatch is not None), key=lambda x: (-(x.minibatch or 0.0), x.number))
        leaders: dict[str, _Trial] = {}
        for trial in scored_ones:
            if source_of(trial.candidate) in leaders:
                leader = leaders[source_of(trial.candidate)]
                trial.decision = Decision.of(Status.OUTRANKED, "not validated: candidate {n} goes first on the "
                                             "minibatch ({first:.3f}; this one {this:.3f})", n=leader.number,
                                             first=leader.minibatch or 0.0, this=trial.minibatch or 0.0)
                continue
            leaders[source_of(trial.candidate)] = trial
            trial.decision = t.minibatch_rule(trial.minibatch or 0.0)
        going = [x for x in leaders.values() if x.decision is not None and x.decision.ok]
        rewrite = next((x for x in going if not x.candidate.sets_demos and not x.candidate.sets_settings), None)
        demos = next((x for x in going if x.candidate.sets_demos), None)
        extra: list[_Trial] = []
        if rewrite is not None and demos is not None:
            extra.append(_Trial(0, combine(rewrite.candidate, demos.candidate)))
        contenders = [*extra, *sorted(going, key=lambda x: (-(x.minibatch or 0.0), x.number))]
        for trial in contenders:
            trial.decision = None
        taken = _validate_in_order(t, contenders)
        every = [*trials, *extra]
        return Choice([x.record() for x in every], taken.candidate if taken else None,
                      taken.val if taken else None, _outcome(taken, every, t), t.cut)


def policy_for(trials: Trials, local_objective: bool) -> LocalSearch | MinibatchFirst:
    """The round's choice policy: the local search where the round has a local set to score on (or only settings
    candidates, which their own objective scores), else the minibatch first (`--no-local-objective`, or an op whose
    recorded prompts cannot be re-run under a candidate)."""
    settings_only = bool(trials.candidates) and all(c.sets_settings for c in trials.candidates)
    return LocalSearch(trials) if local_objective or settings_only else MinibatchFirst(trials)
