"""Value types of attribution: the failed case to explain, the verdict, its cost, and the error taxonomy.

The taxonomy is MemTrace's: five memory-system faults plus `GoldError`: nothing in the pipeline is at fault,
the gold answer is wrong or the metric calls a right answer wrong (a verdict or label with no op).
Which type a fault of an operation is follows from the role the operation declares in a memory's life
(`memory/roles.py`, one table here: `ROLE_MEANINGS`, which also gives the attributor's words for the role):

* forming memory from the conversation (ingest, chunk, extract, segment, store): `ExtractionError`,
  information lost or distorted when memory is formed;
* changing what is stored (Mem0's update decision, its lookup of similar memories and its application):
  `UpdateError`; a decision whose every action is a DELETE: `DeletionError`;
* removing content (a delete, long-context trimming): `DeletionError`. Trimming is a deletion, not an update:
  it writes no new content, it drops the oldest units from memory, so the fault is a valid unit removed before
  the question needed it;
* finding memory for a question (retrieve, rerank, sufficiency checks, query writing): `RetrievalError`;
* answering from what was retrieved: `ResponseError`.

An op that declares no role (a graph recorded before ops declared them, or a user's op) gets the role its name
suggests (`role_for_name`), and the reader warns once per op name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from memtrace_opt.memory.roles import OpRole, role_for_name

__all__ = [
    "ERROR_TYPES",
    "EXTRACTION",
    "UPDATE",
    "DELETION",
    "RETRIEVAL",
    "RESPONSE",
    "GOLD",
    "Cost",
    "FailedCase",
    "Replay",
    "Verdict",
    "error_type_for_op",
    "error_type_for_role",
    "ROLE_MEANINGS",
    "RoleMeaning",
    "action_field",
    "action_unit",
]

EXTRACTION = "ExtractionError"
UPDATE = "UpdateError"
DELETION = "DeletionError"
RETRIEVAL = "RetrievalError"
RESPONSE = "ResponseError"
GOLD = "GoldError"
ERROR_TYPES: tuple[str, ...] = (EXTRACTION, UPDATE, DELETION, RETRIEVAL, RESPONSE, GOLD)

@dataclass(frozen=True)
class RoleMeaning:
    """What a role means to attribution: the error type of a fault, what an op of the role is for (the
    attributor's words for an op with no instruction of its own), and the report's short label."""

    error_type: str | None
    job: str
    label: str


ROLE_MEANINGS: Mapping[OpRole, RoleMeaning] = {
    OpRole.FORMS: RoleMeaning(EXTRACTION, "form memory from the conversation it reads, keeping every salient detail "
                              "(people, places, things, dates made explicit) and losing or distorting none",
                              "forms memory"),
    OpRole.UPDATES: RoleMeaning(UPDATE, "keep the stored memory up to date: add what is new, change a memory only to "
                                "what still holds, and never drop information that is still true", "updates memory"),
    OpRole.DELETES: RoleMeaning(DELETION, "remove only memory that is no longer true or no longer fits, keeping "
                                "what is still needed", "deletes memory"),
    OpRole.RETRIEVES: RoleMeaning(RETRIEVAL, "find the memory relevant to the question", "retrieves memory"),
    OpRole.ANSWERS: RoleMeaning(RESPONSE, "answer the question from the memory it is given", "answers"),
    OpRole.NONE: RoleMeaning(None, "a step that changes and selects no memory", "other"),
}


_DELETE_WORDS = ("DELETE",)
_UPDATE_WORDS = ("UPDATE",)


def _mentions(value: Any, words: tuple[str, ...]) -> bool:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return any(f'"{w}"' in text or f"'{w}'" in text or text.strip() == w for w in words)


def action_field(outputs: Any) -> str | None:
    """The key of an update decision's action list in its outputs (a list of `{event, unit_id, text}`
    records, e.g. Mem0's `memory_actions`), or None."""
    if not isinstance(outputs, Mapping):
        return None
    for key, value in outputs.items():
        if isinstance(value, list) and any(isinstance(v, Mapping) and "event" in v for v in value):
            return key
    return None


def action_unit(action: Mapping[str, Any]) -> Any:
    """The unit an action names (`unit_id`, or `id` as a decision LM writes it), or None."""
    return action.get("unit_id") or action.get("id")


def error_type_for_role(role: OpRole | None, outputs: Any = None) -> str | None:
    """The error type a fault of an op with `role` is (`ROLE_MEANINGS`); None for no role. For an op that updates,
    the outputs decide: one whose actions only DELETE is a `DeletionError`."""
    if role is None:
        return None
    error_type = ROLE_MEANINGS[role].error_type
    if error_type == UPDATE and outputs is not None:
        if _mentions(outputs, _DELETE_WORDS) and not _mentions(outputs, _UPDATE_WORDS):
            return DELETION
    return error_type


def error_type_for_op(op_name: str | None, outputs: Any = None, role: OpRole | str | None = None) -> str | None:
    """The error type a fault of the operation `op_name` is: by the `role` it declares, else by the role its name
    suggests (`role_for_name`); None for an op of no known role."""
    declared = OpRole.parse(role) if role else None
    return error_type_for_role(declared or role_for_name(op_name), outputs)


@dataclass(frozen=True)
class Cost:
    """What attributing one case cost, in two parts that never mix.

    `lm_calls`, `prompt_tokens` and `completion_tokens` are the attributor's own questions (every LM call the
    method made for the case, except its replays); `replay_calls`, `replay_prompt_tokens` and
    `replay_completion_tokens` are the task model's calls while it replayed the case's conversation (graphtrace's
    confirmation, counterfactual). `seconds` is the whole case's time. The replay fields are written only when a
    replay made a call; a line without them (written before they existed) reads as no replay.
    """

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    replay_calls: int = 0
    replay_prompt_tokens: int = 0
    replay_completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        """The attributor's tokens (prompt and completion)."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def replay_tokens(self) -> int:
        """The replays' tokens on the task model (prompt and completion)."""
        return self.replay_prompt_tokens + self.replay_completion_tokens

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "lm_calls": self.lm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
        }
        if self.replay_calls or self.replay_tokens:
            data.update(replay_calls=self.replay_calls, replay_prompt_tokens=self.replay_prompt_tokens,
                        replay_completion_tokens=self.replay_completion_tokens)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Cost:
        data = data or {}
        return cls(
            lm_calls=int(data.get("lm_calls", 0)),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            seconds=float(data.get("seconds", 0.0)),
            replay_calls=int(data.get("replay_calls", 0)),
            replay_prompt_tokens=int(data.get("replay_prompt_tokens", 0)),
            replay_completion_tokens=int(data.get("replay_completion_tokens", 0)),
        )


@dataclass(frozen=True)
class Replay:
    """One replay of a case's conversation: with `op_id`'s outputs repaired (None: the recorded run unchanged, to
    see that it reproduces the failure), the answer it gave and whether that answer is correct."""

    op_id: str | None
    op: str | None
    answer: str
    correct: bool

    def to_dict(self) -> dict[str, Any]:
        return {"op_id": self.op_id, "op": self.op, "answer": self.answer, "correct": self.correct}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Replay:
        return cls(data.get("op_id"), data.get("op"), str(data.get("answer", "")), bool(data.get("correct", False)))


@dataclass(frozen=True)
class Verdict:
    """The root cause of one failed case, as docs/design.md's verdict line.

    `error` is None for a verdict; for a case that could not be attributed it holds the reason and
    `error_type`/`op_id` are None. `confirmed` says whether a replay of the named op's repair saved the answer
    (True), replays did not confirm it (False), or no replay tested it (None); `replays` are the replays run for
    the case. Both are written only when a replay was run or decided the verdict (older verdict lines have
    neither and read as None and no replays).
    """

    case_id: str
    method: str
    error_type: str | None
    op_id: str | None
    op: str | None
    predictor: str | None
    reason: str
    confidence: float
    cost: Cost = field(default_factory=Cost)
    error: str | None = None
    confirmed: bool | None = None
    replays: tuple[Replay, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        confidence = self.confidence if math.isfinite(self.confidence) else 0.0
        return {
            "case_id": self.case_id,
            "method": self.method,
            "error_type": self.error_type,
            "op_id": self.op_id,
            "op": self.op,
            "predictor": self.predictor,
            "reason": self.reason,
            "confidence": round(float(confidence), 4),
            "cost": self.cost.to_dict(),
            "error": self.error,
            **({"confirmed": self.confirmed, "replays": [r.to_dict() for r in self.replays]}
               if self.confirmed is not None or self.replays else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            case_id=str(data["case_id"]),
            method=str(data["method"]),
            error_type=data.get("error_type"),
            op_id=data.get("op_id"),
            op=data.get("op"),
            predictor=data.get("predictor"),
            reason=str(data.get("reason", "")),
            confidence=float(data.get("confidence", 0.0)),
            cost=Cost.from_dict(data.get("cost")),
            error=data.get("error"),
            confirmed=data.get("confirmed"),
            replays=tuple(Replay.from_dict(r) for r in data.get("replays") or ()),
        )

    @classmethod
    def failed(cls, case_id: str, method: str, message: str, cost: Cost | None = None) -> Verdict:
        """The verdict of a case that could not be attributed."""
        return cls(case_id, method, None, None, None, None, "", 0.0, cost or Cost(), message)


def _question_field(question: Any, name: str, default: Any = None) -> Any:
    if isinstance(question, Mapping):
        return question.get(name, default)
    return getattr(question, name, default)


@dataclass(frozen=True)
class FailedCase:
    """A question the memory system got wrong, with what attribution needs to explain it.

    `question` is a `memtrace_opt.data.Question` or a dict with at least `question_id` and `question`.
    Exactly one of `graph` (an evolution graph) or `graph_path` should be given; `evidence` holds the gold
    evidence dialogue ids (empty when unknown: methods then use pseudo-evidence).
    """

    case_id: str
    question: Any
    gold: str
    prediction: str
    evidence: tuple[str, ...] = ()
    system: str = ""
    sample_id: str = ""
    graph_path: str | Path | None = None
    graph: nx.MultiDiGraph | None = field(default=None, compare=False, repr=False)

    @property
    def question_id(self) -> str:
        return str(_question_field(self.question, "question_id", self.case_id))

    @property
    def question_text(self) -> str:
        if isinstance(self.question, str):
            return self.question
        return str(_question_field(self.question, "question", ""))

    @property
    def abstention(self) -> bool:
        return bool(_question_field(self.question, "abstention", False))

    @property
    def category(self) -> str:
        return str(_question_field(self.question, "category", "") or "")
