"""Selecting part of a dataset: which conversations, which sessions, which questions, how many.

A DataSlice is a value recorded in run configs; `apply` is a pure function of the slice and dataset.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from memtrace_opt.data._types import DEFAULT_GOLD, GOLD_CHOICES, Conversation, Dataset, Question
from memtrace_opt.errors import ConfigError


class DataSpec(NamedTuple):
    """A parsed "PATH[:SAMPLE_ID]" data argument."""

    path: str
    sample_id: str | None


class SessionRange(NamedTuple):
    """An inclusive, 1-based range of session numbers."""

    first: int
    last: int


def parse_data_spec(spec: str) -> DataSpec:
    """Split "PATH[:SAMPLE_ID]" ("locomo:conv-26", "data/x.json:conv-30", "sample").

    The text after the last ':' is a sample id unless the whole text names an existing file or the
    tail looks like part of a path (contains a path separator). Raises ConfigError on empty parts.
    """
    text = spec.strip()
    if not text:
        raise ConfigError("empty data spec: expected PATH[:SAMPLE_ID], or locomo / longmemeval / sample")
    if Path(text).exists() or ":" not in text:
        return DataSpec(text, None)
    head, _, tail = text.rpartition(":")
    if "/" in tail or "\\" in tail or (len(head) == 1 and head.isalpha()):
        return DataSpec(text, None)  # a Windows drive letter or a path with a colon in it
    if not head or not tail:
        raise ConfigError(f"bad data spec {spec!r}: expected PATH[:SAMPLE_ID]")
    return DataSpec(head, tail)


def parse_sessions(text: str) -> SessionRange:
    """Parse "1-3" -> (1, 3) or "2" -> (2, 2). Sessions are 1-based; raises ConfigError on bad text."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text or "")
    if match is None:
        raise ConfigError(f"bad session range {text!r}: expected A-B or N, e.g. 1-3")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if first < 1:
        raise ConfigError(f"bad session range {text!r}: sessions are numbered from 1")
    if last < first:
        raise ConfigError(f"bad session range {text!r}: the end comes before the start")
    return SessionRange(first, last)


def _norm_category(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().lower())


@dataclass(frozen=True)
class DataSlice:
    """Which part of a dataset a run uses.

    - sample_ids: keep only these conversations (None: all); an unknown id is a ConfigError.
    - sessions: keep only sessions first..last (1-based, inclusive), and only questions whose evidence
      lies entirely inside them; questions without evidence are dropped when a range is given.
    - categories: keep questions whose category name (or LoCoMo number, e.g. "1") is listed.
    - limit: keep the first N questions overall, conversation by conversation in file order. With
      seed != 0, N questions are drawn at random with that seed instead (still kept in file order).
    - gold: which gold answers, "corrected" or "upstream" (`data.gold`); `load_data` revises them before it
      slices, so the slice reads the corrected categories and evidence. A record without it (written before
      the choice existed) reads as "upstream", the gold it was run with.
    Conversations left with no questions are dropped whenever questions were filtered.
    """

    sample_ids: tuple[str, ...] | None = None
    sessions: tuple[int, int] | None = None
    categories: tuple[str, ...] | None = None
    limit: int | None = None
    seed: int = 0
    gold: str = DEFAULT_GOLD

    def __post_init__(self) -> None:
        # Accept lists and NamedTuples from callers, store plain tuples (hashable, comparable).
        for name in ("sample_ids", "categories"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(str(v) for v in value))
        if self.sessions is not None:
            first, last = (int(v) for v in self.sessions)
            object.__setattr__(self, "sessions", (first, last))
            if first < 1 or last < first:
                raise ConfigError(f"bad session range {first}-{last}: expected 1 <= A <= B")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"bad question limit {self.limit}: expected a positive number")
        if self.gold not in GOLD_CHOICES:
            raise ConfigError(f"bad gold {self.gold!r}: expected one of {', '.join(GOLD_CHOICES)}")

    @property
    def filters_questions(self) -> bool:
        return self.sessions is not None or self.categories is not None or self.limit is not None

    def apply(self, dataset: Dataset) -> Dataset:
        """A new Dataset holding only the selected conversations, sessions and questions."""
        conversations = list(dataset.conversations)
        if self.sample_ids is not None:
            known = {c.sample_id for c in conversations}
            unknown = [s for s in self.sample_ids if s not in known]
            if unknown:
                shown = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
                raise ConfigError(f"{dataset.name} has no conversation {unknown[0]!r} (it has: {shown})")
            wanted = set(self.sample_ids)
            conversations = [c for c in conversations if c.sample_id in wanted]
        conversations = [self._slice_conversation(c) for c in conversations]
        if self.limit is not None:
            conversations = self._limit(conversations, self.limit)
        if self.filters_questions:
            original = {c.sample_id: len(c.questions) for c in dataset.conversations}
            conversations = [c for c in conversations if c.questions or original[c.sample_id] == 0]
        return replace(dataset, conversations=tuple(conversations))

    def _slice_conversation(self, conversation: Conversation) -> Conversation:
        questions = conversation.questions
        sessions = conversation.sessions
        if self.categories is not None:
            wanted = {_norm_category(c) for c in self.categories}
            questions = tuple(q for q in questions if _matches(q, wanted))
        if self.sessions is not None:
            first, last = self.sessions
            sessions = tuple(s for s in sessions if first <= s.index <= last)
            questions = tuple(q for q in questions if _inside(q, first, last))
        return replace(conversation, sessions=sessions, questions=questions)

    def _limit(self, conversations: list[Conversation], limit: int) -> list[Conversation]:
        keys = [(ci, qi) for ci, c in enumerate(conversations) for qi in range(len(c.questions))]
        if self.seed:
            chosen = set(random.Random(self.seed).sample(keys, min(limit, len(keys))))
        else:
            chosen = set(keys[:limit])
        return [
            replace(c, questions=tuple(q for qi, q in enumerate(c.questions) if (ci, qi) in chosen))
            for ci, c in enumerate(conversations)
        ]

    def describe(self) -> str:
        """A short human-readable summary, e.g. "samples=conv-26 sessions=1-3 limit=20"."""
        parts = []
        if self.sample_ids is not None:
            parts.append("samples=" + ",".join(self.sample_ids))
        if self.sessions is not None:
            parts.append(f"sessions={self.sessions[0]}-{self.sessions[1]}")
        if self.categories is not None:
            parts.append("categories=" + ",".join(self.categories))
        if self.limit is not None:
            parts.append(f"limit={self.limit}")
        if self.seed:
            parts.append(f"seed={self.seed}")
        if self.gold != DEFAULT_GOLD:
            parts.append(f"gold={self.gold}")
        return " ".join(parts) if parts else "all"

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_ids": list(self.sample_ids) if self.sample_ids is not None else None,
            "sessions": list(self.sessions) if self.sessions is not None else None,
            "categories": list(self.categories) if self.categories is not None else None,
            "limit": self.limit,
            "seed": self.seed,
            "gold": self.gold,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataSlice:
        def strings(value: Sequence[Any] | None) -> tuple[str, ...] | None:
            return tuple(str(v) for v in value) if value is not None else None

        sessions = data.get("sessions")
        if isinstance(sessions, str):
            sessions = parse_sessions(sessions)
        return cls(
            sample_ids=strings(data.get("sample_ids")),
            sessions=(int(sessions[0]), int(sessions[1])) if sessions is not None else None,
            categories=strings(data.get("categories")),
            limit=data.get("limit"),
            seed=int(data.get("seed", 0) or 0),
            gold=str(data.get("gold") or "upstream"),
        )


def _matches(question: Question, wanted: set[str]) -> bool:
    if _norm_category(question.category) in wanted:
        return True
    return question.category_id is not None and str(question.category_id) in wanted


def _inside(question: Question, first: int, last: int) -> bool:
    sessions = question.evidence_sessions()
    return bool(sessions) and all(first <= s <= last for s in sessions)
