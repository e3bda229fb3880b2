"""What the blamed failures of an answer step have in common, found by comparing each answer with its gold answer
and with what the step was shown, not by asking a model.

A small reflection model asked to fix failures mostly restates its task ("Ensure the context includes the
information needed") or writes a rule about the cases' people; told the mistake, it has something to write a
rule about. Each pattern is a mistake an answer step makes in any memory QA data, stated in general terms:

- `declined`: the answer declines ("None", "not mentioned") though the step was shown the gold answer's words;
- `partial_list`: the gold lists several things and the answer names some of them, not all;
- `date_form`: the gold names a date and the answer gives a relative time ("last week", "3 years ago") or a date
  in another form (in digits where the gold names the month, or the other way round);
- `verbose`: the answer is a long sentence where the gold is a short phrase, and misses some of its words.

Each carries the mistake as the reflection LM is told it and a general rule that fixes it; the proposer offers
the rule itself (appended to the current instruction) in a slot the reflection LM's replies leave empty. The
valset decides whether it is kept, as for any candidate. Only steps whose reply is the system's answer are
diagnosed: for an upstream step (extraction, a memory decision) the answer's shape says nothing about its reply.

`PATTERNS` compare each answer with its own gold only, and their rules name no format. The loop's patterns are
learned from the training split's gold answers (`learned_patterns`, over a `GoldFormat`): a rule asks for the
golds' own date form (with an invented date as its example), their length in words and their list separator, a
pattern whose format no training gold shows is not offered, and each test also checks the answer against the
learned format. `refine` re-tests the findings of `PATTERNS` with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import partial

from memtrace_opt.metrics import is_decline
from memtrace_opt.metrics.text import answer_tokens, normalize_answer, token_scores
from memtrace_opt.optimizers.core.evidence import DiagnosedCase, Finding, Pattern
from memtrace_opt.optimizers.evaluation.gold_format import (
    GoldFormat,
    date_kind,
    date_template,
    describe_form,
    form_key,
    list_parts,
    render_date,
)
from memtrace_opt.text.words import RELATIVE_DAYS, WEEKDAYS

__all__ = ["DiagnosedCase", "Pattern", "Finding", "PATTERNS", "diagnose", "learned_patterns", "patterns_for",
           "refine", "writes_the_answer"]

# relative times a reply leaves unresolved
_RELATIVE = re.compile(
    r"\b(?:" + "|".join(RELATIVE_DAYS) + r"|(?:last|next|this|past) (?:\w+ )?(?:week|weekend|month|year|night|"
    + "|".join(WEEKDAYS) + r"|summer|winter|spring|fall)|"
    r"\w+ (?:days?|weeks?|months?|years?) (?:ago|before|later|earlier)|recently|a while ago)\b",
    re.IGNORECASE,
)
_YES_NO = frozenset({"yes", "no"})
_LONG_ANSWER = 12  # words: a sentence, not a phrase
_SEPARATORS = {",": "separated by commas", ";": "separated by semicolons", "and": 'joined by "and"'}



def _covered(part: str, text: str) -> bool:
    tokens = answer_tokens(part)
    return bool(tokens) and token_scores(text, part).recall >= 0.5


def _declined(gold: str, answer: str, shown: str) -> bool:
    if not is_decline(answer) or is_decline(gold):
        return False
    tokens = answer_tokens(gold)  # a yes / no gold's word is in any context: it shows nothing
    return bool(tokens) and not set(tokens) <= _YES_NO and token_scores(shown, gold).recall >= 0.75


def _partial_list(gold: str, answer: str, shown: str) -> bool:
    parts = list_parts(gold)  # "19 January, 2031" is one date, not a list
    if len(parts) < 2 or is_decline(answer):
        return False
    covered = sum(_covered(part, answer) for part in parts)
    return 0 < covered < len(parts)


def _date_form(gold: str, answer: str, shown: str) -> bool:
    """The gold names a date and the answer gives a relative time, or a date in digits where the gold's is not
    (or the other way round); a year alone goes with a named month."""
    gold_kind = date_kind(gold)
    if gold_kind is None or is_decline(answer):
        return False
    kind = date_kind(answer)
    if kind is None:
        return bool(_RELATIVE.search(answer))
    return (kind == "numeric") != (gold_kind == "numeric")


def _verbose(gold: str, answer: str, shown: str) -> bool:
    words, gold_words = len(answer.split()), len(gold.split())
    scores = token_scores(answer, gold)  # one that holds every gold word is right by the token rule
    return (not is_decline(answer) and words >= _LONG_ANSWER and words >= 3 * max(1, gold_words)
            and scores.f1 <= 0.5 and scores.recall < 1.0)


def _learned_date_form(form: GoldFormat, gold: str, answer: str, shown: str) -> bool:
    """`_date_form`, where the answer's date is not in a form the training golds use either."""
    template = date_template(answer)
    return _date_form(gold, answer, shown) and (template is None or form_key(template) not in form.date_keys())


def _learned_verbose(form: GoldFormat, gold: str, answer: str, shown: str) -> bool:
    """`_verbose`, where the answer is also longer than the training golds' phrases."""
    return _verbose(gold, answer, shown) and len(answer.split()) > form.phrase_words


_DECLINED = Pattern(
    "declined",
    "The answer declines (None, not mentioned) although the context it was given holds the answer.",
    "Before you reply that the answer is not known, search the whole context for what the question asks about, "
    "also in other words or mentioned in passing, and answer from what you find.",
    _declined)

_LIST_MISTAKE = "The question asks for several things and the answer names only some of those the context mentions."
_DATE_MISTAKE = "The answer gives a relative time (\"last week\", \"3 years ago\") or a date in another form"
_VERBOSE_MISTAKE = "The answer is a long sentence (often the speaker's own words) where a short phrase answers the question"

PATTERNS: tuple[Pattern, ...] = (
    _DECLINED,
    Pattern("partial_list", _LIST_MISTAKE,
            "When the question asks for several things (activities, places, items, people), name every one the "
            "context mentions, not only the first.",
            _partial_list),
    Pattern("date_form", _DATE_MISTAKE + " than the gold answer's.",
            "Write every date as the calendar date it names, in the form the context writes dates: never a relative "
            "time such as \"last week\" or \"three years ago\".",
            _date_form),
    Pattern("verbose", _VERBOSE_MISTAKE + ".",
            "Reply with the shortest phrase that answers the question, taken from the context: no full sentence and "
            "no explanation.",
            _verbose),
)


def _date_rule(form: GoldFormat, date_form: str) -> str:
    example = render_date(date_form)
    without_day = f' ("{render_date(form.month_form)}" when the day is not known)' if form.month_form else ""
    other = "{year}-{m}-{d}" if date_kind(example) != "numeric" else "{day} {month} {year}"
    return (f"Write every date as {describe_form(date_form)}, as in \"{example}\"{without_day}: never a relative time "
            f"such as \"last week\" or \"three years ago\", and not in another form such as \"{render_date(other)}\".")


def patterns_for(form: GoldFormat) -> tuple[Pattern, ...]:
    """The patterns in the format `form` learned from a training split's golds: `declined` always; `partial_list`
    where golds list items (with their separator), `date_form` where golds name dates (their form, shown on an
    invented date), `verbose` where golds have a length (at most `phrase_words` words)."""
    found = [_DECLINED]
    if form.list_separator is not None:
        found.append(Pattern("partial_list", _LIST_MISTAKE,
                             "When the question asks for several things (activities, places, items, people), list "
                             f"every one the context mentions, {_SEPARATORS[form.list_separator]}.",
                             _partial_list))
    if form.date_form is not None:
        described = f"{describe_form(form.date_form)} (\"{render_date(form.date_form)}\")"
        found.append(Pattern("date_form", f"{_DATE_MISTAKE} where the answer should give the date as {described}.",
                             _date_rule(form, form.date_form), partial(_learned_date_form, form)))
    if form.phrase_words > 0:
        words = form.phrase_words
        found.append(Pattern("verbose", f"{_VERBOSE_MISTAKE} in {words} words or fewer.",
                             "Reply with the shortest phrase that answers the question, taken from the context, in "
                             f"{words} word{'s' if words > 1 else ''} or fewer: no full sentence and no explanation.",
                             partial(_learned_verbose, form)))
    return tuple(found)


def learned_patterns(golds: Iterable[object]) -> tuple[Pattern, ...]:
    """`patterns_for` the format of these gold answers (a training split's)."""
    return patterns_for(GoldFormat.learn(golds))


def writes_the_answer(produced: str, answer: str) -> bool:
    """Whether a step's reply is the system's answer (its output holds the answer's text)."""
    answer = normalize_answer(answer)
    return bool(answer) and answer in normalize_answer(produced)


def _ranked(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: -len(f.cases))


def diagnose(cases: Sequence[tuple[str, str, str, str, str]], min_cases: int = 1,
             patterns: Sequence[Pattern] = PATTERNS) -> list[Finding]:
    """The `patterns` at least `min_cases` of `cases` show, most cases first (ties in `patterns` order). Each case
    is (case id, gold, answer, what the step was shown, what it produced); one whose step did not write the
    answer is left out."""
    found = [DiagnosedCase(*case) for case in cases]
    findings = []
    for pattern in patterns:
        hits = tuple(case for case in found
                     if writes_the_answer(case.produced, case.answer) and pattern.test(case.gold, case.answer, case.shown))
        if len(hits) >= min_cases:
            findings.append(Finding(pattern, tuple(case.case_id for case in hits), hits))
    return _ranked(findings)


def refine(findings: Sequence[Finding], patterns: Sequence[Pattern]) -> list[Finding]:
    """`findings` in `patterns` (most cases first): each finding's pattern replaced by the one of the same name,
    its cases tested again with it; a pattern `patterns` lacks, or no case of which passes, is left out. A finding
    without its cases whole keeps its case ids."""
    by_name = {pattern.name: pattern for pattern in patterns}
    out = []
    for finding in findings:
        pattern = by_name.get(finding.pattern.name)
        if pattern is None:
            continue
        if not finding.shown_by:
            out.append(Finding(pattern, finding.cases))
            continue
        hits = tuple(c for c in finding.shown_by if pattern.test(c.gold, c.answer, c.shown))
        if hits:
            out.append(Finding(pattern, tuple(c.case_id for c in hits), hits))
    return _ranked(out)
