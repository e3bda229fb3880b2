"""The calendar dates a text names, in whichever written form, for the token rule's date test (`metrics.score`).

A date is read as the parts it names: a year, a month, a day, any of them missing but not all. The forms read:

- a month's name (full or abbreviated, `text.words.MONTH_NUMBERS`) with a day before or after it and/or a year
  after it: "14 October 2031", "14th of Oct. 2031", "October 14, 2031", "14October, 2031", "October 2031";
  a month's name alone ("may") is no date, nor is one in lower case without a year ("you may 3 times");
- digits, year first (ISO): "2031-10-14", "2031/10/14", "2031.10.14";
- digits, year last: "14/10/2031", "10/14/2031", "14-10-2031". Where both of the first two numbers could be the
  month ("05/07/2031") the date is read both ways (`DateSpan.readings`);
- a weekday before a date is part of it and names nothing more: "Tuesday, 14 October 2031", "Tuesday 2031-10-14";
- a year alone ("in 2031"), only where asked (`years=True`: a gold answer that names a year and no fuller date).

Two-digit years ("14/10/31") are not read: they do not say which century, nor always which number is the year.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memtrace_opt.text.words import MONTH_NUMBERS, WEEKDAYS

__all__ = ["DateParts", "DateSpan", "find_dates", "in_gold_form", "names_dates", "other_date", "without_dates"]

_MONTH = "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True))
_WEEKDAY = rf"(?:(?:{'|'.join(WEEKDAYS)})\.?,?\s+)?"
_ORDINAL = r"(?:st|nd|rd|th)?"
_NAMED = re.compile(
    rf"\b{_WEEKDAY}(?:(?<!\d)(?P<before>\d{{1,2}}){_ORDINAL}\s*(?:of\s+)?)?(?<![A-Za-z])(?P<month>{_MONTH})(?![A-Za-z])"
    rf"\.?(?(before)|(?:\s+(?P<after>\d{{1,2}}){_ORDINAL}(?!\d))?)(?:,?\s+(?P<year>\d{{4}})(?!\d))?",
    re.IGNORECASE,
)
_YEAR_FIRST = re.compile(rf"\b{_WEEKDAY}(?<![\d./-])(\d{{4}})([-/.])(\d{{1,2}})\2(\d{{1,2}})(?!\d|[-/.]\d)", re.IGNORECASE)
_YEAR_LAST = re.compile(rf"\b{_WEEKDAY}(?<![\d./-])(\d{{1,2}})([-/.])(\d{{1,2}})\2(\d{{4}})(?!\d|[-/.]\d)", re.IGNORECASE)
_YEAR = re.compile(r"(?<![\d.,/:-])\b(1[6-9]\d\d|20\d\d)\b(?![.,/:-]?\d)")


@dataclass(frozen=True)
class DateParts:
    """The parts of a calendar date a text names (None: a part it does not name)."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def names(self, other: DateParts) -> bool:
        """Whether this date names the parts `other` names, each the same, and no more: "2031-10-14" names "14
        October 2031"; "2031-10-01" does not name "October 2031" (a day the other never gave)."""
        return self == other

    def agrees(self, other: DateParts) -> bool:
        """Whether no part that both dates name differs ("October 2031" agrees with "14 October 2031")."""
        pairs = ((self.year, other.year), (self.month, other.month), (self.day, other.day))
        return all(mine is None or theirs is None or mine == theirs for mine, theirs in pairs)



@dataclass(frozen=True)
class DateSpan:
    """Where a text names a date, and what it names: one reading, or two where digits read both ways."""

    start: int
    end: int
    readings: tuple[DateParts, ...]


def _valid(parts: DateParts) -> bool:
    if parts.month is not None and not 1 <= parts.month <= 12:
        return False
    if parts.day is None:
        return True
    if parts.month is None:
        return False
    last = calendar.monthrange(parts.year if parts.year is not None else 2000, parts.month)[1]  # 2000: 29 February
    return 1 <= parts.day <= last


def _number(text: str | None) -> int | None:
    return int(text) if text else None


def _named(match: re.Match[str]) -> DateSpan | None:
    month = match.group("month")
    year, day = _number(match.group("year")), _number(match.group("before") or match.group("after"))
    if day is None and year is None:
        return None  # a month's name alone
    if month.islower() and year is None:
        return None  # "you may 3 times"
    parts = DateParts(year, MONTH_NUMBERS[month.lower()], day)
    return DateSpan(match.start(), match.end(), (parts,)) if _valid(parts) else None


def _year_first(match: re.Match[str]) -> DateSpan | None:
    parts = DateParts(int(match.group(1)), int(match.group(3)), int(match.group(4)))
    return DateSpan(match.start(), match.end(), (parts,)) if _valid(parts) else None


def _year_last(match: re.Match[str]) -> DateSpan | None:
    first, second, year = int(match.group(1)), int(match.group(3)), int(match.group(4))
    readings = tuple(dict.fromkeys(p for p in (DateParts(year, second, first), DateParts(year, first, second))
                                   if _valid(p)))
    return DateSpan(match.start(), match.end(), readings) if readings else None


def find_dates(text: str, *, years: bool = False) -> tuple[DateSpan, ...]:
    """The dates `text` names, in order (module doc); with `years`, also a year alone where no fuller date is."""
    text = str(text)
    found: list[DateSpan] = []
    for pattern, read in ((_YEAR_FIRST, _year_first), (_YEAR_LAST, _year_last), (_NAMED, _named)):
        for match in pattern.finditer(text):
            span = read(match)
            if span is not None and not any(_overlap(span, seen) for seen in found):
                found.append(span)
    if years and not found:
        found = [DateSpan(m.start(), m.end(), (DateParts(int(m.group(1))),)) for m in _YEAR.finditer(text)]
    return tuple(sorted(found, key=lambda span: span.start))


def _overlap(a: DateSpan, b: DateSpan) -> bool:
    return a.start < b.end and b.start < a.end


def without_dates(text: str, spans: Sequence[DateSpan]) -> str:
    """`text` with the dates of `spans` (found in it) left out."""
    kept, at = [], 0
    for span in spans:
        kept.append(text[at:span.start])
        at = span.end
    return " ".join(part.strip() for part in [*kept, text[at:]] if part.strip())


def in_gold_form(text: str, gold: str) -> str:
    """`text` with each date it names that is one of `gold`'s dates (the same parts, `DateParts.names`) written as
    `gold` writes it: "2031-10-20" for a gold "from 18 October to 20 October 2031" becomes "20 October 2031". Every
    other word, and every other date, stays as it is."""
    gold_spans = find_dates(gold, years=True)
    kept, at = [], 0
    for span in find_dates(text):
        same = next((g for g in gold_spans
                     if any(mine.names(theirs) for mine in span.readings for theirs in g.readings)), None)
        if same is not None:
            kept += [text[at:span.start], gold[same.start:same.end]]
            at = span.end
    return "".join([*kept, text[at:]])


def names_dates(dates: Sequence[DateSpan], gold: Sequence[DateSpan]) -> bool:
    """Whether `dates` (an answer's) name every date of `gold` (some reading of one names some reading of it) and
    no other (`other_date`). False when the gold names no date."""
    if not gold or other_date(dates, gold):
        return False
    return all(any(mine.names(theirs) for span in dates for mine in span.readings for theirs in wanted.readings)
               for wanted in gold)


def other_date(dates: Sequence[DateSpan], gold: Sequence[DateSpan]) -> bool:
    """Whether one of `dates` agrees with no date of `gold` (another day, month or year than any the gold names);
    False when the gold names no date."""
    return bool(gold) and any(
        not any(mine.agrees(theirs) for g in gold for mine in span.readings for theirs in g.readings)
        for span in dates)
