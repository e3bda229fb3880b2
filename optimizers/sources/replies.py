"""What the reflective source does to a reply before it is a candidate, and the text tests it is judged by:
clipping, the model's echoes of the current instruction, lines in the tracing's own words, sentences that
comment on the rewrite instead of instructing the task model, repeated lines, and rules appended to an
instruction. Plain functions of strings (and of the evidence's cases, for the names they mention)."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtrace_opt.optimizers.sources.reflective import ProposalEvidence

__all__ = ["adds_nothing", "case_names", "case_specific", "clip", "clip_middle", "near_echo", "norm", "same_text",
           "unrepeated", "with_rules", "without_commentary", "without_trace_lines"]


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def same_text(a: str, b: str) -> bool:
    """Equal up to whitespace and case (a small model often echoes the instruction re-wrapped)."""
    return norm(a) == norm(b)



def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_NOT_NAMES = frozenset(
    "what when where who whom whose why how which did does do is was were are has have had can could would will "
    "the a an in on at of for to and or but if i".split()
)


def case_names(evidence: ProposalEvidence) -> set[str]:
    """Capitalized words of the cases' questions and answers (the people, places and things of the training
    conversations) that the current instruction does not use."""
    known = {w.lower() for w in re.findall(r"[A-Za-z][\w'-]*", evidence.instruction)}
    names: set[str] = set()
    for case in (*evidence.failures, *evidence.successes):
        for text in (case.question, case.gold):
            for word in re.findall(r"\b[A-Z][a-z][\w'-]*", text):
                if word.lower() not in known and word.lower() not in _NOT_NAMES:
                    names.add(word)
    return names


def case_specific(text: str, names: set[str]) -> bool:
    """True when `text` names a person, place or thing of the cases: a rule about the training conversations'
    people does not carry over to other conversations (a small model often writes one)."""
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)


def clip_middle(text: str, limit: int) -> str:
    """`text` in at most about `limit` characters: its first quarter and the rest from its end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    start = limit // 4
    return f"{text[:start].rstrip()}\n[...]\n{text[len(text) - (limit - start - 7):].lstrip()}"


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


# the reflection prompt's own words: a sentence about "this step", "the current instruction", "the rule broken"
# or "the failed cases" comments on the optimization (a small model restates its task) and tells the task model
# nothing about its job
_COMMENTARY = re.compile(
    r"\b(?:this|the|each) step\b|\bstep's\b|\b(?:the|this|current|new|given|original) instruction\b|"
    r"\brules? (?:broken|that was broken)\b|\bthe rule (?:is|was) broken\b|\b(?:failed|correct) cases?\b|"
    r"\bthe failures?\b|\bfailure attribution\b|\broot cause\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


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
