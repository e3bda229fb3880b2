"""What an optimization records: per candidate, per round, and the result. Plain values with `to_dict` /
`from_dict`; `RoundRecord.to_dict()` is exactly one entry of the manifest's `rounds` list:

    {round, blame_counts: {predictor: n}, not_fixable: {op_name: n}, chosen_predictor, previous_instruction,
     candidates: [{instruction, minibatch_score, val_score, accepted, why[, local][, demos][, origin]}],
     accepted, val_accuracy, findings: [{pattern, cases}],
     lm_calls, seconds[, repairs: {tried, no_repair, not_confirmed, lineage_rejected, no_demo, kept, confirmed,
     lm_calls}][, local_set: {predictor, role, calls, targets, seed_carried, excluded}][, settings_changed:
     {setting: [from, to]}]}

A candidate scored on the local objective (`local_objective.py`, the default) carries `local: {targets, carried,
seed_carried, fixed, lost, bloat, calls, own_calls, lm_calls}`, on the round's `local_set` less the calls it was
made from; one below the margin is rejected there and has no minibatch or valset score. With
`--no-local-objective` a candidate for an upstream predictor carries `local: {blamed, fixed, kept, broken,
lm_calls}`, its local check (`local_check.py`); one the check rejected has no minibatch score. The demos candidate (the current instruction
with worked examples from the predictor's own correct calls, `demos.py`) carries `demos`: the predictor's whole
demo list if it is accepted, one dict of field values per demo. A proposal carries `origin`: "reflection" (the
reflection LM wrote it) or "pattern:NAME" (a diagnosed pattern's rule appended, `diagnosis.py`); the round's best
rewrite validated with its demos candidate's demos, when both passed the minibatch, is `origin: "combined"`, with
no minibatch score. `origin: "repair"` is the repair-demos candidate (`repair_demos.py`). A candidate's `replayed`
says which LM-backed calls its evaluations re-ran: `{minibatch: {scope, rerun_by_op, rerun, served}, val: ...}`,
`scope` "evidence" for a scoped replay (`scoped.py`), "full" otherwise.

`lm_calls` is the metered LM calls the round spent (task, reflection, attributor), `seconds` its wall time. A
round the budget cut short is not among the rounds (it resumes with a larger budget); the manifest's
`optimizer.interrupted` shows how far it got (`InterruptedRound`, `interrupted.py`): the phase it was cut in, its
calls and seconds so far, the parts of its plan it reached (blame and not-fixable counts, chosen predictor,
findings, repairs, local set, in the forms above) and its candidates `[{instruction, minibatch_score}]` (a score
is null for a candidate not evaluated yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.optimizers.core.candidate import DEMOS, REFLECTION, Candidate
from memtrace_opt.optimizers.loop.interrupted import InterruptedRound

__all__ = ["CandidateRecord", "RoundRecord", "OptimizationResult"]


@dataclass(frozen=True)
class CandidateRecord:
    instruction: str
    minibatch_score: float | None
    val_score: float | None
    accepted: bool
    why: str
    local: dict[str, Any] | None = None  # the local check's counts, for a candidate that had one
    demos: list[dict[str, Any]] | None = None  # the predictor's whole demo list, for a demos candidate
    origin: str | None = None  # a proposal's source: "reflection", "pattern:NAME" (`diagnosis.py`) or "combined"
    replayed: dict[str, Any] | None = None  # which calls its evaluations re-ran: {minibatch, val} (`scoped.py`)
    settings: dict[str, Any] | None = None  # a settings candidate's new values (its instruction is "")

    @classmethod
    def of(cls, candidate: Candidate, minibatch_score: float | None, val_score: float | None, accepted: bool,
           why: str, local: dict[str, Any] | None = None, replayed: dict[str, Any] | None = None) -> CandidateRecord:
        """The record of `candidate` (the demos candidate is recorded without an origin, as it always was)."""
        return cls(candidate.instruction, minibatch_score, val_score, accepted, why, local, candidate.demo_list(),
                   None if candidate.origin == DEMOS else candidate.origin, replayed or None,
                   dict(candidate.settings) or None)

    def candidate(self, predictor: str) -> Candidate:
        """This record as the candidate it was, for `predictor`."""
        if self.settings:
            return Candidate.of_settings(predictor, self.settings)
        origin = self.origin or (DEMOS if self.demos is not None else REFLECTION)
        return Candidate.of(predictor, self.instruction, self.demos, origin)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instruction": self.instruction,
            "minibatch_score": self.minibatch_score,
            "val_score": self.val_score,
            "accepted": self.accepted,
            "why": self.why,
        }
        if self.local is not None:
            out["local"] = dict(self.local)
        if self.demos is not None:
            out["demos"] = [dict(d) for d in self.demos]
        if self.origin is not None:
            out["origin"] = self.origin
        if self.replayed is not None:
            out["replayed"] = dict(self.replayed)
        if self.settings is not None:
            out["settings"] = dict(self.settings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CandidateRecord:
        return cls(
            instruction=str(data["instruction"]),
            minibatch_score=data.get("minibatch_score"),
            val_score=data.get("val_score"),
            accepted=bool(data.get("accepted", False)),
            why=str(data.get("why", "")),
            local=dict(data["local"]) if data.get("local") is not None else None,
            demos=[dict(d) for d in data["demos"]] if data.get("demos") is not None else None,
            origin=data.get("origin"),
            replayed=dict(data["replayed"]) if data.get("replayed") is not None else None,
            settings=dict(data["settings"]) if data.get("settings") is not None else None,
        )


@dataclass(frozen=True)
class RoundRecord:
    round: int
    blame_counts: dict[str, int]
    not_fixable: dict[str, int]
    chosen_predictor: str | None
    previous_instruction: str | None
    candidates: list[CandidateRecord]
    accepted: bool
    val_accuracy: float
    lm_calls: int
    seconds: float = 0.0
    lm_calls_total: int | None = None  # the optimization's LM calls when the round ended (baseline included)
    findings: list[dict[str, Any]] = field(default_factory=list)  # the diagnosis: [{pattern, cases}]
    repairs: dict[str, int] | None = None  # what became of the blamed calls repaired (`RepairCounts.to_dict()`)
    local_set: dict[str, Any] | None = None  # the local set's size and the seed's score (`LocalSet.summary()`)
    settings_changed: dict[str, list[Any]] | None = None  # an accepted settings change: setting -> [from, to]

    @property
    def accepted_instruction(self) -> str | None:
        return next((c.instruction for c in self.candidates if c.accepted), None)

    @property
    def accepted_candidate(self) -> Candidate | None:
        """The candidate the round took (None: it changed nothing)."""
        if not self.chosen_predictor:
            return None
        return next((c.candidate(self.chosen_predictor) for c in self.candidates if c.accepted), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "blame_counts": dict(self.blame_counts),
            "not_fixable": dict(self.not_fixable),
            "chosen_predictor": self.chosen_predictor,
            "previous_instruction": self.previous_instruction,
            "candidates": [c.to_dict() for c in self.candidates],
            "accepted": self.accepted,
            "val_accuracy": self.val_accuracy,
            "lm_calls": self.lm_calls,
            "lm_calls_total": self.lm_calls_total,
            "seconds": round(self.seconds, 2),
            "findings": [dict(f) for f in self.findings],
            **({"repairs": dict(self.repairs)} if self.repairs is not None else {}),
            **({"local_set": dict(self.local_set)} if self.local_set is not None else {}),
            **({"settings_changed": dict(self.settings_changed)} if self.settings_changed else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundRecord:
        return cls(
            round=int(data["round"]),
            blame_counts={str(k): int(v) for k, v in (data.get("blame_counts") or {}).items()},
            not_fixable={str(k): int(v) for k, v in (data.get("not_fixable") or {}).items()},
            chosen_predictor=data.get("chosen_predictor"),
            previous_instruction=data.get("previous_instruction"),
            candidates=[CandidateRecord.from_dict(c) for c in data.get("candidates") or []],
            accepted=bool(data.get("accepted", False)),
            val_accuracy=float(data.get("val_accuracy", 0.0)),
            lm_calls=int(data.get("lm_calls", 0)),
            seconds=float(data.get("seconds", 0.0)),
            lm_calls_total=int(data["lm_calls_total"]) if data.get("lm_calls_total") is not None else None,
            findings=[dict(f) for f in data.get("findings") or []],
            repairs={str(k): int(v) for k, v in data["repairs"].items()} if data.get("repairs") is not None else None,
            local_set=dict(data["local_set"]) if data.get("local_set") is not None else None,
            settings_changed={str(k): list(v) for k, v in data["settings_changed"].items()}
            if data.get("settings_changed") else None,
        )


@dataclass
class OptimizationResult:
    """The outcome of `MemTraceOptimizer.compile`: the program, the baseline and every round."""

    program: dspy.Module
    baseline_val: float
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str = ""
    lm_calls: int = 0
    lm_calls_by_role: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    seconds: float = 0.0
    study_name: str = ""
    storage: str | None = None
    trials: dict[str, int] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    interrupted: InterruptedRound | None = None  # the round the budget cut short, as far as it got

    @property
    def best_val(self) -> float:
        accepted = [r.val_accuracy for r in self.rounds if r.accepted]
        return max([self.baseline_val, *accepted])

    @property
    def calls_to_best(self) -> int:
        """LM calls spent up to the end of the last round that accepted a change (0: the student is best)."""
        accepted = [i for i, r in enumerate(self.rounds) if r.accepted]
        if not accepted:
            return 0
        total = self.rounds[accepted[-1]].lm_calls_total
        if total is not None:
            return total
        # a round recorded before rounds kept the running total: a round cut short after it counts too
        before_rounds = self.lm_calls - sum(r.lm_calls for r in self.rounds)
        return before_rounds + sum(r.lm_calls for r in self.rounds[: accepted[-1] + 1])

    def manifest_part(self) -> dict[str, Any]:
        """The manifest keys this optimization owns: baseline, rounds, and an `optimizer` summary."""
        return {
            "baseline": {"val_accuracy": self.baseline_val},
            "rounds": [r.to_dict() for r in self.rounds],
            "optimizer": {
                "name": "memtrace",
                "stop_reason": self.stop_reason,
                "best_val_accuracy": self.best_val,
                "calls_to_best": self.calls_to_best,
                "lm_calls": self.lm_calls,
                "lm_calls_by_role": dict(self.lm_calls_by_role),
                "tokens": self.tokens,
                "seconds": round(self.seconds, 2),
                "study": {"name": self.study_name, "storage": _redact(self.storage), "trials": dict(self.trials)},
                **({"interrupted": self.interrupted.to_dict()} if self.interrupted is not None else {}),
            },
        }


def _redact(url: str | None) -> str | None:
    """A storage URL without a password (user:secret@host -> user:***@host)."""
    if not url or "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
