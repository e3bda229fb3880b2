"""MemTraceBench records: a labelled failed case (docs/design.md's bench case line), its label and injection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtrace_opt.attribution import FailedCase
from memtrace_opt.rundir import case_fields, read_case_fields

__all__ = ["BENCH_SCHEMA_VERSION", "SOURCES", "Label", "Injection", "BenchCase"]

#: 2: a label carries `ops` (every acceptable root-cause op), `rationale`, `by` and `at`; version 1 labels are
#: read with `ops` = [op_id] and the other three empty.
BENCH_SCHEMA_VERSION = 2
SOURCES = ("injected", "lineage", "human")


@dataclass(frozen=True)
class Label:
    """The root cause of a bench case (the label of docs/design.md). `source`: injected, lineage or human.

    `ops` lists every acceptable root-cause op id (two faults that each decide the failure), `op_id` is its
    first; a verdict is right when it names any of them. Both are empty for GoldError (the gold answer or the
    metric is at fault). `rationale` quotes the evidence a person relied on; `by`/`at` say who labelled and
    when (ISO 8601, UTC)."""

    error_type: str
    op_id: str | None
    op: str | None
    source: str
    ops: tuple[str, ...] = ()
    rationale: str = ""
    by: str = ""
    at: str = ""

    def __post_init__(self) -> None:
        if self.op_id and not self.ops:
            object.__setattr__(self, "ops", (self.op_id,))
        elif self.ops and self.op_id != self.ops[0]:
            object.__setattr__(self, "op_id", self.ops[0])

    def accepts(self, op_id: str | None) -> bool:
        """Whether `op_id` is one of the acceptable root-cause ops."""
        return op_id is not None and op_id in self.ops

    def to_dict(self) -> dict[str, Any]:
        return {"error_type": self.error_type, "op_id": self.op_id, "op": self.op, "source": self.source,
                "ops": list(self.ops), "rationale": self.rationale, "by": self.by, "at": self.at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Label:
        ops = tuple(str(op) for op in data.get("ops") or () if op)
        return cls(str(data["error_type"]), data.get("op_id") or None, data.get("op"), str(data.get("source", "")),
                   ops, str(data.get("rationale") or ""), str(data.get("by") or ""), str(data.get("at") or ""))


@dataclass(frozen=True)
class Injection:
    """Which operation call was perturbed (`op_id`, its name, its seq) and how; `forced` is what replay forced
    as its outputs (merged over the recorded outputs)."""

    op_id: str
    op: str
    seq: int
    error_type: str
    how: str
    forced: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"op_id": self.op_id, "op": self.op, "seq": self.seq, "error_type": self.error_type, "how": self.how,
                "forced": self.forced}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Injection:
        return cls(str(data["op_id"]), str(data["op"]), int(data["seq"]), str(data["error_type"]),
                   str(data.get("how", "")), dict(data.get("forced") or {}))


@dataclass(frozen=True)
class BenchCase:
    """One labelled failure. `graph` is relative to the directory of the case file."""

    case_id: str
    system: str
    dataset: str
    sample_id: str
    question_id: str
    question: str
    gold: str
    prediction: str
    evidence: tuple[str, ...]
    graph: str
    label: Label
    injection: Injection | None = None
    category: str = ""
    abstention: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": BENCH_SCHEMA_VERSION,
            **case_fields(self),
            "graph": self.graph,
            "label": self.label.to_dict(),
            "injection": self.injection.to_dict() if self.injection else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchCase:
        """A case line as `to_dict` wrote it; its case fields read as a run's (`read_case_fields`)."""
        fields = read_case_fields(data)
        injection = data.get("injection")
        return cls(**{**fields, "evidence": tuple(fields["evidence"])}, graph=str(data["graph"]),
                   label=Label.from_dict(data["label"]), injection=Injection.from_dict(injection) if injection else None)

    def failed_case(self, root: Path) -> FailedCase:
        """The case to attribute (the label is not in it), its graph resolved against `root`."""
        question = {"question_id": self.question_id, "question": self.question, "answer": self.gold,
                    "category": self.category, "evidence": list(self.evidence), "abstention": self.abstention}
        return FailedCase(self.case_id, question, self.gold, self.prediction, self.evidence, self.system,
                          self.sample_id, graph_path=root / self.graph)
