"""Time estimates of `memtrace optimize` and `memtrace compare`, from the dry run of the program on the splits.

optimize = the baseline (the valset run) + the rounds, each: the minibatch traced, its failures attributed (an
LM method), K proposals from the reflection LM, K + 1 candidates on the minibatch and up to two validations, all
capped by the LM-call budget and the time budget (both count the baseline) + the held-out test (the student and
the optimized program). compare = the warm-up (every conversation memorized, every question of every split
answered: the seed's answers each row starts from) + per optimizer
its budget in calls (at the dry run's seconds per call) capped by its time budget, and its held-out test.
Which predictor a round rewrites is not known before it runs: a candidate costs the mean over the program's LM
operations of what changing that one re-runs (a write-path operation: the write path and every answer; a
read-path one: the read path).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memtrace_opt.attribution.protocol import LM_FREE_METHODS
from memtrace_opt.data import Conversation
from memtrace_opt.estimate import CallCost, Cost, Estimate, Rates, Work, announce, count_work, job_rates
from memtrace_opt.optimizers.loop.settings import LoopSettings

__all__ = ["split_work", "announce_estimate", "optimize_estimate", "compare_estimate"]

log = logging.getLogger(__name__)

ATTRIBUTION_CALLS = 3  # LM calls an LM attribution method spends on a failed case, about (graphtrace stops early)
REFLECTION_REPLY_WORDS = 150  # a proposed instruction, about


def split_work(program: Any, splits: Any, *, judge: bool, reply_cap: int | None) -> Work:
    """The dry run of `program` on every conversation of the splits, each with the questions of all its splits."""
    merged: dict[str, Conversation] = {}
    for conversation in [*splits.train, *splits.val, *splits.test]:
        held = merged.get(conversation.sample_id)
        questions = [*(held.questions if held is not None else ()), *conversation.questions]
        unique = {q.question_id: q for q in questions}
        merged[conversation.sample_id] = dataclasses.replace(conversation, questions=tuple(unique.values()))
    return count_work(program, list(merged.values()), judge=judge, reply_cap=reply_cap)


def announce_estimate(plan: str, program: Any, splits: Any, models: Any, *, judge: bool, reply_cap: int | None,
                      estimate: Callable[[Work, Rates], Estimate]) -> dict[str, Any]:
    """Say `plan`, then how long the job should take: `estimate(work, rates)` of the dry run of `program` on the
    splits (`split_work`) at the task model's rates (`job_rates`); where there are no rates, or the dry run fails,
    why there is no estimate. Returns the manifest's (compare.json's) `estimate`."""
    rates, why = job_rates(models)
    if rates is None:
        return announce(plan, None, why)
    try:
        work = split_work(program, splits, judge=judge, reply_cap=reply_cap)
    except Exception as error:  # noqa: BLE001 - a program the scripted fake LM cannot run still runs for real
        log.warning("no estimate: the dry run of the program failed: %s", error)
        return announce(plan, None, f"no estimate: the dry run failed ({type(error).__name__}: {error})")
    return announce(plan, estimate(work, rates))


def _ids(conversations: Sequence[Conversation]) -> list[str]:
    return list(dict.fromkeys(c.sample_id for c in conversations))


class _Costs:
    """The dry run's costs of the parts an optimizer's steps are made of, at `rates`."""

    def __init__(self, work: Work, rates: Rates, judge: bool) -> None:
        self.work, self.rates, self.judge = work, rates, judge
        writes = {call.operation for sid in work.conversations for call in work.write([sid])}
        self.operations = sorted({call.operation for calls in work.operations().values() for call in calls})
        self.write_ops = writes

    def cost(self, calls: Iterable[CallCost]) -> Cost:
        return Cost.of(calls, self.rates)

    def run(self, conversations: Sequence[Conversation], fresh: Iterable[str] = ()) -> Cost:
        """Answering `conversations`' questions (and judging them), after memorizing the `fresh` conversations."""
        judged = self.cost(self.work.judge(conversations)) if self.judge else Cost()
        return self.cost(self.work.write(fresh)) + self.cost(self.work.read(conversations)) + judged

    def rerun(self, conversations: Sequence[Conversation]) -> Cost:
        """A changed prompt's re-run over `conversations`: the mean over the LM operations of what a change to
        that one re-runs (replay serves the rest)."""
        if not self.operations:
            return Cost()
        read = self.run(conversations)
        write = self.cost(self.work.write(_ids(conversations)))
        costs = [read + write if op in self.write_ops else read for op in self.operations]
        return sum(costs, Cost()) * (1.0 / len(costs))

    def per_question(self, conversations: Sequence[Conversation]) -> float:
        count = sum(len(c.questions) for c in conversations)
        return 1.0 / count if count else 0.0

    def reflection(self, evidence_cases: int, reply_cap: int | None) -> Cost:
        """One proposal: a prompt holding the instruction and a few blamed calls, a new instruction back."""
        reads = [call for conv in self.work.conversations.values() for call in conv.read()]
        mean = sum(c.prompt_words for c in reads) / len(reads) if reads else 200.0
        return self.cost([CallCost("reflection", round(mean * (evidence_cases + 1)), REFLECTION_REPLY_WORDS,
                                   reply_cap)])


def optimize_estimate(work: Work, splits: Any, settings: LoopSettings, rates: Rates, *, judge: bool,
                      attribution: str, reply_cap: int | None) -> Estimate:
    """`memtrace optimize` on `splits` with `settings` (see the module docstring)."""
    costs = _Costs(work, rates, judge)
    val, train, test = list(splits.val), list(splits.train), list(splits.test)
    baseline = costs.run(val, _ids(val))
    train_questions = sum(len(c.questions) for c in train)
    share = min(settings.minibatch, train_questions) * costs.per_question(train)  # the minibatch's share of train
    trace = costs.run(train) * share + costs.cost(work.write(set(_ids(train)) - set(_ids(val)))) * (
        1.0 / settings.rounds)
    # about half the minibatch fails; an LM method spends a few calls of an answer's size on each
    attribute = Cost() if attribution in LM_FREE_METHODS else (
        costs.cost(work.read(train)) * (share * ATTRIBUTION_CALLS / 2))
    proposals = costs.reflection(settings.proposal.evidence_cases, reply_cap) * settings.proposal.candidates
    candidates = costs.rerun(train) * (share * (settings.proposal.candidates + 1))
    validations = costs.rerun(val) * 2
    round_cost = trace + attribute + proposals + candidates + validations
    rounds = round_cost * settings.rounds
    scale = 1.0  # the share of the rounds the budgets leave (both count the baseline)
    if settings.budget is not None and rounds.calls:
        scale = min(scale, max(0.0, settings.budget - baseline.calls) / rounds.calls)
    if settings.time_budget is not None and rounds.seconds:
        scale = min(scale, max(0.0, settings.time_budget - baseline.seconds) / rounds.seconds)
    unseen = set(_ids(test)) - set(_ids(val)) - set(_ids(train))
    held_out = costs.run(test, unseen) + costs.rerun(test)
    parts = {"baseline": baseline, "rounds": rounds * scale, "held-out test": held_out}
    return Estimate.of(parts, rates)


def compare_estimate(work: Work, splits: Any, optimizers: Sequence[str], rates: Rates, *, budget: int,
                     time_budget: float | None, judge: bool) -> Estimate:
    """`memtrace compare` of `optimizers` on `splits` (see the module docstring)."""
    costs = _Costs(work, rates, judge)
    everything = [*splits.train, *splits.val, *splits.test]
    test = list(splits.test)
    warm = costs.run(everything, _ids(everything))  # every conversation memorized, every question answered
    row = warm * (budget / warm.calls) if warm.calls else Cost()
    if time_budget is not None and row.seconds > time_budget:
        row = row * (time_budget / row.seconds)
    parts = {"warm-up": warm, **{name: row + costs.rerun(test) for name in optimizers}}
    return Estimate.of(parts, rates)
