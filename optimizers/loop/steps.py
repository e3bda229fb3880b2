"""The steps of a round, each a function over typed values. None of them knows how it is run: the engine
(`engine.py`) prices each before it starts, cuts it where the budget says, keeps what it found and hands it the
jobs' runner; a step only computes.

1. `plan`: trace the training minibatch, attribute its failures, choose the target (`Planned`);
2. `local_set`: the chosen predictor's local set, from the write path's traces for an op that forms or updates
   memory (no training question is answered to build it), from the answered training questions for the answer op;
3. `proposed_repairs` then `confirm_repairs`: blamed calls repaired by rule, confirmed on the local set's other calls;
4. `propose`: the candidate sources, those that cost no LM call first (`free_sources`), then the others;
5. `settings_candidates`: the settings search, with the number of trials the engine could afford.

Scoring the candidates and validating them is the choice policy's (`choice.py`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import dspy

from memtrace_opt.memory import OpRole
from memtrace_opt.optimizers.core.candidate import REPAIR, Candidate
from memtrace_opt.optimizers.core.evidence import ProposalEvidence
from memtrace_opt.optimizers.core.program_io import demos_of, instructions_of
from memtrace_opt.optimizers.core.repair import Repair, RepairCounts, RepairSet
from memtrace_opt.optimizers.evaluation.blame import Blame
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.evidence import build_evidence
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.local_set import (
    GOLD_ERROR_TARGETS,
    LocalSet,
    build_local_set,
    made_from,
    op_role,
    predictor_op,
)
from memtrace_opt.optimizers.evaluation.repairs import proposed_repairs
from memtrace_opt.optimizers.gates.local_objective import LocalObjective, LocalScore
from memtrace_opt.optimizers.gates.settings import SettingsObjective
from memtrace_opt.optimizers.loop.context import RoundContext
from memtrace_opt.optimizers.loop.selection import RoundOutcome
from memtrace_opt.optimizers.sources.base import CandidateSource, SourceRequest
from memtrace_opt.optimizers.sources.settings_source import SettingsSource
from memtrace_opt.tracing import OpEvent

__all__ = ["Planned", "confirm_repairs", "local_set", "plan", "propose", "proposed_repairs", "predictor_ops",
           "settings_candidates", "spends"]

log = logging.getLogger(__name__)

Attribute = Callable[[EvalResult], Blame]


@dataclass(frozen=True)
class Planned:
    """What tracing and attributing the minibatch found: the traced run, the blame, what the round may choose
    (`targets`, failures by predictor or tunable op), the chosen one (None: nothing to fix), the failures no prompt
    can fix, and the training cases left out of the signal (GoldError)."""

    evaluation: EvalResult
    blame: Blame
    targets: dict[str, int]
    chosen: str | None
    not_fixable: dict[str, int]
    left_out: frozenset[str]

    @property
    def prompts(self) -> bool:
        """Whether the chosen target is a predictor (False: an op without a prompt, settings only)."""
        return self.chosen is not None and self.chosen in self.blame.by_predictor


def plan(ctx: RoundContext, number: int, program: dspy.Module, minibatch: Sequence[CaseRef],
         history: Sequence[RoundOutcome], attribute: Attribute) -> Planned:
    """Trace `minibatch`, attribute its failures (`attribute`, or the routing of an ablation), choose the target."""
    evaluation = ctx.adapter.evaluate(program, minibatch)
    if ctx.routing is not None:
        blame = ctx.routing.route(evaluation, evaluation.failed(), ctx.predictors)
    else:
        blame = attribute(evaluation)
    counts = blame.counts()
    if ctx.search is not None:  # a blamed op without a prompt that declares settings (a retrieval's top-k)
        counts.update({op: n for op, n in blame.not_fixable.items() if ctx.adapter.tunables(program, [op])})
    targets = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    chosen = ctx.selector.select(targets, history)
    not_fixable = {op: n for op, n in blame.not_fixable.items() if op not in targets}
    return Planned(evaluation, blame, targets, chosen, not_fixable, ctx.left_out(number, blame.verdicts))


def writes_memory(program: dspy.Module, predictor: str) -> bool:
    """Whether `predictor`'s op forms or updates memory: its local set comes from the write path alone."""
    return op_role(predictor_op(program, predictor)) in (OpRole.FORMS, OpRole.UPDATES)


def local_set(ctx: RoundContext, number: int, program: dspy.Module, chosen: str,
              left_out: frozenset[str]) -> LocalSet:
    """The chosen predictor's local set (`local_set.py`) on the training questions less `left_out`, sampled to
    `local_calls` calls and ordered for successive halving. An op that forms or updates memory is read off the
    write path's traces; the answer op's calls are the training questions' answers."""
    assert ctx.local is not None
    cases = ctx.training(frozenset())
    run = (ctx.adapter.write_path(program, cases) if writes_memory(program, chosen)
           else ctx.adapter.evaluate(program, cases))
    found = build_local_set(program, chosen, run, ctx.adapter.memo).without(left_out, GOLD_ERROR_TARGETS)
    found = found.sample(ctx.local.local_calls, seed=number).interleaved(seed=number)
    log.info("round %d: local set of %s: %s", number, chosen, found.summary())
    return found


def repair_candidate(program: dspy.Module, predictor: str, repair: Repair, key: str) -> Candidate | None:
    """The current prompt with `repair` as one more demo, made from its call (`key`); None with no demo form."""
    signature = dict(program.named_predictors())[predictor].signature
    demo = repair.demo(signature)
    if demo is None:
        return None
    existing = demos_of(program)[predictor]
    return Candidate.of(predictor, instructions_of(program)[predictor], [*existing, demo], REPAIR, [key])


def confirm_repairs(proposed: RepairSet, program: dspy.Module, predictor: str, evaluation: EvalResult,
                    objective: LocalObjective, first: int) -> tuple[RepairSet, list[LocalScore]]:
    """Each proposed repair confirmed on the predictor's own local calls: the repair as a demo, re-run on the first
    `first` of the local set's other calls; kept when it carries at least as many targets there as it loses and
    bloats none. Returns the kept repairs (with the counts) and each confirmation's score."""
    cases = evaluation.by_id()
    kept: list[Repair] = []
    scores: list[LocalScore] = []
    not_confirmed = calls = 0
    for repair in proposed.repairs:
        case = cases.get(repair.case_id)
        candidate = repair_candidate(program, predictor, repair, f"{case.conversation_key}/{repair.op_id}") \
            if case is not None else None
        if candidate is None:
            not_confirmed += 1
            continue
        score = objective.score(program, candidate, first)
        scores.append(score)
        calls += score.lm_calls
        if score.fixed >= score.lost and not score.bloat:
            kept.append(repair)
        else:
            not_confirmed += 1
            log.info("repair of %s at %s not confirmed on the local calls: %s", repair.case_id, repair.op_id, score.why)
    counts = replace(proposed.counts, not_confirmed=not_confirmed, kept=len(kept), lm_calls=calls)
    return RepairSet(kept, counts), scores


def spends(source: CandidateSource) -> str:
    """What a source spends besides the round's own work: "reflection" (the reflection LM), "task" (the task LM
    tracing training questions), or "" (nothing: it builds candidates from what the round has)."""
    return str(getattr(source, "spends", ""))


def free_sources(sources: Sequence[CandidateSource]) -> list[CandidateSource]:
    return [s for s in sources if not spends(s) and not isinstance(s, SettingsSource)]


def paid_sources(sources: Sequence[CandidateSource]) -> list[CandidateSource]:
    return [s for s in sources if spends(s) and not isinstance(s, SettingsSource)]


def evidence_for(ctx: RoundContext, program: dspy.Module, chosen: str, planned: Planned,
                 repairs: RepairSet) -> ProposalEvidence:
    """What a proposer is shown for `chosen`: its blamed calls and correct cases, with each kept repair's target."""
    evidence = build_evidence(chosen, instructions_of(program), planned.evaluation, planned.blame, ctx.adapter.memo,
                              max_cases=ctx.proposal.evidence_cases)
    return evidence.with_targets({r.case_id: r.target() for r in repairs.repairs})


def propose(request: SourceRequest, sources: Sequence[CandidateSource], taken: Sequence[Candidate] = ()) -> list[Candidate]:
    """The candidates `sources` propose for the request's predictor, after those already `taken` (each source sees
    what came before it); with a local set, each records the calls it was made from, and each prompt once."""
    candidates = list(taken)
    for source in sources:
        candidates += source.propose(request, candidates)
    new = candidates[len(taken):]
    if request.local is not None:  # what each was made from: the local objective scores it on the other calls
        shown = [case.shown for case in [*request.evidence.failures, *request.evidence.successes]]
        new = [replace(c, built_from=tuple(dict.fromkeys(
            [*c.built_from, *made_from(request.local, c.demo_list(), () if c.sets_demos else shown)])))
            for c in new]
    known = {c.key(request.round, "") for c in taken}
    unique: dict[str, Candidate] = {}
    for candidate in new:  # one trial per prompt: two sources may propose the same one
        key = candidate.key(request.round, "")
        if key not in known:
            unique.setdefault(key, candidate)
    return list(unique.values())


def settings_candidates(request: SourceRequest, source: SettingsSource, trials: int) -> list[Candidate]:
    """The settings source's candidates with at most `trials` settings scored (the engine's slice of the round)."""
    if trials < 1 or request.settings is None:
        return []
    sized = replace(source, search=replace(source.search, settings_trials=trials))
    return sized.propose(request, [])


def settings_objective(ctx: RoundContext, number: int, program: dspy.Module, chosen: str,
                       left_out: frozenset[str], book: object) -> SettingsObjective | None:
    """The settings objective of the round's target, where the settings search is on and its op declares any, on the
    training questions less `left_out`."""
    from memtrace_opt.optimizers.gates.settings import target_op

    if ctx.search is None:
        return None
    op = target_op(program, chosen)
    if op is None or not ctx.adapter.tunables(program, [op.op_name]):
        return None
    return SettingsObjective(chosen, ctx.adapter.evaluator, ctx.training(left_out), program, book,  # type: ignore[arg-type]
                             cost_limit=ctx.search.cost_limit)


def counts_of(proposed: RepairSet) -> RepairCounts:
    return proposed.counts


def predictor_ops(evaluation: EvalResult) -> dict[str, int]:
    """Each predictor's op calls in `evaluation`'s traced runs, replayed ones included: what a change to its prompt
    makes run again."""
    counts = Counter(e.predictor for trace in evaluation.traces.values() for e in trace.events
                     if isinstance(e, OpEvent) and e.predictor)
    return dict(counts)
