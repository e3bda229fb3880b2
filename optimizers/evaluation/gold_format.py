"""`GoldFormat`: the answer format of a training split, learned once from its gold answers, so that a rule asking
for a format asks for the one the data's golds use, not one written for a benchmark.

    form = GoldFormat.learn(case.question.answer for case in train)
    form.date_form        # "{day} {month} {year}" where most dated golds read like "14 October 2031"
    form.example_date()   # an invented date in that form: "14 October 2031"
    form.phrase_words     # how long a gold is, in words: the upper quartile of the golds' lengths
    form.list_separator   # "," where golds list items with commas; None where no gold lists items

A date's form is a template of its parts (`date_template`): "{day} {month} {year}", "{month} {day}, {year}",
"{year}-{m}-{d}", "{m}/{d}/{year}", "{month} {year}", "{year}". A year-last date in digits whose first two numbers
are both 12 or less ("05/07/2031") is read day first when some gold's first number is over 12, else month first.
Examples are rendered from an invented date (`INVENTED_DATE`), never from a gold.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from memtrace_opt.metrics import is_decline
from memtrace_opt.metrics.text import answer_tokens
from memtrace_opt.text.words import MONTH_NUMBERS, MONTHS

__all__ = ["GoldFormat", "INVENTED_DATE", "date_kind", "date_template", "describe_form", "form_key", "list_parts",
           "render_date"]

INVENTED_DATE = date(2031, 10, 14)  # day over 12: its numeric forms read one way only

_FULL_MONTHS = frozenset(MONTHS)
_SHORT_MONTHS = frozenset(MONTH_NUMBERS) - _FULL_MONTHS
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_MONTH = rf"(?:{'|'.join(MONTHS)}|{'|'.join(sorted(_SHORT_MONTHS, key=len, reverse=True))})\b\.?"
# a month name with a day before or after it, or a year after it (a named month alone is no date: "may")
_NAMED = re.compile(rf"\b(?:{_DAY}(?:\s+of)?\s+)?{_MONTH}(?:\s+{_DAY}\b)?(?:,?\s+\d{{4}}\b)?", re.IGNORECASE)
_MONTH_WORD = re.compile(rf"\b{_MONTH}", re.IGNORECASE)
_NUMERIC = re.compile(r"\b(\d{4})([-/.])(\d{1,2})\2(\d{1,2})\b|\b(\d{1,2})([-/.])(\d{1,2})\6(\d{4}|\d{2})\b")
_YEAR = re.compile(r"\b(?:1[6-9]|20)\d{2}\b")
_TOKEN = re.compile(r"(\d+)|([A-Za-z]+)|(\s+)|(.)")
_PART_WORDS = {"day": "day", "d": "day", "month": "month name", "mon": "short month name", "m": "month",
               "a": "month", "b": "day", "year": "year", "yy": "year"}
_LIST_SPLIT = re.compile(r",|;|\band\b", re.IGNORECASE)


def _is_date(span: str) -> bool:
    """A named-month match is a date when it has a number and its month is capitalised or has a year ("you may 3
    times" is no date)."""
    month = _MONTH_WORD.search(span)
    return (any(c.isdigit() for c in span) and month is not None
            and (month.group(0)[0].isupper() or re.search(r"\d{4}", span) is not None))


def _named_template(span: str) -> str:
    parts = []
    for digits, word, space, other in _TOKEN.findall(span):
        if digits:
            parts.append("{year}" if len(digits) == 4 else "{day}")
        elif word:
            low = word.lower()
            parts.append("{ord}" if low in ("st", "nd", "rd", "th") else "{month}" if low in _FULL_MONTHS
                         else "{mon}" if low in _SHORT_MONTHS else low)
        else:
            parts.append(" " if space else other)
    return "".join(parts)


def _numeric_template(match: re.Match[str]) -> str:
    if match.group(1):  # year first: year, month, day
        sep = match.group(2)
        return f"{{year}}{sep}{{m}}{sep}{{d}}"
    first, sep, second, year = match.group(5), match.group(6), match.group(7), match.group(8)
    order = ("{d}", "{m}") if int(first) > 12 else ("{m}", "{d}") if int(second) > 12 else ("{a}", "{b}")
    return f"{order[0]}{sep}{order[1]}{sep}{'{year}' if len(year) == 4 else '{yy}'}"


def date_template(text: str) -> str | None:
    """The form of the first date `text` names, as a template of its parts; None when it names no date. A
    year-last date in digits that reads both ways is "{a}/{b}/{year}" (`GoldFormat.learn` settles the order)."""
    found: list[tuple[int, str]] = []
    named = next((m for m in _NAMED.finditer(text) if _is_date(m.group(0))), None)
    if named is not None:
        found.append((named.start(), _named_template(named.group(0))))
    numeric = _NUMERIC.search(text)
    if numeric is not None:
        found.append((numeric.start(), _numeric_template(numeric)))
    if found:
        return min(found)[1]
    return "{year}" if _YEAR.search(text) else None


def form_key(template: str) -> str:
    """A template with the numbers of a date in digits made alike, so "{m}/{d}/{year}" and "{d}/{m}/{year}" (one
    form whose order a single date may not tell) compare equal."""
    return re.sub(r"\{(?:a|b|d|m)\}", "{n}", template)


def date_kind(text: str) -> str | None:
    """"named" (a month name), "numeric" (a date in digits), "year" (a year alone), or None (no date)."""
    template = date_template(text)
    if template is None:
        return None
    if "{month}" in template or "{mon}" in template:
        return "named"
    return "year" if template == "{year}" else "numeric"


def render_date(template: str, day: date = INVENTED_DATE) -> str:
    """`day` written in the form `template`."""
    values = {"year": f"{day.year}", "yy": f"{day.year % 100:02d}", "month": day.strftime("%B"),
              "mon": day.strftime("%b"), "day": str(day.day), "d": f"{day.day:02d}", "m": f"{day.month:02d}",
              "a": f"{day.month:02d}", "b": f"{day.day:02d}", "ord": _ordinal(day.day)}
    return template.format(**values)


def _ordinal(number: int) -> str:
    return "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")


def describe_form(template: str) -> str:
    """The parts of a date's form in words: "day, month name and year"; "year, month and day in digits"."""
    words = [_PART_WORDS[name] for name in re.findall(r"\{(\w+)\}", template) if name in _PART_WORDS]
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"{text} in digits" if date_kind(render_date(template)) == "numeric" else text


def list_parts(text: str) -> list[str]:
    """The items a text lists (split at commas, semicolons and "and"); a date is one item, not a list."""
    if date_template(text) is not None:
        return [text.strip()]
    return [p for p in (s.strip() for s in _LIST_SPLIT.split(text)) if answer_tokens(p)]


def _separator(text: str) -> str:
    return ";" if ";" in text else "," if "," in text else "and"


def _has_day(template: str) -> bool:
    return any(part in template for part in ("{day}", "{d}", "{b}"))


def _has_month(template: str) -> bool:
    return any(part in template for part in ("{month}", "{mon}", "{m}", "{a}"))


@dataclass(frozen=True)
class GoldFormat:
    """What a split's gold answers look like: how many were read (`golds`, declines left out), the form most of
    their dates take (`date_form`, a template; None: no gold names a date) and the form of a date without its
    day where they have one (`month_form`), the upper quartile of their lengths in words (`phrase_words`), and
    the separator of the golds that list several items (`list_separator`: ",", ";" or "and"; None: none does)."""

    golds: int = 0
    date_form: str | None = None
    month_form: str | None = None
    phrase_words: int = 0
    list_separator: str | None = None

    @classmethod
    def learn(cls, golds: Iterable[Any]) -> GoldFormat:
        texts = [text for text in (str(g).strip() for g in golds if g is not None) if text and not is_decline(text)]
        if not texts:
            return cls()
        templates = [t for t in map(date_template, texts) if t is not None]
        day_first = any(t.startswith("{d}") for t in templates)
        settled = [t.replace("{a}", "{d}" if day_first else "{m}").replace("{b}", "{m}" if day_first else "{d}")
                   for t in templates]
        ranked = [t for t, _ in Counter(settled).most_common()]
        dated = [t for t in ranked if _has_day(t)] or [t for t in ranked if _has_month(t)] or ranked
        date_form = dated[0] if dated else None
        month_form = None
        if date_form is not None and _has_day(date_form):
            month_form = next((t for t in ranked if _has_month(t) and not _has_day(t)), None)
        lengths = sorted(len(text.split()) for text in texts)
        lists = Counter(_separator(text) for text in texts if len(list_parts(text)) >= 2)
        return cls(golds=len(texts), date_form=date_form, month_form=month_form,
                   phrase_words=lengths[math.ceil(0.75 * len(lengths)) - 1],
                   list_separator=lists.most_common(1)[0][0] if lists else None)

    def date_keys(self) -> frozenset[str]:
        """The date forms an answer may take (`form_key`s): the golds' date form, its form without the day, and a
        year alone."""
        return frozenset(form_key(t) for t in (self.date_form, self.month_form, "{year}") if t is not None)

    def example_date(self) -> str:
        return "" if self.date_form is None else render_date(self.date_form)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GoldFormat:
        return cls(golds=int(data.get("golds") or 0), date_form=data.get("date_form"),
                   month_form=data.get("month_form"), phrase_words=int(data.get("phrase_words") or 0),
                   list_separator=data.get("list_separator"))
