"""`RoundPlan`: what a round decided before it tested anything (its minibatch, the blame, the chosen predictor,
the candidates), recorded in the study as `round:N` before the first candidate costs an LM call, so a killed
round resumes with the same candidates.

Format (schema_version 2): `{schema_version, round, minibatch: [case_id], minibatch_score, minibatch_ops:
{predictor: calls}, blame_counts, not_fixable, chosen_predictor, previous_instruction, candidates:
[Candidate.to_dict()], evidence, verdicts, local_cases, repairs, repair_counts, evidence_ops, local_set}` (the last
four added within version 2: a plan without them has none). Version 1 (no `schema_version`) held the candidates
as `proposals` (texts), `proposal_origins` and `demos` (the demos candidate's whole demo list); it is read into
the same candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.candidate import DEMOS, REFLECTION, Candidate

__all__ = ["PLAN_SCHEMA_VERSION", "RoundPlan", "calls_to_rerun"]

PLAN_SCHEMA_VERSION = 2


def calls_to_rerun(ops: Mapping[str, int], predictor: str) -> int:
    """The LM calls a run with `predictor` changed makes at least: its own op calls (`ops`, from a run of the
    same cases), whose prompt changed. Those of the predictors after it re-run only where its outputs change,
    which is not known before, so they are not counted: the estimate never stops work that would have fit."""
    return ops.get(predictor, 0)


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
    local_cases: tuple[Mapping[str, Any], ...] = ()
    repairs: tuple[Mapping[str, Any], ...] = ()  # the confirmed repairs (`Repair.to_dict()`)
    repair_counts: Mapping[str, int] = field(default_factory=dict)  # `RepairCounts.to_dict()`
    evidence_ops: Mapping[str, Sequence[int]] = field(default_factory=dict)  # the scoped replay's scope
    local_set: Mapping[str, Any] = field(default_factory=dict)  # the chosen predictor's local set (`LocalSet.to_dict()`)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self.evidence.get("findings") or []]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": PLAN_SCHEMA_VERSION,
            "round": self.round,
            "minibatch": list(self.minibatch),
            "minibatch_score": self.minibatch_score,
            "minibatch_ops": dict(self.minibatch_ops),
            "blame_counts": dict(self.blame_counts),
            "not_fixable": dict(self.not_fixable),
            "chosen_predictor": self.chosen_predictor,
            "previous_instruction": self.previous_instruction,
            "candidates": [c.to_dict() for c in self.candidates],
            "evidence": dict(self.evidence),
            "verdicts": [dict(v) for v in self.verdicts],
            "local_cases": [dict(c) for c in self.local_cases],
            "repairs": [dict(r) for r in self.repairs],
            "repair_counts": dict(self.repair_counts),
            "evidence_ops": {k: list(v) for k, v in self.evidence_ops.items()},
            "local_set": dict(self.local_set),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundPlan:
        version = int(data.get("schema_version", 1))
        if version > PLAN_SCHEMA_VERSION:
            raise MemtraceError(f"round plan schema_version {version} is newer than this release reads "
                                f"({PLAN_SCHEMA_VERSION}); upgrade memtrace-opt to resume this study")
        chosen = data.get("chosen_predictor")
        previous = data.get("previous_instruction")
        if version == 1:
            candidates = _v1_candidates(data, chosen, previous)
        else:
            candidates = tuple(Candidate.from_dict(c) for c in data.get("candidates") or [])
        return cls(
            round=int(data["round"]),
            minibatch=tuple(str(i) for i in data.get("minibatch") or []),
            minibatch_score=float(data.get("minibatch_score") or 0.0),
            minibatch_ops={str(k): int(v) for k, v in (data.get("minibatch_ops") or {}).items()},
            blame_counts={str(k): int(v) for k, v in (data.get("blame_counts") or {}).items()},
            not_fixable={str(k): int(v) for k, v in (data.get("not_fixable") or {}).items()},
            chosen_predictor=chosen,
            previous_instruction=previous,
            candidates=candidates,
            evidence=dict(data.get("evidence") or {}),
            verdicts=tuple(dict(v) for v in data.get("verdicts") or []),
            local_cases=tuple(dict(c) for c in data.get("local_cases") or []),
            repairs=tuple(dict(r) for r in data.get("repairs") or []),
            repair_counts={str(k): int(v) for k, v in (data.get("repair_counts") or {}).items()},
            evidence_ops={str(k): [int(s) for s in v] for k, v in (data.get("evidence_ops") or {}).items()},
            local_set=dict(data.get("local_set") or {}),
        )


def _v1_candidates(data: Mapping[str, Any], chosen: str | None, previous: str | None) -> tuple[Candidate, ...]:
    """A version-1 plan's candidates: each proposal (its origin, where recorded), then the current instruction
    with the plan's demos, if it has some."""
    if not chosen:
        return ()
    origins = list(data.get("proposal_origins") or [])
    out = [Candidate.of(chosen, str(text), origin=str(origins[i]) if i < len(origins) else REFLECTION)
           for i, text in enumerate(data.get("proposals") or [])]
    if data.get("demos") and previous is not None:
        out.append(Candidate.of(chosen, str(previous), [dict(d) for d in data["demos"]], DEMOS))
    return tuple(out)
