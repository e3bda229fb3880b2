"""Pieces every memory system shares: token estimates, dates, how turns and units are shown to the LM, and
the question-answering operation (one Signature, one op class per system so each has its own `op_name`).

Token counts are estimates (about four characters per token, which is close for English chat text with the
Qwen and Llama tokenizers); they size buffers and context budgets, nothing is billed by them.

Dates: session timestamps are shown as "Friday, 23 April 2021"; extraction ops also get, next to the session
date, what the relative expressions in their messages mean ('"last Sunday" = Sunday, 18 April 2021'),
computed here, because small local models copy a date far more reliably than they do calendar arithmetic.

Answering: the LM replies "None" when the context does not hold the answer (small models say that far more
readily than a long fixed phrase); any such non-answer ("None", "unknown", "") becomes the dataset's
abstention answer, "Not mentioned in the conversation".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any, ClassVar

import dspy

from memtrace_opt.data import ABSTAIN_ANSWER, Question, Turn
from memtrace_opt.memory.ops import LMOperation, OperationFailed
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryUnit
from memtrace_opt.metrics import is_decline
from memtrace_opt.text.words import MONTH_NUMBERS, RELATIVE_DAYS, WEEKDAYS

__all__ = [
    "ABSTAIN_ANSWER",
    "CHARS_PER_TOKEN",
    "AnswerQuestion",
    "AnswerOp",
    "BoundedLMOperation",
    "estimate_tokens",
    "parse_date",
    "display_date",
    "relative_date_hints",
    "dated",
    "turn_line",
    "format_turns",
    "format_units",
    "fit_units",
    "chronological",
    "question_text",
    "clip_text",
    "strip_markers",
    "echoes",
]

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4

# A conservative estimate of what DSPy's chat adapter adds around the fields of a prompt (field list, format
# reminders, the instruction itself): room that context budgets leave free.
PROMPT_OVERHEAD_TOKENS = 768


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: ceil(characters / 4)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def clip_text(text: str, max_tokens: int) -> str:
    """`text` cut to about `max_tokens` tokens (at a word boundary), marked with an ellipsis when cut."""
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


# dates --------------------------------------------------------------------------------------------------
_LOCOMO_DATE = re.compile(r"(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})")  # "4:20 pm on 12 April, 2021"
_ISO_DATE = re.compile(r"(\d{4})[/-](\d{1,2})[/-](\d{1,2})")  # "2021/04/24 (Sat) 09:40"


def parse_date(text: str | None) -> date | None:
    """The calendar day of a session timestamp in LoCoMo ("4:20 pm on 12 April, 2021") or LongMemEval
    ("2021/04/24 (Sat) 09:40") form; None when there is none."""
    if not text:
        return None
    match = _ISO_DATE.search(text)
    if match:
        try:
            return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            return None
    match = _LOCOMO_DATE.search(text)
    if match and match.group(2).lower() in MONTH_NUMBERS:
        try:
            return date(int(match.group(3)), MONTH_NUMBERS[match.group(2).lower()], int(match.group(1)))
        except ValueError:
            return None
    return None


def display_date(text: str | None) -> str:
    """A session timestamp as the LM sees it: "Monday, 12 April 2021" when it parses, else as given."""
    day = parse_date(text)
    if day is None:
        return text or "unknown date"
    return f"{day.strftime('%A')}, {day.day} {day.strftime('%B %Y')}"


def day_month_year(day: date | datetime) -> str:
    return f"{day.day} {day.strftime('%B %Y')}"


_RELATIVE = re.compile(
    r"\b(" + "|".join(RELATIVE_DAYS) + r"|(?:last|next|this) (?:week(?:end)?|month|year|"
    + "|".join(WEEKDAYS)
    + r")|(?:a|one|two|three|few) (?:days?|weeks?|months?|years?) ago)\b",
    re.IGNORECASE,
)
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "few": 3}


def _resolve_one(expression: str, day: date) -> str | None:
    """The absolute date a relative expression said on `day` refers to (None when it has no fixed answer)."""
    from datetime import timedelta

    phrase = expression.lower()
    if phrase in ("today", "tonight"):
        return day_month_year(day)
    if phrase == "yesterday":
        return day_month_year(day - timedelta(days=1))
    if phrase == "tomorrow":
        return day_month_year(day + timedelta(days=1))
    which, _, unit = phrase.partition(" ")
    if unit in WEEKDAYS:
        target = WEEKDAYS.index(unit)
        delta = (day.weekday() - target) % 7 or 7
        if which == "next":
            return f"{unit.capitalize()}, " + day_month_year(day + timedelta(days=(target - day.weekday()) % 7 or 7))
        return f"{unit.capitalize()}, " + day_month_year(day - timedelta(days=delta if which == "last" else 0))
    first = day.replace(day=1)
    if unit in ("week", "weekend"):
        if which == "last":
            return f"the {unit} before {day_month_year(day)}"
        return f"the {unit} after {day_month_year(day)}" if which == "next" else f"the {unit} of {day_month_year(day)}"
    if unit == "month":
        if which == "last":
            return (first - timedelta(days=1)).strftime("%B %Y")
        return (first + timedelta(days=32)).strftime("%B %Y") if which == "next" else day.strftime("%B %Y")
    if unit == "year":
        return str(day.year - 1 if which == "last" else day.year + 1 if which == "next" else day.year)
    if phrase.endswith(" ago"):
        count, span = _NUMBERS.get(which, 1), unit.split()[0].rstrip("s")
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[span] * count
        back = day - timedelta(days=days)
        return day_month_year(back) if span in ("day", "week") else back.strftime("%B %Y") if span == "month" else str(back.year)
    return None


def relative_date_hints(text: str, when: str | None) -> str:
    """What the relative time expressions in `text` mean when said on `when`, e.g. '"last Sunday" = Sunday,
    18 April 2021'; empty when there are none. A small model copies these far more reliably than it does
    calendar arithmetic, so extraction prompts show them next to the session date."""
    day = parse_date(when)
    if day is None:
        return ""
    hints: dict[str, str] = {}
    for match in _RELATIVE.finditer(text):
        phrase = match.group(0).lower()
        resolved = _resolve_one(phrase, day)
        if resolved and phrase not in hints:
            hints[phrase] = resolved
    return "; ".join(f'"{phrase}" = {value}' for phrase, value in hints.items())


def dated(when: str | None, text: str) -> str:
    """A session date as shown to extraction ops, with the relative-date hints for `text` appended."""
    hints = relative_date_hints(text, when)
    return f"{display_date(when)} (in these messages: {hints})" if hints else display_date(when)


# showing turns and units --------------------------------------------------------------------------------
def turn_line(turn: Turn, max_tokens: int | None = None) -> str:
    """"Speaker: text" with an image turn's caption; optionally clipped (very long assistant turns)."""
    text = turn.display_text()
    if max_tokens is not None:
        text = clip_text(text, max_tokens)
    return f"{turn.speaker}: {text}"


def format_turns(turns: Iterable[Turn], max_turn_tokens: int | None = None) -> str:
    """Turns as a transcript, with a "[date]" header line wherever the session date changes."""
    lines: list[str] = []
    current: str | None = None
    for turn in turns:
        if turn.timestamp != current:
            current = turn.timestamp
            lines.append(f"[{display_date(current)}]")
        lines.append(turn_line(turn, max_turn_tokens))
    return "\n".join(lines)


def format_units(units: Iterable[MemoryUnit]) -> str:
    """Memory units as context lines, grouped under a "[date]" header wherever the timestamp changes.
    A unit whose text already opens with its own date header is shown as is."""
    lines: list[str] = []
    current: str | None = None
    for unit in units:
        text = unit.text.strip()
        if text.startswith("["):
            current = None
            lines.append(text)
            continue
        if unit.timestamp != current and unit.timestamp:
            current = unit.timestamp
            lines.append(f"[{display_date(current)}]")
        lines.append(f"- {text}" if unit.kind != "turn" else text)
    return "\n".join(lines)


def fit_units(units: Sequence[MemoryUnit], budget_tokens: int) -> list[MemoryUnit]:
    """The longest prefix of `units` (best first) whose formatted text fits `budget_tokens` (at least one)."""
    kept: list[MemoryUnit] = []
    used = 0
    for unit in units:
        cost = estimate_tokens(unit.text) + 8  # a line's marker and, at worst, its date header
        if kept and used + cost > budget_tokens:
            break
        kept.append(unit)
        used += cost
    return kept


def chronological(units: Iterable[MemoryUnit]) -> list[MemoryUnit]:
    """Units ordered by session date (undated last), then by creation order, so date headers group."""

    def key(unit: MemoryUnit) -> tuple[date, int]:
        number = unit.unit_id.rsplit("-", 1)[-1]
        return (parse_date(unit.timestamp) or date.max, int(number) if number.isdigit() else 0)

    return sorted(units, key=key)


def question_text(question: Question) -> str:
    """The question as the LM sees it: its text, plus the date it is asked on when the dataset gives one.
    Never the gold answer or evidence."""
    if question.question_date:
        return f"{question.question} (asked on {display_date(question.question_date)})"
    return question.question


class BoundedLMOperation(LMOperation):
    """An LM operation with a cap on its reply length (`reply_tokens`), so a small model that starts repeating
    itself stops early instead of filling the whole generation budget. The cap is call configuration, not
    part of the prompt, so optimizers never see or change it."""

    reply_tokens: ClassVar[int | None] = None

    def __init__(self) -> None:
        super().__init__()
        if self.reply_tokens is not None:
            self.predict.config["max_tokens"] = self.reply_tokens


# answering ----------------------------------------------------------------------------------------------
class AnswerQuestion(dspy.Signature):
    """You answer a question about a conversation between people, using only the conversation memory given as
    context. The context lists what was said or remembered, under the date of each session.
    If the context does not state the answer for the person the question names (the thing is never mentioned,
    or it is said about somebody else), reply: None
    Otherwise reply with the answer in a few words, never a full sentence. A "when" question is answered with
    a date such as "11 April 2021" or "June 2021", worked out from the date of the session where it was said:
    "yesterday" or "last Sunday" count back from that date."""

    context: str = dspy.InputField(desc="the conversation memory, dated by session")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc='a few words, e.g. "Marzipan", "11 April 2021", "Tallinn, Ljubljana"; or None')


class AnswerOp(BoundedLMOperation):
    """`<system>.answer`: the answer to `question` from the `context` units (subclasses set `op_name`)."""

    signature = AnswerQuestion
    role = OpRole.ANSWERS
    reply_tokens = 64

    def run(self, question: Question, context: Sequence[MemoryUnit]) -> dspy.Prediction:
        try:
            reply = self.ask(context=format_units(context) or "(empty)", question=question_text(question))
        except OperationFailed as error:
            log.warning("%s failed for %s: %s", self.op_name, question.question_id, error)
            return dspy.Prediction(answer="", error=str(error))
        answer = clean_answer(reply.answer)
        return dspy.Prediction(answer=ABSTAIN_ANSWER if is_non_answer(answer) else answer, error=None)


_MARKER = re.compile(r"\[\[\s*##")


def strip_markers(text: str) -> str:
    """A reply field cut at the first adapter marker ("[[ ## field ## ]]") the model wrote into it."""
    return _MARKER.split(text, maxsplit=1)[0].strip()


def echoes(reply: str, *inputs: str) -> bool:
    """Whether a reply only repeats one of the prompt's input values (a small model's failure mode)."""
    norm = " ".join(reply.split()).lower()
    return bool(norm) and any(norm in " ".join(value.split()).lower() for value in inputs if value)


def is_non_answer(answer: str) -> bool:
    """An empty reply or one that declines ("None", "Unknown", "The conversation does not say"; the rule scoring
    reads, `metrics.is_decline`): the model gave no answer."""
    return not answer.strip() or is_decline(answer)


def clean_answer(value: Any) -> str:
    """The answer as one line, without a leading "Answer:" or a trailing adapter marker the model repeated."""
    text = " ".join(strip_markers(str(value or "")).split())
    return re.sub(r"^(final\s+)?answer\s*:\s*", "", text, flags=re.IGNORECASE).strip()
