"""Which gold answers a run is scored against: the file as published (`upstream`) or `corrected`.

`corrected` (the default) applies three rules, in this order, before the data is sliced:

- the QA corrections file beside a LoCoMo file (`locomo10_pr28_qa_changes.jsonl` beside `locomo10.json`, one
  JSON line per changed question: `{sample_id, qa_index, upstream: {question, answer | adversarial_answer,
  evidence, category}, pr28: {...} | null}`): a question whose record is still the line's `upstream` one
  takes the corrected record (null removes the question); a question that differs is left alone (the file
  was written against another revision). Question ids stay those of the file (`conv-1:q7`);
- glued gold words: a gold word the question's evidence turns never write, where they write its parts
  apart, is split the same way ("watchingmovies" -> "watching movies" when a turn says "watching movies"); a
  number glued to a word of three letters or more that the conversation never writes so ("21Janury" ->
  "21 Janury"); a comma between two letters, or a letter and a quote, gets its space ("Boston,Denver" ->
  "Boston, Denver", 'kayak,"Blue Heron"' -> 'kayak, "Blue Heron"': the token rule, as LoCoMo's upstream
  normalisation, deletes commas);
- glued pairs: a gold word that is no word of the conversation (`ConversationWords`: one it writes, or a form of
  one, by its stem) nor of English (`text.words.english_words`), and that is two words of the conversation
  one of which is a function word (`text.words.FUNCTION_WORDS`), is split in two ("tothe" -> "to the",
  "ferryon" -> "ferry on"); where several cuts qualify, the one with the longest first part ("themin" -> "them
  in", not "the min"). The function word keeps a compound the lexicon lacks whole ("sunporch") from being cut.
  A word with punctuation inside ("kayak-rack") is no glued word: the token rule reads the answer's the same.

Without these the token rule and attribution's "holds the answer" test fail on such a gold answer whatever the
answer.

`GoldRevision` records which questions each rule changed; a run's config and an optimization's manifest
report the counts for their questions.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memtrace_opt.data._types import (
    DEFAULT_GOLD,
    GLUED_PAIRS,
    GLUED_WORDS,
    GOLD_CHOICES,
    GOLD_RULES,
    QA_CORRECTIONS,
    Conversation,
    Dataset,
    GoldRevision,
    Question,
)
from memtrace_opt.data.locomo import parse_question
from memtrace_opt.errors import DatasetError
from memtrace_opt.text.porter import porter_stem
from memtrace_opt.text.words import FUNCTION_WORDS, english_words

log = logging.getLogger(__name__)

__all__ = ["CORRECTIONS_FILE", "DEFAULT_GOLD", "GLUED_PAIRS", "GLUED_WORDS", "GOLD_CHOICES", "QA_CORRECTIONS",
           "ConversationWords", "GoldRevision", "QAChange", "corrections_beside", "read_corrections", "revise_gold",
           "split_glued_pairs", "split_glued_words"]

CORRECTIONS_FILE = "locomo10_pr28_qa_changes.jsonl"

# a gold word with only punctuation around it ("nature," or "(Boston)"); one with punctuation inside is left alone
_CHUNK = re.compile(r"(?<!\S)([^\sA-Za-z0-9]*)([A-Za-z0-9]+)([^\sA-Za-z0-9]*)(?!\S)")
_NUMBER_WORD = re.compile(r"(\d+)([A-Za-z]{3,})")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_COMMA_GLUE = re.compile(r"(?<=[A-Za-z\"']),(?=[\"']?[A-Za-z])")
_LETTERS = re.compile(r"[a-z0-9]+")
_MAX_PARTS = 4
_MIN_PART = 2


@dataclass(frozen=True)
class QAChange:
    """One line of a corrections file: the record it replaces and the corrected one (None: the question goes)."""

    sample_id: str
    qa_index: int
    upstream: Mapping[str, Any]
    corrected: Mapping[str, Any] | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QAChange:
        return cls(str(data["sample_id"]), int(data["qa_index"]), dict(data["upstream"]),
                   dict(data["pr28"]) if data.get("pr28") is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return {"sample_id": self.sample_id, "qa_index": self.qa_index, "upstream": dict(self.upstream),
                "pr28": dict(self.corrected) if self.corrected is not None else None}


def corrections_beside(path: str | Path) -> Path | None:
    """The corrections file beside a data file, if there is one."""
    beside = Path(path).with_name(CORRECTIONS_FILE)
    return beside if beside.is_file() else None


def read_corrections(path: Path) -> list[QAChange]:
    """The lines of a corrections file; a malformed line is a one-line DatasetError naming it."""
    changes = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            changes.append(QAChange.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as error:
            raise DatasetError(f"{path.name}: line {number}: not a QA correction ({error})") from None
    return changes


def revise_gold(dataset: Dataset, gold: str, corrections: Path | None = None) -> Dataset:
    """`dataset` with its gold answers as `gold` asks (module doc), and `gold_revision` saying what changed.
    `corrections` is the corrections file (default: the one beside the dataset's file, for LoCoMo data)."""
    if gold not in GOLD_CHOICES:
        raise DatasetError(f"unknown gold {gold!r}: choose one of {', '.join(GOLD_CHOICES)}")
    if gold == "upstream":
        return replace(dataset, gold_revision=GoldRevision("upstream"))
    if corrections is None and any(c.dataset == "locomo" for c in dataset.conversations):
        corrections = corrections_beside(dataset.path)
    changed: dict[str, list[str]] = {rule: [] for rule in GOLD_RULES}
    removed: list[str] = []
    by_sample: dict[str, dict[int, QAChange]] = {}
    for change in read_corrections(corrections) if corrections is not None else ():
        by_sample.setdefault(change.sample_id, {})[change.qa_index] = change
    conversations = []
    for conversation in dataset.conversations:
        questions = []
        words = ConversationWords.of(conversation)
        for question in conversation.questions:
            try:
                revised = _corrected(conversation, question, by_sample.get(conversation.sample_id, {}))
            except DatasetError as error:  # a record of the corrections file the loader cannot read
                raise DatasetError(f"{CORRECTIONS_FILE}: {error}") from None
            if revised is None:
                removed.append(question.question_id)
                continue
            if revised != question:
                changed[QA_CORRECTIONS].append(question.question_id)
            split = split_glued_words(conversation, revised, words)
            if split != revised:
                changed[GLUED_WORDS].append(question.question_id)
            paired = split_glued_pairs(conversation, split, words)
            if paired != split:
                changed[GLUED_PAIRS].append(question.question_id)
            questions.append(paired)
        conversations.append(replace(conversation, questions=tuple(questions)))
    revision = GoldRevision("corrected", corrections.name if corrections is not None else None,
                            {rule: tuple(ids) for rule, ids in changed.items()}, tuple(removed))
    return replace(dataset, conversations=tuple(conversations), gold_revision=revision)


def _qa_index(question: Question) -> int | None:
    head, _, tail = question.question_id.rpartition(":q")
    return int(tail) if head and tail.isdigit() else None


def _corrected(conversation: Conversation, question: Question, changes: Mapping[int, QAChange]) -> Question | None:
    """The question as its correction has it (None: removed); itself when it has none or its record differs from
    the correction's `upstream` one."""
    index = _qa_index(question)
    change = changes.get(index) if index is not None else None
    if change is None or index is None:
        return question
    if parse_question(change.upstream, index, conversation.sample_id) != question:
        log.info("%s: its record is not the correction's upstream one; left as it is", question.question_id)
        return question
    if change.corrected is None:
        return None
    return parse_question(change.corrected, index, conversation.sample_id)


@dataclass(frozen=True)
class ConversationWords:
    """The words a conversation writes (its turns with their captions, its session dates): as the token rule reads
    them ("self-made" gives "selfmade") and between punctuation ("self", "made"); and their stems."""

    words: frozenset[str]
    stems: frozenset[str]

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationWords:
        texts = [t.display_text() for t in conversation.turns()] + [s.date_time or "" for s in conversation.sessions]
        text = " ".join(texts)
        words = frozenset(_tokens(text)) | frozenset(_LETTERS.findall(text.lower()))
        return cls(words, frozenset(porter_stem(w) for w in words))

    def says(self, word: str) -> bool:
        """Whether the conversation writes `word` (lower case), or a form of it ("walks" where it writes "walk")."""
        return word in self.words or porter_stem(word) in self.stems


def split_glued_words(conversation: Conversation, question: Question,
                      words: ConversationWords | None = None) -> Question:
    """`question` with the glued words of its gold answer split (module doc); itself when there are none. `words`:
    the conversation's (`ConversationWords.of(conversation)` when not given)."""
    if question.abstention:
        return question
    turns = [conversation.turn(e) for e in question.evidence if conversation.has_turn(e)]
    evidence = _tokens(" ".join(t.display_text() for t in turns))
    known = set(evidence)
    written = (words if words is not None else ConversationWords.of(conversation)).words

    def split(match: re.Match[str]) -> str:
        lead, word, tail = match.groups()
        low = word.lower()
        if low in known:
            return match.group()
        parts = _adjacent_parts(low, evidence)
        if parts:
            cuts, start = [], 0
            for part in parts:
                cuts.append(word[start:start + len(part)])
                start += len(part)
            return lead + " ".join(cuts) + tail
        number = _NUMBER_WORD.fullmatch(word)
        if number and low not in written:
            return f"{lead}{number.group(1)} {number.group(2)}{tail}"
        return match.group()

    answer = _CHUNK.sub(split, _COMMA_GLUE.sub(", ", question.answer))
    return question if answer == question.answer else replace(question, answer=answer)


def _tokens(text: str) -> list[str]:
    """The words of `text` as the token rule reads them (LoCoMo's normalisation: commas dropped, lower case,
    punctuation removed), articles kept so that adjacent means adjacent in the text."""
    return text.replace(",", "").lower().translate(_PUNCTUATION).split()


def _adjacent_parts(word: str, tokens: list[str]) -> list[str] | None:
    """Two to four adjacent `tokens` (each of two characters or more) that make `word` when joined, else None."""
    for start, first in enumerate(tokens):
        if not word.startswith(first) or len(first) < _MIN_PART:
            continue
        joined, parts = first, [first]
        for token in tokens[start + 1:start + _MAX_PARTS]:
            if len(token) < _MIN_PART or not word.startswith(joined + token):
                break
            joined += token
            parts.append(token)
            if joined == word:
                return parts
    return None


def split_glued_pairs(conversation: Conversation, question: Question,
                      words: ConversationWords | None = None) -> Question:
    """`question` with each glued pair of its gold answer cut in two (module doc); itself when there is none."""
    if question.abstention:
        return question
    said = words if words is not None else ConversationWords.of(conversation)

    def split(match: re.Match[str]) -> str:
        lead, word, tail = match.groups()
        first = _first_of_pair(word.lower(), said)
        return match.group() if first is None else f"{lead}{word[:len(first)]} {word[len(first):]}{tail}"

    answer = _CHUNK.sub(split, question.answer)
    return question if answer == question.answer else replace(question, answer=answer)


def _first_of_pair(word: str, said: ConversationWords) -> str | None:
    """The first part of the cut that makes `word` a glued pair (module doc), the longest that does; None when
    `word` is a word, or no cut makes it a pair."""
    if not word.isalpha() or said.says(word) or word in english_words():
        return None
    for cut in range(len(word) - _MIN_PART, _MIN_PART - 1, -1):
        first, second = word[:cut], word[cut:]
        if (first in FUNCTION_WORDS or second in FUNCTION_WORDS) and said.says(first) and said.says(second):
            return first
    return None
