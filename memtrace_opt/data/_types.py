"""Value types for benchmark conversations: turns, sessions, questions, conversations, datasets.

Every loader (LoCoMo, LongMemEval, the packaged sample) produces these frozen dataclasses, so the
memory programs, the tracer and the metrics never look at a dataset's raw JSON.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

# The gold answer of a question whose right behaviour is to abstain (LoCoMo category 5).
ABSTAIN_ANSWER = "Not mentioned in the conversation"

# The display order of categories; any other category sorts after these, alphabetically.
CATEGORY_ORDER = (
    "single-hop",
    "multi-hop",
    "temporal",
    "open-domain",
    "adversarial",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)

_DIA_ID = re.compile(r"^D(\d+):(\d+)$")


def category_sort_key(category: str) -> tuple[int, str]:
    """Sort key that puts known categories in CATEGORY_ORDER and the rest alphabetically after them."""
    try:
        return (CATEGORY_ORDER.index(category), category)
    except ValueError:
        return (len(CATEGORY_ORDER), category)


def session_of(dia_id: str) -> int | None:
    """The 1-based session number of a dialogue id like "D3:5", or None if the id is not of that form."""
    match = _DIA_ID.match(dia_id)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Turn:
    """One utterance. `dia_id` is "D{session}:{n}" (LoCoMo's form; synthesized for LongMemEval)."""

    dia_id: str
    speaker: str
    text: str
    session_index: int
    timestamp: str | None
    image_caption: str | None = None

    def display_text(self) -> str:
        """The text a model should see: the utterance, plus the shared image's caption if there is one."""
        if self.image_caption:
            return f"{self.text} [shares an image: {self.image_caption}]"
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "dia_id": self.dia_id,
            "speaker": self.speaker,
            "text": self.text,
            "session_index": self.session_index,
            "timestamp": self.timestamp,
            "image_caption": self.image_caption,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        return cls(
            dia_id=str(data["dia_id"]),
            speaker=str(data["speaker"]),
            text=str(data["text"]),
            session_index=int(data["session_index"]),
            timestamp=data.get("timestamp"),
            image_caption=data.get("image_caption"),
        )


@dataclass(frozen=True)
class Session:
    """One dated session of a conversation. `index` is 1-based and matches the "D{index}:" of its turns.
    `answer_session`: the dataset names it as a session holding the answer (LongMemEval's `answer_session_ids`;
    an abstention question's answer sessions hold no turn marked as evidence)."""

    index: int
    date_time: str | None
    turns: tuple[Turn, ...]
    session_id: str | None = None
    answer_session: bool = False


@dataclass(frozen=True)
class Question:
    """A question about a conversation with its gold answer and the dialogue ids that hold the answer.

    For abstention questions (LoCoMo category 5, LongMemEval `*_abs`) the right behaviour is to say the
    information is not available; for LoCoMo the misleading answer the question invites is kept in
    `adversarial_answer` and `answer` is ABSTAIN_ANSWER.
    """

    question_id: str
    question: str
    answer: str
    category: str
    category_id: int | None
    evidence: tuple[str, ...]
    question_date: str | None = None
    abstention: bool = False
    adversarial_answer: str | None = None

    def evidence_sessions(self) -> frozenset[int]:
        """The session numbers the evidence ids point into (ids not of the form "D{n}:{m}" are ignored)."""
        return frozenset(s for s in (session_of(e) for e in self.evidence) if s is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "question": self.question,
            "answer": self.answer,
            "category": self.category,
            "category_id": self.category_id,
            "evidence": list(self.evidence),
            "question_date": self.question_date,
            "abstention": self.abstention,
            "adversarial_answer": self.adversarial_answer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        category_id = data.get("category_id")
        return cls(
            question_id=str(data["question_id"]),
            question=str(data["question"]),
            answer=str(data["answer"]),
            category=str(data["category"]),
            category_id=int(category_id) if category_id is not None else None,
            evidence=tuple(str(e) for e in data.get("evidence", ())),
            question_date=data.get("question_date"),
            abstention=bool(data.get("abstention", False)),
            adversarial_answer=data.get("adversarial_answer"),
        )


@dataclass(frozen=True)
class Conversation:
    """A multi-session conversation between `speakers` and the questions asked about it."""

    sample_id: str
    speakers: tuple[str, ...]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    dataset: str

    def turns(self) -> Iterator[Turn]:
        """Every turn, session by session, in conversation order."""
        for session in self.sessions:
            yield from session.turns

    @cached_property
    def _turn_index(self) -> dict[str, Turn]:
        return {turn.dia_id: turn for turn in self.turns()}

    def turn(self, dia_id: str) -> Turn:
        """The turn with this dialogue id; KeyError if the conversation has none."""
        try:
            return self._turn_index[dia_id]
        except KeyError:
            raise KeyError(f"{self.sample_id} has no turn {dia_id!r}") from None

    def has_turn(self, dia_id: str) -> bool:
        return dia_id in self._turn_index

    @property
    def n_turns(self) -> int:
        return sum(len(session.turns) for session in self.sessions)


@dataclass(frozen=True)
class DatasetStats:
    """Counts over a dataset; `questions_by_category` is in display order (see CATEGORY_ORDER)."""

    conversations: int
    sessions: int
    turns: int
    questions: int
    questions_by_category: dict[str, int] = field(default_factory=dict)
    abstention_questions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "sessions": self.sessions,
            "turns": self.turns,
            "questions": self.questions,
            "questions_by_category": dict(self.questions_by_category),
            "abstention_questions": self.abstention_questions,
        }


# which gold answers a run reads (`data.gold`): the file's as published, or corrected (the default)
GOLD_CHOICES = ("corrected", "upstream")
DEFAULT_GOLD = "corrected"
# the rules of the corrected gold, by the names GoldRevision counts them
QA_CORRECTIONS = "qa_corrections"
GLUED_WORDS = "glued_words"
GLUED_PAIRS = "glued_pairs"
GOLD_RULES = (QA_CORRECTIONS, GLUED_WORDS, GLUED_PAIRS)


@dataclass(frozen=True)
class GoldRevision:
    """How a dataset's gold answers were revised (`data.gold`): `gold` ("corrected" or "upstream"), the name of the
    corrections file applied (None when there was none), per rule the ids of the questions it changed, and the
    ids of the questions the corrections removed."""

    gold: str = "upstream"
    corrections: str | None = None
    changed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    removed: tuple[str, ...] = ()

    def counts(self, question_ids: Iterable[str] | None = None) -> dict[str, int]:
        """Per rule, how many of `question_ids` (default: every question) it changed."""
        wanted = None if question_ids is None else set(question_ids)
        return {rule: sum(1 for q in self.changed.get(rule, ()) if wanted is None or q in wanted)
                for rule in GOLD_RULES}

    def summary(self, question_ids: Iterable[str] | None = None) -> dict[str, Any]:
        """What a run records: {gold, corrections, changed: {rule: n}} for `question_ids`; for the whole dataset
        (no ids) also how many questions the corrections removed."""
        out: dict[str, Any] = {"gold": self.gold, "corrections": self.corrections,
                               "changed": self.counts(question_ids)}
        if question_ids is None:
            out["removed"] = len(self.removed)
        return out

    def by_split(self, splits: Mapping[str, Iterable[str]]) -> dict[str, Any]:
        """{gold, corrections, <split>: {rule: n}}: what each rule changed among each split's question ids."""
        return {"gold": self.gold, "corrections": self.corrections,
                **{name: self.counts(ids) for name, ids in splits.items()}}

    def to_dict(self) -> dict[str, Any]:
        return {"gold": self.gold, "corrections": self.corrections,
                "changed": {rule: list(ids) for rule, ids in self.changed.items()}, "removed": list(self.removed)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GoldRevision:
        return cls(str(data.get("gold") or "upstream"), data.get("corrections"),
                   {str(k): tuple(str(i) for i in v) for k, v in (data.get("changed") or {}).items()},
                   tuple(str(i) for i in data.get("removed") or ()))


@dataclass(frozen=True)
class Dataset:
    """A named collection of conversations loaded from `path`; `gold_revision` says how its gold answers were
    revised (None: as the file has them, no revision asked)."""

    name: str
    path: str
    conversations: tuple[Conversation, ...]
    gold_revision: GoldRevision | None = None

    def questions(self) -> Iterator[tuple[Conversation, Question]]:
        """Every (conversation, question) pair in file order."""
        for conversation in self.conversations:
            for question in conversation.questions:
                yield conversation, question

    def conversation(self, sample_id: str) -> Conversation:
        """The conversation with this sample id; KeyError if there is none."""
        for conversation in self.conversations:
            if conversation.sample_id == sample_id:
                return conversation
        raise KeyError(f"{self.name} has no conversation {sample_id!r}")

    def gold_summary(self) -> dict[str, Any] | None:
        """What the gold revision changed among this dataset's questions (`GoldRevision.summary`); None when the
        gold was not revised."""
        if self.gold_revision is None:
            return None
        return self.gold_revision.summary(question.question_id for _, question in self.questions())

    def stats(self) -> DatasetStats:
        by_category: Counter[str] = Counter()
        abstention = 0
        for _, question in self.questions():
            by_category[question.category] += 1
            abstention += question.abstention
        ordered = {c: by_category[c] for c in sorted(by_category, key=category_sort_key)}
        return DatasetStats(
            conversations=len(self.conversations),
            sessions=sum(len(c.sessions) for c in self.conversations),
            turns=sum(c.n_turns for c in self.conversations),
            questions=sum(by_category.values()),
            questions_by_category=ordered,
            abstention_questions=abstention,
        )
