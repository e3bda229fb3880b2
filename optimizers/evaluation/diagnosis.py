"""What the blamed failures of an answer step have in common, found by comparing each answer with its gold answer
and with what the step was shown, not by asking a model.

A small reflection model asked to fix failures mostly restates its task ("Ensure the context includes the
information needed") or writes a rule about the cases' people; told the mistake, it has something to write a
rule about. Each pattern is a mistake an answer step makes in any memory QA data, stated in general terms:

- `declined`: the answer declines ("None", "not mentioned") though the step was shown the gold answer's words;
- `partial_list`: the gold lists several things and the answer names some of them, not all;
- `date_form`: the gold names a date and the answer gives a relative time ("last week", "3 years ago") or a
  numeric one ("2023-03-26") instead;
- `verbose`: the answer is a long sentence where the gold is a short phrase, and misses some of its words.

Each carries the mistake as the reflection LM is told it and a general rule that fixes it; the proposer offers
the rule itself (appended to the current instruction) in a slot the reflection LM's replies leave empty. The
valset decides whether it is kept, as for any candidate. Only steps whose reply is the system's answer are
diagnosed: for an upstream step (extraction, a memory decision) the answer's shape says nothing about its reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memtrace_opt.metrics import is_abstention
from memtrace_opt.metrics.text import answer_tokens, normalize_answer, token_scores

__all__ = ["Pattern", "Finding", "PATTERNS", "diagnose", "writes_the_answer"]

# relative times a reply leaves unresolved, and dates written in digits
_RELATIVE = re.compile(
    r"\b(?:yesterday|today|tomorrow|tonight|(?:last|next|this|past) (?:\w+ )?(?:week|weekend|month|year|night|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|summer|winter|spring|fall)|"
    r"\w+ (?:days?|weeks?|months?|years?) (?:ago|before|later|earlier)|recently|a while ago)\b",
    re.IGNORECASE,
)
_NUMERIC_DATE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_MONTH = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:19|20)\d{2}\b")
_LIST_SPLIT = re.compile(r",|;|\band\b", re.IGNORECASE)
_YES_NO = frozenset({"yes", "no"})


@dataclass(frozen=True)
class Pattern:
    name: str
    mistake: str  # what the failures show, as the reflection LM is told it
    rule: str  # a general rule that fixes it
    test: Callable[[str, str, str], bool]  # (gold, answer, what the step was shown) -> the case shows it


def _covered(part: str, text: str) -> bool:
    tokens = answer_tokens(part)
    return bool(tokens) and token_scores(text, part).recall >= 0.5


def _declined(gold: str, answer: str, shown: str) -> bool:
    if not _abstains(answer) or _abstains(gold):
        return False
    tokens = answer_tokens(gold)  # a yes / no gold's word is in any context: it shows nothing
    return bool(tokens) and not set(tokens) <= _YES_NO and token_scores(shown, gold).recall >= 0.75


def _partial_list(gold: str, answer: str, shown: str) -> bool:
    if _MONTH.search(gold) or _YEAR.search(gold):  # "19 January, 2023" is one date, not a list
        return False
    parts = [p for p in (s.strip() for s in _LIST_SPLIT.split(gold)) if answer_tokens(p)]
    if len(parts) < 2 or _abstains(answer):
        return False
    covered = sum(_covered(part, answer) for part in parts)
    return 0 < covered < len(parts)


def _date_form(gold: str, answer: str, shown: str) -> bool:
    if not (_MONTH.search(gold) or _YEAR.search(gold)) or _abstains(answer):
        return False
    if _MONTH.search(answer):  # the answer names a month: its form is right, whatever the date
        return False
    return bool(_RELATIVE.search(answer) or _NUMERIC_DATE.search(answer))


def _verbose(gold: str, answer: str, shown: str) -> bool:
    words, gold_words = len(answer.split()), len(gold.split())
    scores = token_scores(answer, gold)  # one that holds every gold word is right by the token rule
    return (not _abstains(answer) and words >= 12 and words >= 3 * max(1, gold_words)
            and scores.f1 <= 0.5 and scores.recall < 1.0)


def _abstains(text: str) -> bool:
    return is_abstention(text) or normalize_answer(text) in {"none", "no answer", "n/a"}


PATTERNS: tuple[Pattern, ...] = (
    Pattern("declined",
            "The answer declines (None, not mentioned) although the context it was given holds the answer.",
            "Before you reply None, search the whole context for what the question asks about, also in other "
            "words or mentioned in passing, and answer from what you find.",
            _declined),
    Pattern("partial_list",
            "The question asks for several things and the answer names only some of those the context mentions.",
            "When the question asks for several things (activities, places, items, people), list every one the "
            "context mentions, separated by commas.",
            _partial_list),
    Pattern("date_form",
            "The answer gives a relative time (\"last week\", \"3 years ago\") or a date in digits where the answer "
            "should name the date: day, month name and year.",
            "Write every date as day, month name and year (\"26 March 2023\", or \"March 2023\" when the day is not "
            "known): never \"last week\", \"three years ago\" or \"2023-03-26\".",
            _date_form),
    Pattern("verbose",
            "The answer is a long sentence (often the speaker's own words) where a short phrase answers the question.",
            "Reply with the shortest phrase that answers the question, taken from the context: no full sentence and "
            "no explanation.",
            _verbose),
)


@dataclass(frozen=True)
class Finding:
    """A pattern and the blamed cases that show it."""

    pattern: Pattern
    cases: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"pattern": self.pattern.name, "cases": list(self.cases)}


def writes_the_answer(produced: str, answer: str) -> bool:
    """Whether a step's reply is the system's answer (its output holds the answer's text)."""
    answer = normalize_answer(answer)
    return bool(answer) and answer in normalize_answer(produced)


def diagnose(cases: Sequence[tuple[str, str, str, str, str]], min_cases: int = 1) -> list[Finding]:
    """The patterns at least `min_cases` of `cases` show, most cases first (ties in `PATTERNS` order). Each case
    is (case id, gold, answer, what the step was shown, what it produced); one whose step did not write the
    answer is left out."""
    findings = []
    for pattern in PATTERNS:
        hits = tuple(case_id for case_id, gold, answer, shown, produced in cases
                     if writes_the_answer(produced, answer) and pattern.test(gold, answer, shown))
        if len(hits) >= min_cases:
            findings.append(Finding(pattern, hits))
    return sorted(findings, key=lambda f: -len(f.cases))
