"""What the proposers see of a predictor's calls, as plain values: a call's evidence (`OpEvidence`), the whole
evidence of a round (`ProposalEvidence`), the mistakes a diagnosis names (`Pattern`, `Finding`), and how a recorded
chat-adapter message reads back into its fields (`prompt_fields`, `without_adapter_tail`).

Nothing here imports the optimizer's other packages: evaluation, the sources, the gates and the loop build on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

__all__ = ["DiagnosedCase", "Finding", "OpEvidence", "Pattern", "ProposalEvidence", "Test", "clip", "clip_middle",
           "prompt_fields", "without_adapter_tail"]

_ADAPTER_TAIL = "\n\nRespond with "
_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]")


def without_adapter_tail(prompt: str) -> str:
    """A recorded user message without the adapter's reply-format reminder ("Respond with ...") at its end."""
    head, tail, _ = prompt.rpartition(_ADAPTER_TAIL)
    return head if tail else prompt


def prompt_fields(text: str) -> dict[str, str]:
    """Field name -> value of the `[[ ## name ## ]]` sections of a chat-adapter message (a recorded prompt, its
    reply-format reminder left out, or a reply), values stripped."""
    text = without_adapter_tail(text)
    marks = list(_FIELD.finditer(text))
    return {mark.group(1): text[mark.end():(marks[i + 1].start() if i + 1 < len(marks) else len(text))].strip()
            for i, mark in enumerate(marks)}


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def clip_middle(text: str, limit: int) -> str:
    """`text` in at most about `limit` characters: its first quarter and the rest from its end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    start = limit // 4
    return f"{text[:start].rstrip()}\n[...]\n{text[len(text) - (limit - start - 7):].lstrip()}"


Test = Callable[[str, str, str], bool]


@dataclass(frozen=True)
class Pattern:
    name: str
    mistake: str  # what the failures show, as the reflection LM is told it
    rule: str  # a general rule that fixes it
    test: Test  # (gold, answer, what the step was shown) -> the case shows it


class DiagnosedCase(NamedTuple):
    case_id: str
    gold: str
    answer: str
    shown: str  # what the step was shown
    produced: str  # what it produced


@dataclass(frozen=True)
class Finding:
    """A pattern and the blamed cases that show it (`shown_by`: those cases whole, where the diagnosis had them)."""

    pattern: Pattern
    cases: tuple[str, ...]
    shown_by: tuple[DiagnosedCase, ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, object]:
        return {"pattern": self.pattern.name, "cases": list(self.cases)}


@dataclass(frozen=True)
class OpEvidence:
    """One call of the predictor's op in one case: what it was shown and what it produced."""

    case_id: str
    question: str
    gold: str
    prediction: str
    shown: str
    produced: str
    reason: str = ""
    target: str = ""  # what the step should have produced: a repair confirmed by replay (`evaluation/repairs.py`)

    def render(self, blamed: bool, limit: int = 1500) -> str:
        """The case in about `limit` characters. Each part is clipped on its own, so what the step produced and
        why it was blamed always show; the input keeps its start and, mostly, its end (steps read long context
        first and the new material last). A blamed case with a repair target shows it beside what was produced:
        a rule is then asked for a concrete difference."""
        head = "\n".join([f"Question: {clip(self.question, 300)}", f"Gold answer: {clip(self.gold, 200)}",
                          f"System's answer: {clip(self.prediction, 300)}"])
        reason = f"\nWhy this step was blamed: {clip(self.reason, 400)}" if blamed and self.reason else ""
        produced = clip(self.produced, max(200, limit // 3))
        target = (f"\nWhat it should have produced (with this output the system answers correctly):\n"
                  f"{clip(self.target, max(200, limit // 3))}") if blamed and self.target else ""
        room = max(200, limit - len(head) - len(reason) - len(produced) - len(target))
        return (f"{head}\nThis step was given:\n{clip_middle(self.shown, room)}\n"
                f"This step produced:\n{produced}{target}{reason}")


@dataclass(frozen=True)
class ProposalEvidence:
    """Everything the proposer sees about the chosen predictor."""

    predictor: str
    op_name: str
    instruction: str
    failures: Sequence[OpEvidence] = field(default_factory=tuple)
    successes: Sequence[OpEvidence] = field(default_factory=tuple)
    findings: Sequence[Finding] = field(default_factory=tuple)  # what the blamed calls have in common

    def with_targets(self, targets: Mapping[str, str]) -> ProposalEvidence:
        """This evidence with each blamed case's repair target (case id -> what the step should have produced)."""
        failures = tuple(replace(e, target=targets.get(e.case_id, e.target)) for e in self.failures)
        return replace(self, failures=failures)

    def with_findings(self, findings: Sequence[Finding]) -> ProposalEvidence:
        return replace(self, findings=tuple(findings))

    def mistake(self) -> str:
        """The mistakes the diagnosis found, most cases first, as the reflection LM is told them."""
        total = len(self.failures)
        lines = [f"- {finding.pattern.mistake} ({len(finding.cases)} of the blamed cases)"
                 for finding in self.findings]
        return "\n".join(lines) if lines else f"(nothing common found in the {total} failed cases: read them)"
