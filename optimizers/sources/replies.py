"""What the reflective source does to a reply before it is a candidate, and the text tests it is judged by:
clipping, the model's echoes of the current instruction, lines that echo the reflection prompt's headings or use
the tracing's ids, sentences that comment on the rewrite instead of instructing the task model, repeated lines,
rules appended to an instruction, and the cases' people. Plain functions of strings (and of the evidence's
cases, for the people they name).

Each filter drops only what no instruction for the task model holds, so a stronger reflection model's
well-formed reply passes unchanged: a month or weekday name, a capitalised common word, a sentence of advice
that happens to say "root cause", "each step" or "the instruction", a worked example with "Question:" lines.
What goes: the prompt's own headings and field names ("Gold answer:", "[[ ## rules ## ]]", "the current
instruction", "the failed cases"), trace ids ("op:41", "D1:3"), and the people of the cases shown."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from memtrace_opt.metrics import FUNCTION_WORDS
from memtrace_opt.text.words import CALENDAR_WORDS

if TYPE_CHECKING:
    from memtrace_opt.optimizers.core.evidence import ProposalEvidence

__all__ = ["adds_nothing", "case_names", "case_specific", "near_echo", "norm", "same_text",
           "unrepeated", "with_rules", "without_commentary", "without_headings", "without_trace_lines"]


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def same_text(a: str, b: str) -> bool:
    """Equal up to whitespace and case (a small model often echoes the instruction re-wrapped)."""
    return norm(a) == norm(b)


# a month or weekday (`text.words.CALENDAR_WORDS`) is capitalised in English, and no one's name
_CAPITALISED = re.compile(r"\b[A-Z][a-z][\w-]*")
_SENTENCE_START = re.compile(r"(?:^\s*|[.!?:;\"(\[]\s*|\n\s*)$")
# a speaker's turn as the step was shown it: "Name: text" (after an optional "[...]" header) at a line's start
_SPEAKER = re.compile(r"^[ \t\-*]*(?:\[[^\]\n]*\]\s*)?([A-Z][a-z][\w-]*)(?: [A-Z][a-z][\w-]*)?:[ \t]+\S", re.MULTILINE)


def _proper(word: str, lower: set[str]) -> bool:
    """A capitalised word that is a name: no function or calendar word, never written in lower case around it."""
    low = word.lower()
    return low not in FUNCTION_WORDS and low not in CALENDAR_WORDS and low not in lower


def case_names(evidence: ProposalEvidence) -> set[str]:
    """The people of the cases shown: the speakers of what the step was shown ("Name: ..." at a line's start)
    and the capitalised words of the questions and gold answers, where they name someone: a word that is no
    function word (`metrics.FUNCTION_WORDS`), no month or weekday, not the first word of a question's sentence,
    and never written in lower case in the current instruction or the cases (a common word is: "Pottery" /
    "pottery"). A name the current instruction uses is no case's."""
    cases = (*evidence.failures, *evidence.successes)
    texts = [evidence.instruction, *(t for c in cases for t in (c.question, c.gold, c.prediction, c.shown, c.produced))]
    lower = {w.lower() for text in texts for w in re.findall(r"(?<![\w'-])[a-z][\w-]*", text)}
    names: set[str] = set()
    for case in cases:
        names.update(m.group(1) for m in _SPEAKER.finditer(case.shown))
        names.update(m.group(0) for m in _CAPITALISED.finditer(case.question)
                     if not _SENTENCE_START.search(case.question[:m.start()]))
        names.update(_CAPITALISED.findall(case.gold))
    used = set(re.findall(r"[A-Za-z][\w-]*", evidence.instruction))
    return {name for name in names if name not in used and _proper(name, lower)}


def case_specific(text: str, names: set[str]) -> bool:
    """True when `text` names one of the cases' people (`case_names`): a rule about the training conversations'
    people does not carry over to other conversations (a small model often writes one)."""
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)


def near_echo(a: str, b: str, words: int = 2) -> bool:
    """Equal but for at most `words` words changed, added or removed (a small model's echo, re-wrapped or with
    a word changed)."""
    matcher = difflib.SequenceMatcher(None, a.lower().split(), b.lower().split(), autojunk=False)
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")
    return changed <= words


def adds_nothing(text: str, current: str) -> bool:
    """True when every word of `text` is already in `current`: the current instruction cut short or with parts
    left out (a small model asked for a rewrite often hands back its first lines), which fixes nothing the
    failures show."""
    words = set(re.findall(r"[a-z0-9]+", current.lower()))
    return all(word in words for word in re.findall(r"[a-z0-9]+", text.lower()))


_BULLETS = "-*• "

# the tracing's own words: turn and op ids, the evidence source, predictor names, "the answer op"; a reflection
# model copies them from the blame reasons, and they mean nothing to the task model reading the instruction
_TRACE_WORDS = re.compile(r"\bturn:\S+|\bD\d+:\d+\b|\bop:\d+|\bevidence: (?:gold|pseudo)\b|\b\w+\.predict\b|\bops?\b",
                          re.IGNORECASE)


def without_trace_lines(text: str, instruction: str) -> str:
    """`text` without the lines that use the tracing's words (ids, "op") the current instruction does not."""
    known = {m.group(0).lower() for m in _TRACE_WORDS.finditer(instruction)}
    return "\n".join(line for line in text.splitlines()
                     if all(m.group(0).lower() in known for m in _TRACE_WORDS.finditer(line))).strip()


# the reflection prompt's names for what it shows: "this step" (the step whose instruction is rewritten), "the
# current instruction", "the failed cases", "the gold answer", "the rule broken", "failure attribution". A sentence
# that uses them comments on the optimization (a small model restates its task) and tells the task model nothing
# about its job, which never shows it a gold answer or a failed case. Words of plain advice ("root cause", "each
# step", "the instruction") are no such name.
_COMMENTARY = re.compile(
    r"\bthis step\b|\b(?:current|new|original)[ _]instruction\b|\brules? (?:broken|that was broken)\b|"
    r"\bthe rule (?:is|was) broken\b|\b(?:failed|correct|blamed)[ _]cases?\b|\bfailure attribution\b|"
    r"\bgold answers?\b|\bsystem's answer\b|\bmistake field\b",
    re.IGNORECASE,
)
# a line that echoes the reflection prompt's layout: a field marker, a field's name as a label, a shown case's
# heading ("Case 2:", "Gold answer:", "This step produced:", "Why this step was blamed:")
_HEADING = re.compile(
    r"^[\s\-*#>]*(?:\[\[ ## \w+ ## \]\]|(?:step|current[ _]instruction|failed[ _]cases|correct[ _]cases|mistake|"
    r"approach|new[ _]instruction|case \d+|gold answer|system's answer|this step (?:was given|produced)|"
    r"why this step was blamed|what it should have produced[^:\n]*)\s*:)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def without_headings(text: str) -> str:
    """`text` without the lines that echo the reflection prompt's headings (`_HEADING`)."""
    return "\n".join(line for line in text.splitlines() if not _HEADING.match(line)).strip()


def without_commentary(text: str, instruction: str) -> str:
    """`text` without the sentences that use the reflection prompt's words (`_COMMENTARY`) where the current
    instruction does not; a line left with no sentence goes, a bullet stays on what is left of its line."""
    known = {m.group(0).lower() for m in _COMMENTARY.finditer(instruction)}
    lines = []
    for line in text.splitlines():
        body = line.lstrip(_BULLETS)
        kept = [s for s in _SENTENCE_END.split(body)
                if all(m.group(0).lower() in known for m in _COMMENTARY.finditer(s))]
        if kept:
            lines.append(line[: len(line) - len(body)] + " ".join(kept))
        elif not body.strip():
            lines.append(line)
    return "\n".join(lines).strip()


def unrepeated(text: str) -> str:
    """`text` without lines that repeat an earlier one (a small model sampling long replies loops on a line)."""
    seen: set[str] = set()
    kept = []
    for line in text.splitlines():
        key = norm(line.lstrip(_BULLETS))
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept).strip()


def with_rules(current: str, rules: str) -> str:
    """The current instruction with the rules appended; a reply that repeats the instruction first keeps
    only what follows it."""
    words, head = rules.split(), current.split()
    if len(words) > len(head) and [w.lower() for w in words[: len(head)]] == [w.lower() for w in head]:
        rules = " ".join(words[len(head):])
    known = norm(current)  # lines the instruction already has, or repeated, add nothing
    new = unrepeated("\n".join(line.strip() for line in rules.splitlines()
                                if norm(line.lstrip(_BULLETS)) not in known))
    return f"{current.rstrip()}\n{new}" if new else current
