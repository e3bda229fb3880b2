"""One round of the closed loop: trace the minibatch, attribute its failures, choose the most blamed
predictor, propose K rewrites of it, evaluate them (the local check on the blamed calls for an upstream
predictor, then the minibatch, the valset for the best rewrite and for the demos candidate, the rewrite with
the demos when both pass the minibatch) and decide.

Every step that costs LM calls is recorded in the study before the next begins, so a killed round resumes:
the round's plan (blame, chosen predictor, proposals) is study attribute `round:N`; each candidate is a
trial; the outcome is `round_done:N`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.optimizers.evaluation.blame import attribute_failures
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.evidence import build_evidence, describe
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.program_io import demos_of, instructions_of, with_instruction
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule
from memtrace_opt.optimizers.gates.local_check import LocalCase, LocalResult, check_candidate, local_cases
from memtrace_opt.optimizers.loop.budget import LMBudget
from memtrace_opt.optimizers.loop.records import CandidateRecord, RoundRecord
from memtrace_opt.optimizers.loop.selection import ModuleSelector, RoundOutcome
from memtrace_opt.optimizers.loop.study import StudyLedger, TrialHandle
from memtrace_opt.optimizers.sources.demo_context import writes_answers
from memtrace_opt.optimizers.sources.demos import DEMO_CHARS, DEMO_TOTAL_CHARS, predictor_demos
from memtrace_opt.optimizers.sources.reflective import InstructionProposer, proposal_origin
from memtrace_opt.tracing import OpEvent

__all__ = ["RoundContext", "RoundOutcomeFull", "run_round", "instructions_digest", "interrupted_round",
           "predictor_ops", "calls_to_rerun"]

log = logging.getLogger(__name__)


def instructions_digest(instructions: dict[str, str]) -> str:
    text = "\x1f".join(f"{k}\x1e{v}" for k, v in sorted(instructions.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class RoundContext:
    """What every round shares."""

    ledger: StudyLedger
    evaluator: CachedEvaluator
    budget: LMBudget
    selector: ModuleSelector
    proposer: InstructionProposer
    acceptance: AcceptanceRule
    attribution: Any
    attributor_lm: Any
    attribution_config: Any
    valset: Sequence[CaseRef]
    num_candidates: int
    evidence_cases: int
    system: str = ""
    predictors: Sequence[str] = ()
    local_check: bool = True
    max_demos: int = 0
    demo_chars: int = DEMO_CHARS
    demo_budget_chars: int | None = DEMO_TOTAL_CHARS
    compact_demos: bool = True
    demo_pool: Sequence[CaseRef] = ()
    pool_results: list[EvalResult] = field(default_factory=list)  # the pool traced, once, by the first round needing it
    val_ops: dict[str, int] = field(default_factory=dict)  # each predictor's op calls in a run of the valset

    def validation_calls(self, predictor: str) -> int:
        """The LM calls validating a candidate for `predictor` takes at least (0: not known)."""
        return calls_to_rerun(self.val_ops, predictor)


def predictor_ops(evaluation: EvalResult) -> dict[str, int]:
    """Each predictor's op calls in `evaluation`'s traced runs, replayed ones included: what a change to its
    prompt makes run again."""
    counts = Counter(e.predictor for trace in evaluation.traces.values() for e in trace.events
                     if isinstance(e, OpEvent) and e.predictor)
    return dict(counts)


def calls_to_rerun(ops: Mapping[str, int], predictor: str) -> int:
    """The LM calls a run with `predictor` changed makes at least: its own op calls (`ops`, from a run of the
    same cases), whose prompt changed. Those of the predictors after it re-run only where its outputs change,
    which is not known before, so they are not counted: the estimate never stops work that would have fit."""
    return ops.get(predictor, 0)


@dataclass
class RoundOutcomeFull:
    """A finished round: its record, the program after it, its verdicts (dicts) and whether it was cut short."""

    record: RoundRecord
    program: dspy.Module
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    budget_hit: bool = False



def _demo_pool(ctx: RoundContext, program: dspy.Module) -> list[EvalResult]:
    """The training cases traced for demos (`ctx.demo_pool`), run by `program` the first time they are needed
    and kept for later rounds: a call that served a correct answer is a worked example whichever round ran it.
    The write path replays from the memo; only the pool's own questions cost LM calls."""
    if ctx.demo_pool and not ctx.pool_results:
        result = ctx.evaluator.evaluate(program, ctx.demo_pool)
        log.info("demo pool: %d training cases traced, %d answered correctly (%d LM calls)", len(result.cases),
                 len(result.passed()), result.lm_calls)
        ctx.pool_results.append(result)
    return ctx.pool_results


def _offered_before(ledger: StudyLedger, number: int, chosen: str) -> list[dict[str, Any]]:
    """The demos rounds before `number` offered `chosen`, read from their plans in the study (so a resumed run
    has them too). Passed as `predictor_demos(exclude=...)`: those the program took it has, and any demo the
    predictor has is skipped anyway; the others were refused and are not offered again. Without this the calls
    ranked most like a round's blamed ones can come first again while the program is unchanged: in a 400-call
    long_context run round 4 spent its only demos candidate on a four-demo set an earlier round had been refused."""
    offered: list[dict[str, Any]] = []
    for earlier in range(1, number):
        plan = ledger.get(f"round:{earlier}") or {}
        if plan.get("chosen_predictor") == chosen:
            offered += [demo for demo in plan.get("demos") or () if demo not in offered]
    return offered


def _plan(ctx: RoundContext, number: int, program: dspy.Module, minibatch: Sequence[CaseRef],
          history: Sequence[RoundOutcome]) -> dict[str, Any]:
    """Trace the minibatch, attribute failures, choose the predictor, ask for proposals; record the plan."""
    evaluation = ctx.evaluator.evaluate(program, minibatch)
    blame = attribute_failures(
        evaluation, evaluation.failed(), method=ctx.attribution, lm=ctx.attributor_lm,
        predictors=ctx.predictors, system=ctx.system, config=ctx.attribution_config,
    )
    chosen = ctx.selector.select(blame.counts(), history)
    instructions = instructions_of(program)
    proposals: list[str] = []
    evidence_summary: dict[str, Any] = {}
    checks: list[LocalCase] = []
    demos: list[dict[str, Any]] = []
    if chosen is not None and not ctx.budget.exhausted():
        evidence = build_evidence(chosen, instructions, evaluation, blame, ctx.evaluator.memo,
                                  max_cases=ctx.evidence_cases)
        evidence_summary = describe(evidence)
        if ctx.local_check:
            checks = local_cases(chosen, evaluation, blame, ctx.evaluator.memo, max_cases=ctx.evidence_cases)
        proposals = ctx.proposer.propose(evidence, ctx.num_candidates)
        if ctx.max_demos > 0:
            sources = [evaluation, *_demo_pool(ctx, program)]
            new_demos = predictor_demos(program, chosen, sources, ctx.evaluator.memo, max_demos=ctx.max_demos,
                                        max_chars=ctx.demo_chars, max_total_chars=ctx.demo_budget_chars,
                                        exclude=_offered_before(ctx.ledger, number, chosen),
                                        like=[case.shown for case in evidence.failures],
                                        compact=ctx.compact_demos and writes_answers(chosen, sources))
            demos = [*demos_of(program)[chosen], *new_demos] if new_demos else []
    plan = {
        "round": number,
        "minibatch": [case.case_id for case in minibatch],
        "minibatch_score": evaluation.accuracy,
        "minibatch_ops": predictor_ops(evaluation),
        "blame_counts": blame.counts(),
        "not_fixable": blame.not_fixable,
        "chosen_predictor": chosen,
        "previous_instruction": instructions.get(chosen) if chosen else None,
        "proposals": proposals,
        "proposal_origins": [proposal_origin(text, instructions[chosen]) for text in proposals] if chosen else [],
        "evidence": evidence_summary,
        "verdicts": [{**v.to_dict(), "round": number} for v in blame.verdicts],
        "local_cases": [case.to_dict() for case in checks],
        "demos": demos,
    }
    existing = ctx.ledger.get(f"round:{number}")
    if existing is not None:  # another worker sharing the study planned this round first: follow its plan
        return dict(existing)
    ctx.ledger.put(f"round:{number}", plan)
    return plan


def run_round(ctx: RoundContext, number: int, program: dspy.Module, current_val: float,
              minibatch: Sequence[CaseRef], history: Sequence[RoundOutcome]) -> RoundOutcomeFull:
    """Run (or resume) round `number` from `program` whose valset accuracy is `current_val`."""
    spent_before, started = ctx.budget.spent(), time.perf_counter()
    plan = ctx.ledger.get(f"round:{number}")
    if plan is None:
        plan = _plan(ctx, number, program, minibatch, history)
    else:
        by_id = {case.case_id: case for case in minibatch}
        minibatch = [by_id[i] for i in plan["minibatch"] if i in by_id] or list(minibatch)
    chosen: str | None = plan["chosen_predictor"]
    candidates, accepted, new_val, budget_hit = _candidates(ctx, number, plan, program, current_val, minibatch)
    new_program = with_instruction(program, chosen, *accepted) if (chosen and accepted) else program
    record = RoundRecord(
        round=number,
        blame_counts=dict(plan["blame_counts"]),
        not_fixable=dict(plan["not_fixable"]),
        chosen_predictor=chosen,
        previous_instruction=plan["previous_instruction"],
        candidates=candidates,
        accepted=accepted is not None,
        val_accuracy=new_val,
        lm_calls=ctx.budget.spent() - spent_before,
        seconds=time.perf_counter() - started,
        findings=list((plan.get("evidence") or {}).get("findings") or []),
    )
    return RoundOutcomeFull(record, new_program, list(plan.get("verdicts") or []), budget_hit)


def interrupted_round(ledger: StudyLedger, number: int, program: dspy.Module, why: str) -> dict[str, Any]:
    """How far round `number` (started from `program`) got before the budget cut it short: its plan, if it was
    recorded, and the minibatch score of each candidate evaluated (None for the others)."""
    plan = ledger.get(f"round:{number}")
    if plan is None:
        return {"round": number, "chosen_predictor": None, "blame_counts": {}, "candidates": [],
                "why": f"{why}, before its proposals were recorded (tracing, attributing or proposing)"}
    chosen = plan.get("chosen_predictor")
    parent = instructions_digest(instructions_of(program))
    candidates = []
    for text, demos in _plan_candidates(plan):
        key = _key(number, chosen or "", parent, text, demos)
        attrs = ledger.finished(key, wait_seconds=0) or ledger.partial(key) or {}
        entry: dict[str, Any] = {"instruction": text, "minibatch_score": attrs.get("minibatch_score")}
        if demos is not None:
            entry["demos"] = len(demos)
        if attrs.get("local") is not None:
            entry["local"] = attrs["local"]
        if attrs.get("local_rejected"):
            entry["why"] = attrs.get("why", "")
        candidates.append(entry)
    return {"round": number, "chosen_predictor": chosen, "blame_counts": dict(plan.get("blame_counts") or {}),
            "candidates": candidates, "why": why}


Candidate = tuple[str, list[dict[str, Any]] | None]  # an instruction, and the demo list it sets (None: kept)


def _plan_candidates(plan: dict[str, Any]) -> list[Candidate]:
    """The round's candidates: each proposal, then the current instruction with demos if the plan has some."""
    out: list[Candidate] = [(text, None) for text in plan.get("proposals") or []]
    if plan.get("demos") and plan.get("previous_instruction") is not None:
        out.append((str(plan["previous_instruction"]), [dict(d) for d in plan["demos"]]))
    return out


def _key(number: int, chosen: str, parent: str, text: str, demos: list[dict[str, Any]] | None = None) -> str:
    content = text if demos is None else text + "\x1f" + json.dumps(demos, sort_keys=True, ensure_ascii=False)
    return f"r{number}:{chosen}:{parent}:{hashlib.sha256(content.encode()).hexdigest()[:16]}"


def _candidates(ctx: RoundContext, number: int, plan: dict[str, Any], program: dspy.Module, current_val: float,
                minibatch: Sequence[CaseRef]) -> tuple[list[CandidateRecord], Candidate | None, float, bool]:
    chosen, candidates = plan["chosen_predictor"], _plan_candidates(plan)
    if not chosen or not candidates:
        return [], None, current_val, False
    parent = instructions_digest(instructions_of(program))
    current_mb = float(plan["minibatch_score"])
    checks = [LocalCase.from_dict(case) for case in plan.get("local_cases") or []] if ctx.local_check else []
    mb_calls = calls_to_rerun(plan.get("minibatch_ops") or {}, chosen)
    # a candidate's validation re-runs the valset questions its minibatch run did not answer already (the memo
    # keeps those): with the valset the training set, as `memtrace optimize` without --val has it, they overlap
    shared = {case.case_id for case in minibatch} & {case.case_id for case in ctx.valset}
    val_calls = ctx.validation_calls(chosen) * (len(ctx.valset) - len(shared)) // max(1, len(ctx.valset))
    finished: dict[int, dict[str, Any]] = {}
    handles: dict[int, TrialHandle] = {}
    scores: dict[int, float] = {}
    locals_: dict[int, dict[str, Any]] = {}
    rejected: dict[int, str] = {}  # candidates the local check turned down: no minibatch run
    budget_hit = False
    with contextlib.ExitStack() as stack:
        for i, (text, demos) in enumerate(candidates):
            key = _key(number, chosen, parent, text, demos)
            done = ctx.ledger.finished(key)
            if done is not None:
                finished[i] = done
                if done.get("local_rejected"):
                    rejected[i] = str(done.get("why", ""))
                else:
                    scores[i] = float(done.get("minibatch_score") or 0.0)
                continue
            prior = ctx.ledger.partial_score(key)
            if prior is None and (ctx.budget.exhausted() or _short(ctx, mb_calls + val_calls)):
                # what is left cannot carry this candidate through its minibatch and a validation: the calls go
                # to validating the candidates scored so far, and the round resumes with a larger budget
                log.info("round %d: candidates from %d on not evaluated: %s LM calls left, at least %d needed", number,
                         i + 1, ctx.budget.left(), mb_calls + val_calls)
                budget_hit = True
                break
            attrs = {"round": number, "predictor": chosen, "candidate": i, "instruction": text,
                     **({"demos": len(demos)} if demos is not None else {})}
            handle = stack.enter_context(ctx.ledger.trial(key, attrs))
            if prior is None and checks:
                check: LocalResult = check_candidate(program, chosen, text, checks, ctx.evaluator.task_lm, demos)
                locals_[i] = check.to_dict()
                handle.set("local", locals_[i])
                log.info("round %d candidate %d for %s: %s (%d LM calls)", number, i + 1, chosen, check.why,
                         check.lm_calls)
                if not check.passed:
                    handle.pruned(accepted=False, why=check.why, local_rejected=True)
                    rejected[i] = check.why
                    continue
            if prior is not None:
                score = prior
            else:
                score = ctx.evaluator.evaluate(with_instruction(program, chosen, text, demos), minibatch).accuracy
            handle.minibatch(score)
            handles[i], scores[i] = handle, score
            log.info("round %d candidate %d for %s%s: minibatch %.3f (current %.3f)", number, i + 1, chosen,
                     f" (+{len(demos)} demos)" if demos is not None else "", score, current_mb)
        # the best rewrite and the demos candidate each go on: a minibatch of six or eight ranks candidates of
        # one kind, but in a long_context run it put a rewrite (0.333) above two demos (0.167) that would have
        # gained two validation questions where the rewrite gained one. When both pass the minibatch, the
        # rewrite is validated with the demos (an instruction and worked examples fix different questions, and
        # it would be deployed with them), the demos alone beside it
        kinds: dict[bool, int] = {}
        for i in sorted(scores, key=lambda i: (-scores[i], i)):
            kinds.setdefault(candidates[i][1] is not None, i)
        contenders = sorted(kinds.values(), key=lambda i: (-scores[i], i))
        gates = {i: ctx.acceptance.on_minibatch(current_mb, scores[i]) for i in contenders}
        cut: set[int] = set()  # passed the minibatch, not validated for want of calls: resumed from their score
        together = len(kinds) == 2 and all(gate.ok for gate in gates.values())
        vals: dict[int, float | None] = {}
        accepts: dict[int, bool] = {}
        whys: dict[int, str] = {}

        def validate(i: int) -> None:
            """Candidate `i` on the valset, or marked cut when the calls left cannot take it there."""
            nonlocal budget_hit
            if ctx.budget.exhausted() or _short(ctx, val_calls):
                whys[i], budget_hit = _not_validated(ctx, val_calls), True
                cut.add(i)
                return
            val = ctx.evaluator.evaluate(with_instruction(program, chosen, *candidates[i]), ctx.valset).accuracy
            decision = ctx.acceptance.on_valset(current_val, val)
            vals[i], accepts[i], whys[i] = val, decision.ok, decision.why
            log.info("round %d candidate %d for %s: %s", number, i + 1, chosen, decision.why)

        for i in contenders:
            if i in finished:
                vals[i], accepts[i] = finished[i].get("val_score"), bool(finished[i].get("accepted"))
                whys[i] = str(finished[i].get("why", ""))
                continue
            vals[i], accepts[i], whys[i] = None, False, gates[i].why
            if together and i == kinds[False]:
                whys[i] = f"not validated alone: validated with the demos of candidate {kinds[True] + 1}"
            elif gates[i].ok:
                validate(i)
        passed = [i for i in contenders if accepts[i]]
        decided = [i for i in passed if i in finished]  # accepted before the run was cut: that decision stands
        best = decided[0] if decided else max(passed, key=lambda i: (vals[i] or 0.0, scores[i], -i)) if passed else None
        combined = None
        if together and not decided:
            rival = vals[best] if best is not None else None
            combined = _combination(ctx, number, chosen, parent, program, (candidates[kinds[False]][0],
                                    candidates[kinds[True]][1]), rival, current_val, stack)
            # cut for want of calls after the demos passed: the round stands with the demos, and the next round
            # proposes its rewrites on top of them; before they passed, the round resumes
            budget_hit = budget_hit or (combined.why.startswith("not validated") and best is None)
        lone = kinds[False] if together else None
        if (lone is not None and lone not in finished and best is None and combined is not None
                and combined.val_score is not None and not combined.accepted):
            validate(lone)  # neither the demos nor the two together passed: the rewrite may still do better alone
            if accepts[lone]:
                passed, best = [lone], lone
        if combined is not None and combined.accepted:
            for i in passed:
                if i not in finished:
                    accepts[i] = False
                    whys[i] = (f"passed, but the rewrite of candidate {kinds[False] + 1} with these demos is taken "
                               f"(valset {combined.val_score or 0.0:.3f}; these demos alone {vals[i] or 0.0:.3f})")
            best = None
        for i in passed:  # two passed: the better on the valset is taken
            if i != best and best is not None and i not in finished:
                accepts[i] = False
                whys[i] = (f"passed, but candidate {best + 1} is taken (valset {vals[best] or 0.0:.3f}, minibatch "
                           f"{scores[best]:.3f}; this one {vals[i] or 0.0:.3f}, {scores[i]:.3f})")
        accepted = best is not None or (combined is not None and combined.accepted)
        val = vals[best] if best is not None else combined.val_score if combined is not None else None
        records: list[CandidateRecord] = []
        origins = list(plan.get("proposal_origins") or [])
        for i in sorted(scores.keys() | rejected.keys()):
            text, demos = candidates[i]
            origin = origins[i] if demos is None and i < len(origins) else None
            if i in finished:
                done = finished[i]
                records.append(CandidateRecord(text, done.get("minibatch_score"), done.get("val_score"),
                                               bool(done.get("accepted")), str(done.get("why", "")),
                                               done.get("local"), demos, origin))
                continue
            if i in rejected:
                records.append(CandidateRecord(text, None, None, False, rejected[i], locals_.get(i), demos, origin))
                continue
            if i in vals:
                record = CandidateRecord(text, scores[i], vals[i], accepts[i], whys[i], locals_.get(i), demos, origin)
            else:
                leader = kinds[candidates[i][1] is not None]
                record = CandidateRecord(text, scores[i], None, False,
                                         f"not validated: candidate {leader + 1} goes first on the minibatch "
                                         f"({scores[leader]:.3f}; this one {scores[i]:.3f})", locals_.get(i), demos,
                                         origin)
            if record.val_score is not None:
                handles[i].validated(record.val_score, accepted=record.accepted, why=record.why)
            elif i not in cut:  # a cut one stays unfinished: a resumed run validates it from its minibatch score
                handles[i].pruned(accepted=False, why=record.why)
            records.append(record)
        if combined is not None:
            records.append(combined)
    chosen_candidate: Candidate | None = None
    if best is not None:
        chosen_candidate = candidates[best]
    elif combined is not None and combined.accepted:
        chosen_candidate = (combined.instruction, combined.demos)
    return records, chosen_candidate, (float(val) if accepted and val is not None else current_val), budget_hit


COMBINED = "combined"  # the origin of the candidate that joins the round's rewrite and its demos


def _combination(ctx: RoundContext, number: int, chosen: str, parent: str, program: dspy.Module,
                 candidate: Candidate, rival: float | None, current_val: float,
                 stack: contextlib.ExitStack) -> CandidateRecord:
    """The round's best rewrite with its demos candidate's demos, validated: taken when it passes the acceptance
    rule and, if the demos alone passed too (valset `rival`), beats them. A run cut short and resumed finds its
    decision in the study."""
    text, demos = candidate
    key = _key(number, chosen, parent, text, demos)
    done = ctx.ledger.finished(key)
    if done is not None:
        return CandidateRecord(text, None, done.get("val_score"), bool(done.get("accepted")), str(done.get("why", "")),
                               None, demos, COMBINED)
    calls = ctx.validation_calls(chosen)  # all of them: no minibatch run answered any under this prompt
    if ctx.budget.exhausted() or _short(ctx, calls):  # no trial: a resumed run tries it
        return CandidateRecord(text, None, None, False, _not_validated(ctx, calls), None, demos, COMBINED)
    handle = stack.enter_context(ctx.ledger.trial(key, {"round": number, "predictor": chosen, "instruction": text,
                                                        "demos": len(demos or []), "origin": COMBINED}))
    val = ctx.evaluator.evaluate(with_instruction(program, chosen, text, demos), ctx.valset).accuracy
    decision = ctx.acceptance.on_valset(current_val, val)
    accepted = decision.ok and (rival is None or val > rival)
    if not decision.ok:
        why = decision.why
    elif accepted:
        why = decision.why + ("" if rival is None else f", and above the demos alone ({rival:.3f})")
    else:
        why = f"rejected: valset {val:.3f} not above the demos alone ({rival or 0.0:.3f})"
    handle.validated(val, accepted=accepted, why=why)
    log.info("round %d: the rewrite with the demos for %s: %s", number, chosen, why)
    return CandidateRecord(text, None, val, accepted, why, None, demos, COMBINED)


def _short(ctx: RoundContext, calls: int) -> bool:
    """True when fewer LM calls are left than `calls` (0: not known, never short)."""
    left = ctx.budget.left()
    return left is not None and 0 < calls and left < calls


def _not_validated(ctx: RoundContext, calls: int) -> str:
    if ctx.budget.exhausted():
        return f"not validated: {ctx.budget.why_spent()}"
    return f"not validated: {ctx.budget.left()} LM calls left, a validation takes at least {calls}"
