"""What a round records, in four plain types with `to_dict` / `from_dict` (dict forms only at the storage boundary):

- `RoundPlan`: what the round found before it scored anything: its minibatch, the blame, the chosen predictor, the
  evidence, its verdicts, the confirmed repairs, the local set and the candidates. Kept in the study (`keys.plan`)
  so that workers sharing the round score the same candidates, and shown by the report.
- `CandidateRecord`: one candidate and what became of it: its local scores rung by rung, its minibatch and valset
  scores, the decision (`status`, `why`).
- `PhaseCost`: one phase of the round (`RoundPhase`), priced before it started (`estimated_seconds`,
  `estimated_calls`) and as it ran (`seconds`, LM calls that reached the model, calls a cache served, tokens);
  `skipped` says why a phase did not run.
- `RoundRecord`: the round's outcome, one entry of the manifest's `rounds`:

    {round, blame_counts, not_fixable, chosen_predictor, previous_instruction, candidates: [CandidateRecord],
     accepted, val_accuracy, lm_calls, cached_calls, seconds, lm_calls_total, findings, outcome,
     phases: [PhaseCost][, repairs][, local_set][, settings_changed]}

  A round the budget or the clock cut short is a `RoundRecord` with `cut: {phase, why}`: the manifest's
  `optimizer.interrupted` holds it (with `phase` and `why` at its top level, as the report reads them), and it is
  not among the rounds (a run resumed with a larger budget finishes it from the reply cache).

`OptimizationResult` is the run's: the program, the baseline and every round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

import dspy

from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.candidate import DEMOS, REFLECTION, Candidate
from memtrace_opt.optimizers.core.decision import Status

__all__ = ["PLAN_SCHEMA_VERSION", "CandidateRecord", "OptimizationResult", "PhaseCost", "RoundPhase", "RoundPlan",
           "RoundRecord", "redact_storage"]

PLAN_SCHEMA_VERSION = 3


class RoundPhase(str, Enum):
    """The phases of a round, in the order they run (`engine.py`)."""

    PLAN = "plan"  # the minibatch traced, its failures attributed, the predictor chosen
    LOCAL_SET = "local set"  # the chosen predictor's local set, from the write path's traces
    REPAIRS = "repairs"  # blamed calls repaired by rule and confirmed on the local set's other calls
    PROPOSALS = "proposals"  # the candidate sources (the reflection LM's rewrites last)
    SETTINGS = "settings"  # the settings search, in its slice of the round
    CANDIDATES = "candidates"  # the candidates scored (successive halving on the local set, or the minibatch)
    VALIDATION = "validation"  # the best candidate on the valset


@dataclass(frozen=True)
class RoundPlan:
    round: int
    minibatch: tuple[str, ...]
    minibatch_score: float
    minibatch_ops: Mapping[str, int]
    blame_counts: Mapping[str, int]
    not_fixable: Mapping[str, int]
    chosen_predictor: str | None
    previous_instruction: str | None
    candidates: tuple[Candidate, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)
    verdicts: tuple[Mapping[str, Any], ...] = ()
    local_cases: tuple[Mapping[str, Any], ...] = ()  # the local check's cases (`--no-local-objective`)
    repairs: tuple[Mapping[str, Any], ...] = ()  # the confirmed repairs (`Repair.to_dict()`)
    repair_counts: Mapping[str, int] = field(default_factory=dict)  # `RepairCounts.to_dict()`
    evidence_ops: Mapping[str, Sequence[int]] = field(default_factory=dict)  # the scoped replay's scope
    local_set: Mapping[str, Any] = field(default_factory=dict)  # `LocalSet.to_dict()`

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self.evidence.get("findings") or []]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": PLAN_SCHEMA_VERSION, "round": self.round, "minibatch": list(self.minibatch),
            "minibatch_score": self.minibatch_score, "minibatch_ops": dict(self.minibatch_ops),
            "blame_counts": dict(self.blame_counts), "not_fixable": dict(self.not_fixable),
            "chosen_predictor": self.chosen_predictor, "previous_instruction": self.previous_instruction,
            "candidates": [c.to_dict() for c in self.candidates], "evidence": dict(self.evidence),
            "verdicts": [dict(v) for v in self.verdicts], "local_cases": [dict(c) for c in self.local_cases],
            "repairs": [dict(r) for r in self.repairs], "repair_counts": dict(self.repair_counts),
            "evidence_ops": {k: list(v) for k, v in self.evidence_ops.items()}, "local_set": dict(self.local_set),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundPlan:
        version = int(data.get("schema_version", 0))
        if version > PLAN_SCHEMA_VERSION:
            raise MemtraceError(f"round plan schema_version {version} is newer than this release reads "
                                f"({PLAN_SCHEMA_VERSION}); upgrade memtrace-opt to resume this study")
        return cls(
            round=int(data["round"]), minibatch=tuple(str(i) for i in data.get("minibatch") or []),
            minibatch_score=float(data.get("minibatch_score") or 0.0),
            minibatch_ops=_counts(data.get("minibatch_ops")), blame_counts=_counts(data.get("blame_counts")),
            not_fixable=_counts(data.get("not_fixable")), chosen_predictor=data.get("chosen_predictor"),
            previous_instruction=data.get("previous_instruction"),
            candidates=tuple(Candidate.from_dict(c) for c in data.get("candidates") or []),
            evidence=dict(data.get("evidence") or {}), verdicts=tuple(dict(v) for v in data.get("verdicts") or []),
            local_cases=tuple(dict(c) for c in data.get("local_cases") or []),
            repairs=tuple(dict(r) for r in data.get("repairs") or []),
            repair_counts=_counts(data.get("repair_counts")),
            evidence_ops={str(k): [int(s) for s in v] for k, v in (data.get("evidence_ops") or {}).items()},
            local_set=dict(data.get("local_set") or {}),
        )


@dataclass(frozen=True)
class CandidateRecord:
    """One candidate of a round and what became of it (module doc). `rungs` are its local scores on more and more
    of the local set's calls (successive halving: `LocalScore.to_dict()` each); `local` the last of them (or, without
    the local objective, its local check's counts)."""

    instruction: str
    minibatch_score: float | None
    val_score: float | None
    accepted: bool
    why: str
    local: dict[str, Any] | None = None
    demos: list[dict[str, Any]] | None = None  # the predictor's whole demo list, for a candidate that sets demos
    origin: str | None = None  # "reflection", "pattern:NAME", "bootstrapped", "repair", "settings", "combined"
    replayed: dict[str, Any] | None = None  # which calls its evaluations re-ran: {minibatch, val} (`scoped.py`)
    settings: dict[str, Any] | None = None  # a settings candidate's new values (its instruction is "")
    status: str = ""  # `Status` value of its last decision
    rungs: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, candidate: Candidate, **values: Any) -> CandidateRecord:
        """The record of `candidate` with `values` (the demos candidate is recorded without an origin, as it
        always was)."""
        base = cls(candidate.instruction, None, None, False, "", demos=candidate.demo_list(),
                   origin=None if candidate.origin == DEMOS else candidate.origin,
                   settings=dict(candidate.settings) or None)
        return replace(base, **values)

    def candidate(self, predictor: str) -> Candidate:
        """This record as the candidate it was, for `predictor`."""
        if self.settings:
            return Candidate.of_settings(predictor, self.settings)
        origin = self.origin or (DEMOS if self.demos is not None else REFLECTION)
        return Candidate.of(predictor, self.instruction, self.demos, origin)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"instruction": self.instruction, "minibatch_score": self.minibatch_score,
                               "val_score": self.val_score, "accepted": self.accepted, "why": self.why}
        optional = {"local": self.local, "demos": self.demos, "origin": self.origin, "replayed": self.replayed,
                    "settings": self.settings}
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.status:
            out["status"] = self.status
        if self.rungs:
            out["rungs"] = [dict(r) for r in self.rungs]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CandidateRecord:
        return cls(
            instruction=str(data["instruction"]), minibatch_score=data.get("minibatch_score"),
            val_score=data.get("val_score"), accepted=bool(data.get("accepted", False)), why=str(data.get("why", "")),
            local=dict(data["local"]) if data.get("local") is not None else None,
            demos=[dict(d) for d in data["demos"]] if data.get("demos") is not None else None,
            origin=data.get("origin"), replayed=dict(data["replayed"]) if data.get("replayed") is not None else None,
            settings=dict(data["settings"]) if data.get("settings") is not None else None,
            status=str(data.get("status") or ""), rungs=[dict(r) for r in data.get("rungs") or []],
        )


@dataclass(frozen=True)
class PhaseCost:
    """One phase of a round, priced before it ran and measured as it ran (module doc). An estimate is None where
    nothing could price it (a model with no known speed); `calls` counts only LM calls that reached the model."""

    phase: RoundPhase
    estimated_seconds: float | None = None
    estimated_calls: int | None = None
    seconds: float = 0.0
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    skipped: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["phase"] = self.phase.value
        out["seconds"] = round(self.seconds, 2)
        out["estimated_seconds"] = None if self.estimated_seconds is None else round(self.estimated_seconds, 1)
        if not self.skipped:
            out.pop("skipped")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhaseCost:
        estimate = data.get("estimated_seconds")
        calls = data.get("estimated_calls")
        return cls(RoundPhase(data["phase"]), None if estimate is None else float(estimate),
                   None if calls is None else int(calls), float(data.get("seconds") or 0.0),
                   int(data.get("calls") or 0), int(data.get("cached") or 0), int(data.get("prompt_tokens") or 0),
                   int(data.get("completion_tokens") or 0), str(data.get("skipped") or ""))


@dataclass(frozen=True)
class RoundRecord:
    round: int
    blame_counts: dict[str, int] = field(default_factory=dict)
    not_fixable: dict[str, int] = field(default_factory=dict)
    chosen_predictor: str | None = None
    previous_instruction: str | None = None
    candidates: list[CandidateRecord] = field(default_factory=list)
    accepted: bool = False
    val_accuracy: float = 0.0
    lm_calls: int = 0  # metered LM calls that reached the model during the round
    seconds: float = 0.0
    lm_calls_total: int | None = None  # the optimization's LM calls when the round ended (baseline included)
    findings: list[dict[str, Any]] = field(default_factory=list)  # the diagnosis: [{pattern, cases}]
    repairs: dict[str, int] | None = None  # what became of the blamed calls repaired (`RepairCounts.to_dict()`)
    local_set: dict[str, Any] | None = None  # the local set's size and the seed's score (`LocalSet.summary()`)
    settings_changed: dict[str, list[Any]] | None = None  # an accepted settings change: setting -> [from, to]
    cached_calls: int = 0  # metered LM calls a cache served during the round
    outcome: str = ""  # why the round ended as it did, in one line
    phases: list[PhaseCost] = field(default_factory=list)
    cut: dict[str, str] | None = None  # {phase, why}: the budget or the clock cut the round short

    @property
    def accepted_instruction(self) -> str | None:
        return next((c.instruction for c in self.candidates if c.accepted), None)

    @property
    def accepted_candidate(self) -> Candidate | None:
        """The candidate the round took (None: it changed nothing)."""
        if not self.chosen_predictor:
            return None
        return next((c.candidate(self.chosen_predictor) for c in self.candidates if c.accepted), None)

    @property
    def untested(self) -> bool:
        """Whether the round tried nothing for want of its share of the budget: it proposed candidates but could
        afford to score none of them (each `not_validated`, with no local, minibatch or validation score), or it
        has no candidate because its share paid for no proposal or settings trial (a phase `skipped` for it). Such
        a round says nothing of a plateau (`StopPolicy.after`)."""
        if self.accepted:
            return False
        if not self.candidates:
            return any(p.skipped and p.phase in (RoundPhase.PROPOSALS, RoundPhase.SETTINGS) for p in self.phases)
        return all(c.status == Status.NOT_VALIDATED.value and c.local is None and c.minibatch_score is None
                   and c.val_score is None for c in self.candidates)

    @property
    def phase(self) -> RoundPhase | None:
        """The phase a cut round was cut in (None: not cut)."""
        return RoundPhase(self.cut["phase"]) if self.cut else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "round": self.round, "blame_counts": dict(self.blame_counts), "not_fixable": dict(self.not_fixable),
            "chosen_predictor": self.chosen_predictor, "previous_instruction": self.previous_instruction,
            "candidates": [c.to_dict() for c in self.candidates], "accepted": self.accepted,
            "val_accuracy": self.val_accuracy, "lm_calls": self.lm_calls, "cached_calls": self.cached_calls,
            "lm_calls_total": self.lm_calls_total, "seconds": round(self.seconds, 2),
            "findings": [dict(f) for f in self.findings], "outcome": self.outcome,
            "phases": [p.to_dict() for p in self.phases],
        }
        optional = {"repairs": self.repairs, "local_set": self.local_set, "settings_changed": self.settings_changed or None}
        out.update({k: dict(v) for k, v in optional.items() if v is not None})
        if self.cut:
            out.update(cut=dict(self.cut), phase=self.cut["phase"], why=self.cut["why"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundRecord:
        cut = data.get("cut") or ({"phase": data["phase"], "why": str(data.get("why") or "")}
                                  if data.get("phase") else None)
        return cls(
            round=int(data["round"]), blame_counts=_counts(data.get("blame_counts")),
            not_fixable=_counts(data.get("not_fixable")), chosen_predictor=data.get("chosen_predictor"),
            previous_instruction=data.get("previous_instruction"),
            candidates=[CandidateRecord.from_dict(c) for c in data.get("candidates") or []],
            accepted=bool(data.get("accepted", False)), val_accuracy=float(data.get("val_accuracy") or 0.0),
            lm_calls=int(data.get("lm_calls") or 0), seconds=float(data.get("seconds") or 0.0),
            lm_calls_total=int(data["lm_calls_total"]) if data.get("lm_calls_total") is not None else None,
            findings=[dict(f) for f in data.get("findings") or []],
            repairs=_counts(data["repairs"]) if data.get("repairs") is not None else None,
            local_set=dict(data["local_set"]) if data.get("local_set") is not None else None,
            settings_changed={str(k): list(v) for k, v in data["settings_changed"].items()}
            if data.get("settings_changed") else None,
            cached_calls=int(data.get("cached_calls") or 0), outcome=str(data.get("outcome") or ""),
            phases=[PhaseCost.from_dict(p) for p in data.get("phases") or []],
            cut={str(k): str(v) for k, v in cut.items()} if cut else None,
        )


@dataclass
class OptimizationResult:
    """The outcome of `MemTraceOptimizer.compile`: the program, the baseline and every round."""

    program: dspy.Module
    baseline_val: float
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str = ""
    lm_calls: int = 0  # metered LM calls that reached the model
    lm_calls_by_role: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    seconds: float = 0.0
    study_name: str = ""
    storage: str | None = None
    trials: dict[str, int] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    interrupted: RoundRecord | None = None  # the round the budget cut short, as far as it got
    cached_calls: int = 0  # metered LM calls a cache served

    @property
    def best_val(self) -> float:
        accepted = [r.val_accuracy for r in self.rounds if r.accepted]
        return max([self.baseline_val, *accepted])

    @property
    def calls_to_best(self) -> int:
        """LM calls spent up to the end of the last round that accepted a change (0: the student is best)."""
        accepted = [r for r in self.rounds if r.accepted]
        return accepted[-1].lm_calls_total or 0 if accepted else 0

    def manifest_part(self) -> dict[str, Any]:
        """The manifest keys this optimization owns: baseline, rounds, and an `optimizer` summary."""
        return {
            "baseline": {"val_accuracy": self.baseline_val},
            "rounds": [r.to_dict() for r in self.rounds],
            "optimizer": {
                "name": "memtrace", "stop_reason": self.stop_reason, "best_val_accuracy": self.best_val,
                "calls_to_best": self.calls_to_best, "lm_calls": self.lm_calls, "cached_calls": self.cached_calls,
                "lm_calls_by_role": dict(self.lm_calls_by_role), "tokens": self.tokens,
                "seconds": round(self.seconds, 2),
                "study": {"name": self.study_name, "storage": redact_storage(self.storage), "trials": dict(self.trials)},
                **({"interrupted": self.interrupted.to_dict()} if self.interrupted is not None else {}),
            },
        }


def redact_storage(url: str | None) -> str | None:
    """A storage URL without a password (user:secret@host -> user:***@host)."""
    if not url or "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def _counts(value: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in (value or {}).items()}
