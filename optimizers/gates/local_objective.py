"""The local objective: a candidate prompt scored on the chosen predictor's local set (`evaluation/local_set.py`)
by re-running only those calls, one LM call each, with no replay of the conversation.

Each call of the set is re-run with the prompt it was recorded with (its user message) under the candidate's
system message and demos, and its reply read as the op reads it; a call whose prompt a library built is
re-rendered by its op as the library would build it under the candidate (`RerendersCalls`: Mem0 2.x's custom
instructions). Per target (a question's needed information, or a repair's added facts) the score counts what the candidate `carried`, what it `fixed` (carried where the
seed's reply did not) and `lost` (carried by the seed, not by it); a call whose output is larger than the largest
the seed wrote on the set is `bloat` and carries nothing (an extraction that copies its window would "carry"
everything and ruin retrieval). The calls a candidate was made from (`Candidate.built_from`: the repaired call
of a repair demo, the calls whose replies became its demos, the blamed calls the reflection LM was shown) are
scored apart: the score that ranks is on the rest, so a demo is never judged on the call it copies.

Replies are kept per (prompt in force, call) in a `ReplyBook` (the study, for a run), so a resumed round, or two
candidates with the same prompt, pays nothing twice.

    objective = LocalObjective(local_set, program, lm, book)
    score = objective.score(program, candidate)     # LocalScore: carried / fixed / lost / bloat, on the rest
    score.gain, score.beats(margin), score.to_dict()
    LocalGate(objective, margin).check(program, candidate)   # the gate: (score, Decision)
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import warnings
from collections.abc import Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import dspy

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.core.knobs import knob
from memtrace_opt.optimizers.evaluation.local_set import (
    LocalCall,
    LocalSet,
    ReplyReader,
    RerendersCalls,
    predictor_op,
    read_reply,
)
from memtrace_opt.optimizers.evaluation.memo import lm_name
from memtrace_opt.optimizers.gates.objective import NetGain

__all__ = ["DictReplyBook", "LocalGate", "LocalObjective", "LocalScore", "LocalSettings", "ReplyBook"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalSettings:
    """The local objective's knobs: on (`local_objective`), a candidate goes to validation only if it carries at
    least `local_margin` more targets than the seed, net, on the calls it was not made from; the best
    `validate_top` of those are validated. The set holds at most `local_calls` calls (a seeded sample, calls the
    seed lost a target on first)."""

    local_objective: bool = knob(True, "Score every candidate on the chosen predictor's local set (its recorded calls "
                                       "that read a training question's evidence, re-run one LM call each) and "
                                       "validate only the best that beat the seed there; off: the local check and "
                                       "the minibatch rank them (default: on).",
                                 flag="--local-objective/--no-local-objective")
    local_margin: int = knob(1, "Targets a candidate must carry beyond the seed's, net, on the local set before it is "
                                "validated.")
    local_calls: int = knob(24, "At most N calls in a round's local set (each candidate re-runs each once).")
    validate_top: int = knob(2, "Validate at most N candidates a round, the best on the local objective first.")

    def __post_init__(self) -> None:
        if self.local_margin < 1 or self.local_calls < 1 or self.validate_top < 1:
            from memtrace_opt.errors import ConfigError

            raise ConfigError("optimizer: local_margin, local_calls and validate_top must be >= 1")


class ReplyBook(Protocol):
    """Where re-run replies are kept by key (a hash of the model, the prompt in force and the call). `get` returns
    None for an unknown key; neither method may raise for a missing entry."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, reply: str) -> None: ...


class DictReplyBook:
    """A `ReplyBook` in a dict (one process, one run)."""

    def __init__(self, store: MutableMapping[str, str] | None = None) -> None:
        self.store: MutableMapping[str, str] = {} if store is None else store
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.store.get(key)

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self.store[key] = reply


@dataclass(frozen=True)
class LocalScore(NetGain):
    """A candidate on the local set: counts over the targets of the calls it was not made from (the ranking
    score), and how many calls were left out as its own (`own_calls`). `lm_calls` is what this scoring cost
    live (replies found in the book cost nothing)."""

    targets: int
    carried: int
    seed_carried: int
    fixed: int
    lost: int
    bloat: int
    calls: int
    own_calls: int = 0
    lm_calls: int = 0

    def beats(self, margin: int) -> bool:
        """Whether the candidate carries at least `margin` more targets than the seed, net (and at least one)."""
        return self.gain >= max(1, margin)

    @property
    def why(self) -> str:
        own = f"; {self.own_calls} calls it was made from left out" if self.own_calls else ""
        return (f"local {self.carried}/{self.targets} carried (seed {self.seed_carried}): +{self.fixed} fixed, "
                f"-{self.lost} lost, {self.bloat} bloated on {self.calls} calls{own}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalScore:
        return cls(**{k: int(data.get(k) or 0) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class _CallResult:
    carried: tuple[bool, ...]
    bloat: bool
    live: bool  # the reply came from the LM, not the book


class LocalObjective:
    """Scores candidates for `local.predictor` of `program` on `local` (module doc), re-running calls with `lm`
    (default: the configured LM), `threads` at a time, keeping replies in `book`."""

    def __init__(self, local: LocalSet, program: dspy.Module, lm: Any = None, book: ReplyBook | None = None,
                 *, threads: int = 1) -> None:
        self.local, self.program, self.lm = local, program, lm
        self.book: ReplyBook = book if book is not None else DictReplyBook()
        self.threads = max(1, threads)
        self.op = predictor_op(program, local.predictor)
        self.parsed = ReplyReader(program, local.predictor)

    def calls_for(self, candidate: Candidate, first: int | None = None) -> list[LocalCall]:
        """The calls `candidate` is scored on: the set's calls it was not made from (all of them when it was made
        from every one), the first `first` of them in the set's order (None: all)."""
        own = set(candidate.built_from)
        calls = [c for c in self.local.calls if c.key not in own] or list(self.local.calls)
        return calls if first is None else calls[:first]

    def head_words(self, program: dspy.Module, candidate: Candidate) -> int:
        """The words the candidate's system message and demos put before each call (its prompt's added length)."""
        return sum(len(str(m.get("content") or "").split()) for m in self._head(program, candidate))

    def score(self, program: dspy.Module, candidate: Candidate, first: int | None = None) -> LocalScore:
        """`candidate` (a prompt for this predictor of `program`) on the calls it was not made from, the first
        `first` of them (a rung of successive halving; None: all); on every call when it was made from all."""
        calls = self.calls_for(candidate, first)
        results = self._run(program, candidate, calls)
        targets = carried = seed = fixed = lost = bloat = live = 0
        for call, result in zip(calls, results, strict=True):
            bloat += result.bloat
            live += result.live
            for now, before in zip(result.carried, call.seed_carried, strict=True):
                targets += 1
                carried += now
                seed += before
                fixed += now and not before
                lost += before and not now
        own = sum(1 for c in self.local.calls if c.key in set(candidate.built_from))
        return LocalScore(targets, carried, seed, fixed, lost, bloat, len(calls),
                          own if own < len(self.local.calls) else 0, live)

    def _run(self, program: dspy.Module, candidate: Candidate, calls: Sequence[LocalCall]) -> list[_CallResult]:
        head = self._head(program, candidate)
        prefix = hashlib.sha256(json.dumps([lm_name(self.lm), head], sort_keys=True).encode()).hexdigest()[:24]
        if self.threads == 1 or len(calls) < 2:
            return [self._one(head, prefix, call, candidate.instruction) for call in calls]
        with ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(lambda call: self._one(head, prefix, call, candidate.instruction), calls))

    def _head(self, program: dspy.Module, candidate: Candidate) -> list[dict[str, str]]:
        """The system message and demo turns the candidate puts before each recorded user message; for an op whose
        prompt a library builds (`RerendersCalls`), the library's fixed part of it and the candidate's
        (`prompt_head`). A call's key and price take this as the candidate's part of its prompt."""
        if isinstance(self.op, RerendersCalls):
            return self.op.prompt_head(candidate.instruction)
        target = dict(program.named_predictors())[self.local.predictor]
        signature = target.signature.with_instructions(candidate.instruction)
        demos = candidate.demo_list()
        adapter = self.parsed.adapter
        return [{"role": "system", "content": adapter.format_system_message(signature)},
                *adapter.format_demos(signature, [dict(d) for d in (target.demos if demos is None else demos)])]

    def _one(self, head: list[dict[str, str]], prefix: str, call: LocalCall, instruction: str) -> _CallResult:
        key = hashlib.sha256(f"{prefix}\x1f{call.key}\x1f{call.prompt}".encode()).hexdigest()[:32]
        reply = self.book.get(key)
        live = reply is None
        if reply is None:
            reply = self._ask(head, call, instruction)
            self.book.put(key, reply)
        reading = read_reply(self.local.role, self.op, self.parsed, call.prompt, reply)
        limit = self.local.bloat_limit
        bloat = limit > 0 and reading.size > limit
        carried = tuple(False if bloat else t.carried(self.local.role, reading.parts, reading.answer)
                        for t in call.targets)
        return _CallResult(carried, bloat, live)

    def _ask(self, head: list[dict[str, str]], call: LocalCall, instruction: str) -> str:
        lm = self.lm if self.lm is not None else dspy.settings.lm
        if isinstance(self.op, RerendersCalls):
            messages, options = self.op.rerender(call.prompt, instruction), self.op.call_options()
            if messages is None:
                log.warning("local objective of %s on %s: the recorded prompt cannot be re-rendered",
                            self.local.predictor, call.key)
                return ""
        else:
            target = dict(self.program.named_predictors())[self.local.predictor]
            messages, options = [*head, {"role": "user", "content": call.prompt}], dict(target.config)
        try:
            with warnings.catch_warnings():  # the message form is what DSPy's own adapters send (dspy is pinned)
                warnings.simplefilter("ignore", DeprecationWarning)
                outputs = lm(messages=messages, **options)
        except Exception as error:  # noqa: BLE001 - a failed call carries nothing; a spent budget is a BaseException
            log.warning("local objective of %s on %s: the call failed: %s", self.local.predictor, call.key, error)
            return ""
        first = outputs[0] if outputs else ""
        return str(first.get("text") or "") if isinstance(first, dict) else str(first or "")


@dataclass(frozen=True)
class LocalGate:
    """The local objective with its threshold: a candidate goes on when it carries at least `margin` more targets
    than the seed, net, on the calls it was not made from (`LocalScore.beats`)."""

    objective: LocalObjective
    margin: int = 1

    def check(self, program: dspy.Module, candidate: Candidate) -> tuple[LocalScore, Decision]:
        score = self.objective.score(program, candidate)
        if score.beats(self.margin):
            return score, Decision.of(Status.PASSED, "{why}", why=score.why)
        return score, Decision.of(Status.REJECTED, "rejected by the local objective: {why} (needs +{margin} net)",
                                  why=score.why, margin=max(1, self.margin))
