"""The settings objective: a candidate that changes the round's target op's settings (`programs/tunable.py`), scored
on the training questions' evidence as the candidate program forms it, and what it costs against the seed.

A settings change changes what the op is given (a window of 2 turns instead of 6), so the local set's recorded
prompts do not apply. The candidate program instead runs the training conversations under a scoped replay
(`ScopeControl`): the memo serves every call it already holds, the calls the target's role does not need are
skipped (their op's empty outputs), and the rest run live: for an op that forms memory, only its calls that read a
training question's evidence turn; for an update op, the write path; for a retrieval or the answer, the write path
(mostly served) and the read path. Each training question then counts as carried when the target's calls carry
its needed information, as the local set judges them (`local_set.py`; for an op without a prompt, its output on
the question's read path): `fixed` against the seed program's own scoped run, `lost` the other way.

The cost of a candidate is a dry run of the program on the training conversations under an instant scripted LM
(`estimate.count_work`): LM calls per conversation and prompt words per answer, each against the seed's. A
candidate above `cost_limit` times the seed on either is rejected whatever it carries, before any LM call is made
for it.

    objective = SettingsObjective(target, evaluator, trainset, seed_program, book)
    score = objective.score(program, candidate)      # SettingsScore: carried / fixed / lost, and the cost
    SettingsGate(objective, margin=1, cost_limit=1.5).check(program, candidate)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dspy

from memtrace_opt.attribution import GraphView, NeededInfo, Provenance, find_evidence, split_evidence_ids
from memtrace_opt.data import Conversation
from memtrace_opt.memory import LMOperation, Operation, OpRole, role_for_name
from memtrace_opt.memory.values import to_jsonable
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.evidence import GraphCache
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.evaluation.local_set import build_local_set
from memtrace_opt.optimizers.evaluation.scoped import SCOPED
from memtrace_opt.optimizers.gates.local_objective import ReplyBook
from memtrace_opt.optimizers.gates.objective import NetGain
from memtrace_opt.tracing import OpEvent

__all__ = ["Cost", "ScopeControl", "SettingsGate", "SettingsObjective", "SettingsScore", "program_cost", "target_op"]

log = logging.getLogger(__name__)

_WRITE = (OpRole.FORMS, OpRole.UPDATES, OpRole.DELETES)


@dataclass(frozen=True)
class Cost:
    """What a program spends on the training conversations: LM calls per conversation, prompt words per answer."""

    calls_per_conversation: float
    prompt_words_per_answer: float

    def over(self, seed: Cost, limit: float) -> bool:
        """Whether this cost passes `limit` times the seed's on either measure."""
        return (self.calls_per_conversation > limit * max(seed.calls_per_conversation, 1e-9)
                or self.prompt_words_per_answer > limit * max(seed.prompt_words_per_answer, 1e-9))


@dataclass(frozen=True)
class SettingsScore(NetGain):
    """A settings candidate on the training questions: questions whose needed information its target carried
    (`carried` of `targets`), against the seed (`fixed`, `lost`), the LM calls its scoped run made, and its cost
    beside the seed's."""

    targets: int
    carried: int
    seed_carried: int
    fixed: int
    lost: int
    lm_calls: int
    cost: Mapping[str, float] = field(default_factory=dict)
    seed_cost: Mapping[str, float] = field(default_factory=dict)
    over_cost: bool = False

    @property
    def why(self) -> str:
        cost = (f"; {self.cost.get('calls_per_conversation', 0):.1f} LM calls a conversation (seed "
                f"{self.seed_cost.get('calls_per_conversation', 0):.1f}), {self.cost.get('prompt_words_per_answer', 0):.0f} "
                f"prompt words an answer (seed {self.seed_cost.get('prompt_words_per_answer', 0):.0f})") if self.cost else ""
        return (f"settings: {self.carried}/{self.targets} questions' information carried (seed {self.seed_carried}): "
                f"+{self.fixed} fixed, -{self.lost} lost{cost}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost"], out["seed_cost"] = dict(self.cost), dict(self.seed_cost)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SettingsScore:
        return cls(int(data["targets"]), int(data["carried"]), int(data["seed_carried"]), int(data["fixed"]),
                   int(data["lost"]), int(data.get("lm_calls") or 0), dict(data.get("cost") or {}),
                   dict(data.get("seed_cost") or {}), bool(data.get("over_cost")))


def target_op(program: dspy.Module, target: str) -> Operation | None:
    """The op a round's target names: the innermost op holding the predictor `target`, else the op named `target`."""
    ops = [(path.removeprefix("self."), module) for path, module in program.named_sub_modules()
           if isinstance(module, Operation)]
    holders = [(name, op) for name, op in ops if isinstance(op, LMOperation) and target.startswith(name + ".")]
    if holders:
        return max(holders, key=lambda pair: len(pair[0]))[1]
    return next((op for _, op in ops if op.op_name == target), None)


def _role(op: Operation | None) -> OpRole:
    return (op.role or role_for_name(op.op_name) or OpRole.NONE) if op is not None else OpRole.NONE


class ScopeControl:
    """The scoped replay of a settings candidate (module doc): `lookup` serves the memo; `skips` says which calls
    the target's role does not need. Never raises."""

    def __init__(self, inner: Any, target: str, role: OpRole, evidence: Collection[str]) -> None:
        self.inner, self.target, self.role, self.evidence = inner, target, role, frozenset(evidence)

    def lookup(self, op: Any, key: str) -> tuple[dict[str, Any], str] | None:
        return self.inner.lookup(op, key)

    def skips(self, op: Operation, inputs: dict[str, Any]) -> bool:
        if not isinstance(op, LMOperation):
            return False
        role = _role(op)
        if op.op_name == self.target:
            return self.role is OpRole.FORMS and bool(self.evidence) and not (_turns(inputs) & self.evidence)
        if self.role is OpRole.FORMS:
            return role is not OpRole.FORMS  # what forms the units the target reads runs; the rest is not needed
        if self.role is OpRole.UPDATES:
            return role not in _WRITE
        if self.role is OpRole.RETRIEVES:
            return role is OpRole.ANSWERS
        return False


def _turns(inputs: Mapping[str, Any]) -> set[str]:
    """The dialogue ids of the turns (and of the units' source turns) an op call was given."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            if isinstance(value.get("dia_id"), str):
                found.add(value["dia_id"])
            found.update(str(t) for t in value.get("source_turns") or () if isinstance(t, str))
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(to_jsonable(dict(inputs)))
    return found


class SettingsObjective:
    """Scores settings candidates for the round's `target` (a predictor, or an op without a prompt) on the training
    questions (`trainset`), the seed program's own score computed once (module doc). Scores are kept in `book`
    by settings, so a resumed round scores none twice."""

    def __init__(self, target: str, evaluator: CachedEvaluator, trainset: Sequence[CaseRef], seed: dspy.Module,
                 book: ReplyBook, *, cost_limit: float = 1.5) -> None:
        self.target, self.evaluator, self.trainset, self.book = target, evaluator, list(trainset), book
        self.cost_limit = cost_limit
        op = target_op(seed, target)
        self.op_name = op.op_name if op is not None else target
        self.role = _role(op)
        self.evidence = {dia for case in self.trainset for dia in split_evidence_ids(case.question.evidence)}
        self._seed: tuple[dict[str, bool], Cost] | None = None
        self.seed_program = seed
        #: each predictor's calls in the seed's scoped run that the scope did not skip (served or live): what a
        #: trial may run again (`PhasePrices.trial`); filled by `seed()`
        self.in_scope: dict[str, int] = {}

    @property
    def seeded(self) -> bool:
        return self._seed is not None

    def seed(self) -> tuple[dict[str, bool], Cost]:
        if self._seed is None:
            carried, run = self._carried(self.seed_program)
            self.in_scope = _in_scope(run)
            self._seed = carried, self._cost(self.seed_program)
        return self._seed

    def score(self, program: dspy.Module, candidate: Candidate) -> SettingsScore:
        key = json.dumps({"target": self.target, "settings": dict(candidate.settings)}, sort_keys=True, default=str)
        known = self.book.get(key)
        if known is not None:
            return SettingsScore.from_dict(json.loads(known))
        seed_carried, seed_cost = self.seed()
        applied = candidate.apply(program)
        cost = self._cost(applied)
        if cost.over(seed_cost, self.cost_limit):  # rejected whatever it carries: not worth a live call
            over = SettingsScore(len(seed_carried), 0, sum(seed_carried.values()), 0, 0, 0, asdict(cost),
                                 asdict(seed_cost), True)
            self.book.put(key, json.dumps(over.to_dict()))
            return over
        carried, run = self._carried(applied)
        calls = run.lm_calls
        questions = sorted(seed_carried.keys() | carried.keys())
        now = [carried.get(q, False) for q in questions]
        before = [seed_carried.get(q, False) for q in questions]
        score = SettingsScore(len(questions), sum(now), sum(before), sum(n and not b for n, b in zip(now, before, strict=True)),
                              sum(b and not n for n, b in zip(now, before, strict=True)), calls, asdict(cost),
                              asdict(seed_cost), cost.over(seed_cost, self.cost_limit))
        self.book.put(key, json.dumps(score.to_dict()))
        return score

    def _carried(self, program: dspy.Module) -> tuple[dict[str, bool], EvalResult]:
        """Per training question with evidence, whether the target carried its needed information in `program`'s
        scoped run; and that run."""
        run = self.evaluator.evaluate(program, self.trainset,
                                      wrap=lambda control: ScopeControl(control, self.op_name, self.role, self.evidence))
        if isinstance(target_op(program, self.target), LMOperation):
            local = build_local_set(program, self.target, run, self.evaluator.memo)
            carried: dict[str, bool] = {}
            for call in local.calls:
                for target, ok in zip(call.targets, call.seed_carried, strict=True):
                    carried[target.case_id] = carried.get(target.case_id, False) or ok
            questions = {case.case_id for case in run.cases if case.question.evidence and not case.question.abstention}
            return {q: carried.get(q, False) for q in questions}, run
        return _read_path_carried(run, self.op_name), run

    def _cost(self, program: dspy.Module) -> Cost:
        return program_cost(program, self.trainset)


def program_cost(program: dspy.Module, cases: Sequence[CaseRef]) -> Cost:
    """What `program` spends on the conversations of `cases` (each with those cases' questions), by a dry run under
    an instant scripted LM: LM calls per conversation, and prompt words of the answering call per answer."""
    from memtrace_opt.estimate import count_work

    by_id: dict[str, Conversation] = {}
    for case in cases:
        by_id.setdefault(case.conversation.sample_id, case.conversation)
    work = count_work(program, list(by_id.values()))
    per = [len(w.write) + len(w.read()) for w in work.conversations.values()]
    reads = [calls[-1] for w in work.conversations.values() for calls in w.answers.values() if calls]
    return Cost(sum(per) / max(1, len(per)), sum(c.prompt_words for c in reads) / max(1, len(reads)))


def _in_scope(run: EvalResult) -> dict[str, int]:
    """Each predictor's op calls in `run`'s traces that its scoped replay did not skip."""
    counts: dict[str, int] = {}
    for trace in run.traces.values():
        for event in trace.events:
            if isinstance(event, OpEvent) and event.predictor and event.replayed != SCOPED:
                counts[event.predictor] = counts.get(event.predictor, 0) + 1
    return counts


def _read_path_carried(run: EvalResult, op_name: str) -> dict[str, bool]:
    """Per question with an answer op, whether the op named `op_name` on its read path returned its needed
    information (in parts that descend from the question's evidence turns, `Provenance`)."""
    graphs = GraphCache(run)
    out: dict[str, bool] = {}
    for case in run.cases:
        question = case.question
        if question.abstention or not question.answer:
            continue
        view = GraphView(graphs.get(case.conversation_key))
        answer = view.answer_op(case.case_id)
        if answer is None:
            continue
        needed = NeededInfo(question.question, question.answer)
        provenance = Provenance.of(view, find_evidence(view, question.evidence, question.question, question.answer))
        ops = [op for op in view.read_path(answer, case.case_id) if view.op_name(op) == op_name]
        out[case.case_id] = any(needed.holds(provenance.output_parts(op)) for op in ops)
    return out


@dataclass(frozen=True)
class SettingsGate:
    """The settings objective with its threshold: a settings candidate goes on when it carries at least `margin`
    more questions' information than the seed, net, within the cost limit."""

    objective: SettingsObjective
    margin: int = 1

    def check(self, program: dspy.Module, candidate: Candidate) -> tuple[SettingsScore, Decision]:
        score = self.objective.score(program, candidate)
        if score.over_cost:
            return score, Decision.of(Status.REJECTED, "rejected: over the cost limit ({limit}x the seed's): {why}",
                                      limit=self.objective.cost_limit, why=score.why)
        if score.gain >= max(1, self.margin):
            return score, Decision.of(Status.PASSED, "{why}", why=score.why)
        return score, Decision.of(Status.REJECTED, "rejected by the settings objective: {why} (needs +{margin} net)",
                                  why=score.why, margin=max(1, self.margin))
