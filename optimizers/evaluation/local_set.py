"""The local set of a predictor: its recorded calls in a traced run that read a question's evidence, each with the
information it should carry. A labelled set for one step of the pipeline, built from the graph with no replay.

For the predictor a round chose, every call of it in the traced training run (failed and correct questions
alike) that descends from an evidence turn of a training question (gold evidence ids, else pseudo-evidence) and
whose recorded input holds that question's needed information (`NeededInfo`) gets a target, by the role its op
declares (`memory/roles.py`):

- an op that forms units (an extraction, an episode, an event log): the earliest such call of each question; its
  output carries the needed information in one part (one fact of a list, as attribution tests it);
- an op that updates units (a memory decision): every such call; what it leaves live carries the needed
  information (the op's `live_after(fields, outputs)`: the memories shown with its actions applied, and what it
  adds); an update op without `live_after` is judged by its output, as a forming op is;
- the op that answers: the question's own answer call, when it was shown a unit that descends from an evidence
  turn (`Provenance`: an input that holds the answer's words by coincidence alone does not count); the answer is
  right by the token rule.

A target whose information no output of the predictor could carry is left out and counted (`excluded`): no call
of the predictor read the evidence (`unread`), or the call's input did not hold the information (`input_lacks`;
for instance a gold answer with glued words, or a multi-hop answer whose turns reached different calls). A
confirmed repair's added facts become its call's target (`LocalTarget.items`). The loop leaves out the targets of
questions attribution found to be GoldError (`without`, counted as `gold_error`): a wrong gold answer is no target.

    local = build_local_set(program, "extract_facts.predict", evaluation, memo)
    local.size, local.seed_carried, local.excluded, local.to_dict()
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import dspy
import networkx as nx

from memtrace_opt.attribution import GraphView, NeededInfo, Provenance, find_evidence, value_parts
from memtrace_opt.data import Question
from memtrace_opt.memory import LMOperation, Operation, OpRole, role_for_name
from memtrace_opt.metrics import score_answer
from memtrace_opt.metrics.text import answer_tokens
from memtrace_opt.optimizers.core.evidence import prompt_fields, without_adapter_tail
from memtrace_opt.optimizers.evaluation.adapter import CHARS_PER_TOKEN, MemoryAdapter
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.carry import TARGET_SHARE, item_share
from memtrace_opt.optimizers.evaluation.evidence import GraphCache, op_event
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo

__all__ = ["GOLD_ERROR_TARGETS", "LOCAL_SET_VERSION", "KeepsLive", "LocalCall", "LocalSet", "LocalTarget",
           "ReplyReader", "RerendersCalls", "build_local_set", "made_from", "predictor_op", "rerenders"]

LOCAL_SET_VERSION = 1
GOLD_ERROR_TARGETS = "gold_error"  # `excluded`'s count of targets left out: questions found to be GoldError



@runtime_checkable
class KeepsLive(Protocol):
    """An update op that can say what one of its calls leaves live: `live_after(fields, outputs)` gets the call's
    input fields as the prompt showed them (name -> text) and its parsed output fields, and returns the texts of
    the units live after its actions among those it was shown or wrote, or None when it cannot tell (a field
    missing, a value that does not parse). It must not raise."""

    def live_after(self, fields: Mapping[str, str], outputs: Mapping[str, Any]) -> list[str] | None: ...


@runtime_checkable
class RerendersCalls(Protocol):
    """An LM op whose prompt another library builds (`LMOperation.adapter_prompt` False) that can still re-run one
    of its recorded calls under another instruction: `rerender(prompt, instruction)` gives the messages the library
    would send for the call whose recorded user message is `prompt` (None where it cannot say),
    `prompt_head(instruction)` the part of those messages no call changes (the library's system prompt) with the
    instruction's part, `read_outputs(reply)` the reply as the library reads it (None: it reads nothing),
    `call_options()` the options of the library's calls (its reply cap). None of them may raise."""

    def rerender(self, prompt: str, instruction: str) -> list[dict[str, str]] | None: ...

    def prompt_head(self, instruction: str) -> list[dict[str, str]]: ...

    def read_outputs(self, reply: str) -> dict[str, Any] | None: ...

    def call_options(self) -> dict[str, Any]: ...


def rerenders(op: Any) -> bool:
    """Whether a recorded call of `op` can be re-run under another instruction: a DSPy adapter prompt, or a
    library's prompt the op can re-render (`RerendersCalls`)."""
    return op is not None and (getattr(op, "adapter_prompt", True) or isinstance(op, RerendersCalls))


@dataclass(frozen=True)
class LocalTarget:
    """One piece of information a call should carry: a question's needed information (its gold answer), or,
    with `items`, what a confirmed repair of the call adds (each item by `TARGET_SHARE` of its content words in
    one part)."""

    case_id: str
    question: str
    gold: str
    category: str = ""
    abstention: bool = False
    items: tuple[str, ...] = ()

    def carried(self, role: OpRole, parts: Sequence[str], answer: str = "") -> bool:
        """Whether an output (its `parts`; for the answering op, its `answer`) carries this target."""
        if self.items:
            return all(any(item_share(item, part) >= TARGET_SHARE for part in parts) for item in self.items)
        if role is OpRole.ANSWERS:
            question = Question(self.case_id, self.question, self.gold, self.category, None, (),
                                abstention=self.abstention)
            return score_answer(question, answer).correct_by_rule
        return NeededInfo(self.question, self.gold).holds(list(parts))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"case_id": self.case_id, "question": self.question, "gold": self.gold}
        if self.category:
            out["category"] = self.category
        if self.abstention:
            out["abstention"] = True
        if self.items:
            out["items"] = list(self.items)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalTarget:
        return cls(str(data["case_id"]), str(data["question"]), str(data["gold"]), str(data.get("category") or ""),
                   bool(data.get("abstention")), tuple(str(i) for i in data.get("items") or ()))


@dataclass(frozen=True)
class LocalCall:
    """A recorded call of the predictor: `key` (conversation key and op id), the user message it was shown, the
    seed's reply, its targets and, per target, whether the seed's reply carried it."""

    key: str
    prompt: str
    response: str
    targets: tuple[LocalTarget, ...]
    seed_carried: tuple[bool, ...]
    seed_size: int  # characters of the seed's parsed output

    @property
    def case_ids(self) -> frozenset[str]:
        return frozenset(t.case_id for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "prompt": self.prompt, "response": self.response,
                "targets": [t.to_dict() for t in self.targets], "seed_carried": list(self.seed_carried),
                "seed_size": self.seed_size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalCall:
        return cls(str(data["key"]), str(data["prompt"]), str(data["response"]),
                   tuple(LocalTarget.from_dict(t) for t in data.get("targets") or ()),
                   tuple(bool(c) for c in data.get("seed_carried") or ()), int(data.get("seed_size") or 0))


@dataclass(frozen=True)
class LocalSet:
    """The local set of `predictor` (module doc): its calls, the role that sets their targets, and the targets
    left out by why."""

    predictor: str
    role: OpRole
    calls: tuple[LocalCall, ...] = ()
    excluded: Mapping[str, int] = field(default_factory=dict)
    reply_chars: int = 0  # the op's reply cap in characters (0: none)

    @property
    def size(self) -> int:
        """Targets in the set."""
        return sum(len(c.targets) for c in self.calls)

    @property
    def seed_carried(self) -> int:
        return sum(sum(c.seed_carried) for c in self.calls)

    @property
    def bloat_limit(self) -> int:
        """The largest output a candidate may write on a call (characters): the larger of the seed's largest on
        the set and the op's own reply cap (`reply_chars`; twice the seed's largest for an op without one). Above
        it an output is bloat: an extraction that copies its window "carries" everything and ruins retrieval."""
        largest = max((c.seed_size for c in self.calls), default=0)
        return max(largest, self.reply_chars or 2 * largest)

    def with_repairs(self, repairs: Iterable[Any], evaluation: EvalResult | None = None) -> LocalSet:
        """This set with each confirmed repair's added items as its call's target (`Repair`: `case_id`, `op_id`,
        `added`, `prompt`, `response`); a repaired call not in the set joins it (its conversation read from
        `evaluation`'s cases)."""
        by_op = {(r.case_id, r.op_id): r for r in repairs if r.added}
        if not by_op:
            return self
        calls, seen = [], set()
        for call in self.calls:
            op_id = call.key.rsplit("/", 1)[-1]
            targets = []
            for t in call.targets:
                repair = by_op.get((t.case_id, op_id))
                seen.update({(t.case_id, op_id)} if repair is not None else set())
                targets.append(replace(t, items=tuple(repair.added)) if repair is not None else t)
            carried = tuple(False if t.items else c for t, c in zip(targets, call.seed_carried, strict=True))
            calls.append(replace(call, targets=tuple(targets), seed_carried=carried))
        cases = evaluation.by_id() if evaluation is not None else {}
        for (case_id, op_id), repair in by_op.items():
            case = cases.get(case_id)
            if (case_id, op_id) in seen or case is None:
                continue
            target = replace(_target(case), items=tuple(repair.added))
            calls.append(LocalCall(f"{case.conversation_key}/{op_id}", repair.prompt, repair.response, (target,),
                                   (False,), 0))
        return replace(self, calls=tuple(calls))

    def without(self, case_ids: Collection[str], why: str) -> LocalSet:
        """This set less the targets of `case_ids` (counted under `why` in `excluded`); a call left with no target
        leaves the set."""
        if not case_ids:
            return self
        calls, dropped = [], 0
        for call in self.calls:
            kept = [(t, c) for t, c in zip(call.targets, call.seed_carried, strict=True) if t.case_id not in case_ids]
            dropped += len(call.targets) - len(kept)
            if kept:
                calls.append(replace(call, targets=tuple(t for t, _ in kept), seed_carried=tuple(c for _, c in kept)))
        if not dropped:
            return self
        return replace(self, calls=tuple(calls), excluded={**self.excluded, why: self.excluded.get(why, 0) + dropped})

    def sample(self, n: int, seed: int = 0) -> LocalSet:
        """At most `n` of the calls, seeded: half (or more, where too few carried) from calls the seed lost a target
        on, the rest from calls it carried every target on; the calls left out are counted (`over_max_calls`)."""
        if len(self.calls) <= n:
            return self
        rng = random.Random(seed)
        lost = [c for c in self.calls if not all(c.seed_carried)]
        kept = [c for c in self.calls if all(c.seed_carried)]
        rng.shuffle(lost)
        rng.shuffle(kept)
        take_kept = min(len(kept), n // 2)
        chosen = {c.key for c in lost[: n - take_kept]} | {c.key for c in kept[:take_kept]}
        chosen |= {c.key for c in kept[take_kept: take_kept + n - len(chosen)]}
        calls = tuple(c for c in self.calls if c.key in chosen)
        left = sum(len(c.targets) for c in self.calls if c.key not in chosen)
        return replace(self, calls=calls, excluded={**self.excluded, "over_max_calls": left})

    def interleaved(self, seed: int = 0) -> LocalSet:
        """The same calls in the order rungs of successive halving take them: seeded, a call the seed lost a target
        on, then one it carried every target on, and so on, so that the first few calls can show both what a
        candidate fixes and what it loses."""
        rng = random.Random(seed)
        lost = [c for c in self.calls if not all(c.seed_carried)]
        kept = [c for c in self.calls if all(c.seed_carried)]
        rng.shuffle(lost)
        rng.shuffle(kept)
        order: list[LocalCall] = []
        for i in range(max(len(lost), len(kept))):
            order += [c[i] for c in (lost, kept) if i < len(c)]
        return replace(self, calls=tuple(order))

    def summary(self) -> dict[str, Any]:
        """Size and seed score, for the round plan and the manifest."""
        return {"predictor": self.predictor, "role": self.role.value, "calls": len(self.calls), "targets": self.size,
                "seed_carried": self.seed_carried, "excluded": dict(self.excluded)}

    def to_dict(self) -> dict[str, Any]:
        return {"version": LOCAL_SET_VERSION, "predictor": self.predictor, "role": self.role.value,
                "calls": [c.to_dict() for c in self.calls], "excluded": dict(self.excluded),
                "reply_chars": self.reply_chars}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalSet:
        return cls(str(data["predictor"]), OpRole(str(data["role"])),
                   tuple(LocalCall.from_dict(c) for c in data.get("calls") or ()),
                   {str(k): int(v) for k, v in (data.get("excluded") or {}).items()}, int(data.get("reply_chars") or 0))


def predictor_op(program: dspy.Module, predictor: str) -> Operation | None:
    """The LM-backed op of `program` whose predictor is named `predictor` (as `named_predictors()` names it)."""
    owners = [(path.removeprefix("self."), module) for path, module in program.named_sub_modules()
              if isinstance(module, LMOperation)]
    owners = [(name, module) for name, module in owners if predictor.startswith(name + ".")]
    return max(owners, key=lambda pair: len(pair[0]))[1] if owners else None  # the innermost op holding it


def op_role(op: Operation | None) -> OpRole | None:
    """The role `op` declares, else the one its name suggests."""
    if op is None:
        return None
    return op.role or role_for_name(op.op_name)


class ReplyReader:
    """The predictor's signature and adapter, to read a reply as the op reads it."""

    def __init__(self, program: dspy.Module, predictor: str) -> None:
        target = dict(program.named_predictors())[predictor]
        self.signature = target.signature
        self.adapter = dspy.settings.adapter or dspy.ChatAdapter()

    def outputs(self, reply: str) -> dict[str, Any] | None:
        try:
            parsed = self.adapter.parse(self.signature, reply)
        except Exception:  # noqa: BLE001 - a reply that does not parse carries nothing
            return None
        return dict(parsed) if isinstance(parsed, Mapping) else None


@dataclass(frozen=True)
class CallReading:
    """What one reply of a call gives the local test: the output's parts, the answer (the answering op) and its
    size in characters."""

    parts: tuple[str, ...]
    answer: str
    size: int


def read_reply(role: OpRole, op: Operation | None, parsed: ReplyReader, prompt: str, reply: str) -> CallReading:
    """`reply` to the call shown `prompt`, read for its targets: what it leaves live (an update op that can say,
    `KeepsLive`), else its output fields in parts."""
    outputs = op.read_outputs(reply) if isinstance(op, RerendersCalls) else parsed.outputs(reply)
    if outputs is None:
        return CallReading((), "", 0)
    parts = [part for value in outputs.values() for part in value_parts(value)]
    size = sum(len(p) for p in parts)
    answer = str(next(iter(outputs.values()), "") or "") if role is OpRole.ANSWERS else ""
    if role is OpRole.UPDATES and isinstance(op, KeepsLive):
        live = op.live_after(prompt_fields(prompt), outputs)
        if live is not None:
            return CallReading(tuple(live), answer, size)
    return CallReading(tuple(parts), answer, size)


def build_local_set(program: dspy.Module, predictor: str, evaluation: EvalResult, memo: ReplayMemo,
                    *, max_calls: int | None = None) -> LocalSet:
    """The local set of `predictor` of `program` in `evaluation`'s traced runs (module doc); at most `max_calls`
    calls (the earliest first). Empty for an op that retrieves, deletes or does nothing a target can say, and for
    one whose calls cannot be re-run under another instruction (`rerenders`)."""
    op = predictor_op(program, predictor)
    role = op_role(op) or OpRole.NONE
    if role not in (OpRole.FORMS, OpRole.UPDATES, OpRole.ANSWERS) or not rerenders(op):
        return LocalSet(predictor, role)
    parsed = ReplyReader(program, predictor)
    graphs = GraphCache(evaluation)
    excluded: Counter[str] = Counter()
    targets: dict[str, list[LocalTarget]] = {}
    prompts: dict[str, tuple[str, str]] = {}
    order: dict[str, tuple[str, int]] = {}
    for case in evaluation.cases:
        found = _calls_of_case(case, predictor, role, graphs.get(case.conversation_key), evaluation, memo)
        if isinstance(found, str):
            excluded[found] += 1
            continue
        for key, seq, exchange in found:
            targets.setdefault(key, []).append(_target(case))
            prompts[key] = (exchange.prompt, exchange.response)
            order[key] = (case.conversation_key, seq)
    calls = []
    for key in sorted(targets, key=lambda k: order[k]):
        prompt, response = prompts[key]
        reading = read_reply(role, op, parsed, prompt, response)
        call_targets = tuple(targets[key])
        calls.append(LocalCall(key, prompt, response, call_targets,
                               tuple(t.carried(role, reading.parts, reading.answer) for t in call_targets),
                               reading.size))
    if max_calls is not None and len(calls) > max_calls:
        excluded["over_max_calls"] += sum(len(c.targets) for c in calls[max_calls:])
        calls = calls[:max_calls]
    return LocalSet(predictor, role, tuple(calls), dict(sorted(excluded.items())), _reply_chars(program, predictor, op))


def _reply_chars(program: dspy.Module, predictor: str, op: Operation | None) -> int:
    """The predictor's reply cap in characters: its call configuration's, else the library's calls' (an op that
    re-renders a library's prompt); 0 for none."""
    chars = MemoryAdapter.reply_chars(program, predictor)
    if chars or not isinstance(op, RerendersCalls):
        return chars
    cap = op.call_options().get("max_tokens")
    return int(cap) * CHARS_PER_TOKEN if cap else 0


def _target(case: CaseResult) -> LocalTarget:
    q = case.question
    return LocalTarget(case.case_id, q.question, q.answer, q.category or "", bool(q.abstention))


def _calls_of_case(case: CaseResult, predictor: str, role: OpRole, graph: nx.MultiDiGraph, evaluation: EvalResult,
                   memo: ReplayMemo) -> list[tuple[str, int, Any]] | str:
    """The calls of `predictor` that get `case`'s target, as (key, seq, exchange); or why none does."""
    question = case.question
    view = GraphView(graph)
    if role is OpRole.ANSWERS:
        answer = view.answer_op(case.case_id)
        seqs = [view.seq(answer)] if answer is not None and view.predictor(answer) == predictor else []
        if seqs and answer is not None and not question.abstention and not _shown_evidence(view, question, answer):
            return "input_lacks"
    else:
        if question.abstention or not answer_tokens(question.answer):
            return "no_answer_words"
        evidence = find_evidence(view, question.evidence, question.question, question.answer)
        below: set[str] = set()
        for turn in evidence.turns:
            below |= nx.descendants(graph, turn)
        seqs = sorted(view.seq(n) for n in below if view.is_op(n) and view.predictor(n) == predictor)
    if not seqs:
        return "unread"
    needed = NeededInfo(question.question, question.answer)
    found: list[tuple[str, int, Any]] = []
    for seq in seqs:
        event = op_event(evaluation, case.conversation_key, seq)
        exchange = memo.exchange(event.content_key) if event is not None else None
        if exchange is None:
            continue
        if role is not OpRole.ANSWERS or not question.abstention:
            if not needed.holds([_input_text(role, exchange.prompt)]):
                continue
        found.append((f"{case.conversation_key}/op:{seq}", seq, exchange))
        if role is not OpRole.UPDATES:
            break  # a forming op: the earliest call that read it; the answering op: its one call
    return found or "input_lacks"


def _shown_evidence(view: GraphView, question: Question, op: str) -> bool:
    """Whether `op` was shown something that descends from the question's evidence turns (its prompt is tested for
    the needed information itself, as the prompt showed it)."""
    evidence = find_evidence(view, question.evidence, question.question, question.answer)
    return bool(Provenance.of(view, evidence).input_parts(op))


def _input_text(role: OpRole, prompt: str) -> str:
    """What a call was shown, as one text for the needed-information test: an update op's items (facts and memories,
    each a self-contained line), else the whole message (its date lines count for every line)."""
    text = without_adapter_tail(prompt)
    if role is not OpRole.UPDATES:
        return text
    lines: list[str] = []
    for value in prompt_fields(prompt).values():
        try:
            lines += value_parts(json.loads(value))
        except ValueError:
            lines.append(value)
    return "\n".join(lines)


def made_from(local: LocalSet, demos: Sequence[Mapping[str, Any]] | None, shown: Sequence[str] = ()) -> tuple[str, ...]:
    """The keys of `local`'s calls a candidate was made from: the calls one of its `demos` shows (every input field
    as the call's prompt gave it) and the calls whose prompt is among `shown` (what a proposer was shown, the
    adapter's reply-format reminder left out). The local objective scores the candidate on the other calls."""
    seen = {" ".join(text.split()) for text in shown}
    found = []
    for call in local.calls:
        fields = prompt_fields(call.prompt)
        if " ".join(without_adapter_tail(call.prompt).split()) in seen or any(
                fields and all(_shows(str(demo.get(name, "")), value) for name, value in fields.items())
                for demo in demos or ()):
            found.append(call.key)
    return tuple(found)


def _shows(shown: str, value: str) -> bool:
    """Whether a demo's field shows a call's field: the same text, or a cut of it (most of its lines are lines of
    the call's: an answer step's demo keeps only the lines around its answer)."""
    shown, value = shown.strip(), value.strip()
    if shown == value:
        return True
    lines = [line.strip() for line in shown.splitlines() if line.strip()]
    kept = {line.strip() for line in value.splitlines()}
    return len(lines) >= 2 and sum(line in kept for line in lines) >= 0.8 * len(lines)
