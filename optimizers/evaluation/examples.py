"""Training examples for the optimizers: one `dspy.Example` per question.

    examples = make_examples(dataset.conversations)
    ex = examples[0]
    ex.conversation   # "conv-26@3f9a1c": a conversation key (sample id @ content digest), a short string
    ex.question       # the `memtrace_opt.data.Question`
    ex.answer         # the gold answer (a label, not an input)
    ex.inputs()       # {"conversation", "question"}: what `MemoryQA(**inputs)` takes

A conversation travels as its key, not as the object: DSPy's optimizers print examples in logs and prompts,
and a whole conversation would flood both. `make_examples` registers each conversation in a process-wide
registry (`resolve_conversation`), keyed by sample id plus a digest of its sessions, so two slices of the same
conversation (different session ranges) never collide, while its question subsets (splits) share one key.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.data import Conversation, Question
from memtrace_opt.errors import ConfigError

__all__ = [
    "CaseRef",
    "conversation_key",
    "register_conversation",
    "resolve_conversation",
    "resolve_question",
    "make_examples",
    "case_refs",
    "group_by_conversation",
    "evaluation_steps",
]

_REGISTRY: dict[str, Conversation] = {}
_LOCK = threading.Lock()


def conversation_key(conversation: Conversation) -> str:
    """`sample_id@digest`: the digest covers what memory is built from (sessions and turns), not the questions,
    so every question subset of one conversation slice shares one memory."""
    parts = [conversation.dataset, conversation.sample_id]
    parts += [f"{s.index}:{s.date_time}:{len(s.turns)}:{s.turns[-1].dia_id if s.turns else ''}"
              for s in conversation.sessions]
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]
    return f"{conversation.sample_id}@{digest}"


def register_conversation(conversation: Conversation) -> str:
    """Registers `conversation` and returns its key."""
    key = conversation_key(conversation)
    with _LOCK:
        _REGISTRY.setdefault(key, conversation)
    return key


def resolve_conversation(value: Conversation | str) -> tuple[str, Conversation]:
    """(key, conversation) for a Conversation, a registered key, or a sample id registered exactly once."""
    if isinstance(value, Conversation):
        return register_conversation(value), value
    text = str(value)
    with _LOCK:
        if text in _REGISTRY:
            return text, _REGISTRY[text]
        matches = [(k, c) for k, c in _REGISTRY.items() if c.sample_id == text]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(f"unknown conversation {text!r}: build examples with make_examples(conversations)")
    raise ConfigError(f"conversation {text!r} is registered in several slices; pass its key (sample_id@digest)")


def resolve_question(value: Question | Mapping[str, Any] | str, conversation: Conversation) -> Question:
    """A Question from a Question, its dict form, or a question id / question text of `conversation`."""
    if isinstance(value, Question):
        return value
    if isinstance(value, Mapping):
        return Question.from_dict(value)
    text = str(value)
    for question in conversation.questions:
        if text in (question.question_id, question.question):
            return question
    raise ConfigError(f"{conversation.sample_id} has no question {text!r}")


@dataclass(frozen=True)
class CaseRef:
    """One question of one conversation: what an example points at."""

    conversation_key: str
    question: Question

    @property
    def case_id(self) -> str:
        return self.question.question_id

    @property
    def conversation(self) -> Conversation:
        return resolve_conversation(self.conversation_key)[1]


def make_examples(conversations: Iterable[Conversation], questions: Iterable[str] | None = None) -> list[dspy.Example]:
    """One example per question (all questions, or those whose id is in `questions`), in conversation order."""
    wanted = set(questions) if questions is not None else None
    examples = []
    for conversation in conversations:
        key = register_conversation(conversation)
        for question in conversation.questions:
            if wanted is not None and question.question_id not in wanted:
                continue
            example = dspy.Example(conversation=key, question=question, answer=question.answer, case_id=question.question_id)
            examples.append(example.with_inputs("conversation", "question"))
    return examples


def case_refs(examples: Sequence[dspy.Example]) -> list[CaseRef]:
    """The cases the examples name (conversations resolved through the registry)."""
    refs = []
    for example in examples:
        key, conversation = resolve_conversation(example["conversation"])
        refs.append(CaseRef(key, resolve_question(example["question"], conversation)))
    return refs


def group_by_conversation(cases: Iterable[CaseRef]) -> dict[str, list[Question]]:
    """conversation key -> its questions among `cases`, in first-seen order, without duplicates."""
    grouped: dict[str, list[Question]] = {}
    for case in cases:
        questions = grouped.setdefault(case.conversation_key, [])
        if all(q.question_id != case.question.question_id for q in questions):
            questions.append(case.question)
    return grouped


def evaluation_steps(cases: Iterable[CaseRef]) -> int:
    """The steps of an evaluation of `cases` as `trace_conversation` reports them: each conversation's sessions
    and each question (the progress of an optimizer's phases)."""
    cases = list(cases)
    sessions = {case.conversation_key: len(case.conversation.sessions) for case in cases}
    return sum(sessions.values()) + len(cases)
