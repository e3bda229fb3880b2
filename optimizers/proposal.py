"""The proposer: the reflection LM writes new instructions for ONE predictor from the evidence of its blamed
failures (what the op was shown, what it produced, why attribution blamed it) and of cases it handled
correctly (so a rewrite keeps them working).

Contract of an `InstructionProposer`:
- `propose(evidence, k)` returns at most `k` distinct instruction texts, none equal to the current one; it may
  return fewer (or none) when the LM's replies are unusable, and never raises for a bad reply.
- It calls only the reflection LM (the caller scopes it) and sees only `evidence`: nothing about other
  predictors, so it cannot rewrite them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

__all__ = ["OpEvidence", "ProposalEvidence", "InstructionProposer", "ReflectiveProposer", "ProposeInstruction"]

log = logging.getLogger(__name__)

APPROACHES = (
    "Keep the current instruction and add one or two precise rules that would have prevented these failures.",
    "Rewrite the instruction from scratch so that it handles the failures and keeps the correct cases working.",
    "Keep the current instruction, and make it explicit about the mistake the failures show, with a short "
    "example of the right behaviour (invent the names in it).",
    "Write a shorter, stricter instruction that states the step's job and the rule the failures broke.",
)


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

    def render(self, blamed: bool) -> str:
        lines = [f"Question: {self.question}", f"Gold answer: {self.gold}", f"System's answer: {self.prediction}"]
        lines.append(f"This step was given:\n{self.shown}")
        lines.append(f"This step produced:\n{self.produced}")
        if blamed and self.reason:
            lines.append(f"Why this step was blamed: {self.reason}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProposalEvidence:
    """Everything the proposer sees about the chosen predictor."""

    predictor: str
    op_name: str
    instruction: str
    failures: Sequence[OpEvidence] = field(default_factory=tuple)
    successes: Sequence[OpEvidence] = field(default_factory=tuple)


class InstructionProposer(Protocol):
    def propose(self, evidence: ProposalEvidence, k: int) -> list[str]: ...


class ProposeInstruction(dspy.Signature):
    """You improve the instruction of one step of an LLM memory pipeline (a system that memorizes long
    conversations and answers questions about them). Failure attribution found this step to be the root
    cause of the failed cases below: fix what this step does wrong in them. Keep what makes it work on the
    correct cases. The step's input and output fields and their format stay as they are: only the
    instruction text changes, so do not describe new fields. The new instruction must differ from the
    current one where the failures show it falls short. Write the complete new instruction, nothing else:
    no preamble, no commentary."""

    step: str = dspy.InputField(desc="the pipeline step whose instruction you rewrite")
    current_instruction: str = dspy.InputField()
    failed_cases: str = dspy.InputField(desc="cases this step got wrong: its input, its output, why it was blamed")
    correct_cases: str = dspy.InputField(desc="cases this step handled correctly; keep them working")
    approach: str = dspy.InputField(desc="how to go about this rewrite")
    new_instruction: str = dspy.OutputField(desc="the complete new instruction text")


def _same(a: str, b: str) -> bool:
    """Equal up to whitespace and case (a small model often echoes the instruction re-wrapped)."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _clean(text: Any, limit: int) -> str:
    value = str(text or "").strip().strip("`").strip()
    for prefix in ("new instruction:", "instruction:"):
        if value.lower().startswith(prefix):
            value = value[len(prefix):].strip()
    return value[:limit].strip()


@dataclass
class ReflectiveProposer:
    """Calls of the reflection LM over `ProposeInstruction`, one per approach, each a distinct rollout, until K
    usable instructions are found or `attempts_per_candidate * K` calls are spent (a small model often echoes
    the current instruction: the slot goes to the next approach instead of being lost).

    `max_cases` blamed and correct cases are shown (each clipped to `case_chars`); replies shorter than
    `min_chars` or longer than `max_chars` are clipped or dropped."""

    lm: Any = None
    max_cases: int = 3
    case_chars: int = 1500
    min_chars: int = 20
    max_chars: int = 4000
    temperature: float = 0.7
    attempts_per_candidate: int = 2
    predict: dspy.Predict = field(default_factory=lambda: dspy.Predict(ProposeInstruction))

    def propose(self, evidence: ProposalEvidence, k: int) -> list[str]:
        failed = "\n\n".join(
            f"Case {i}:\n{_clip(e.render(True), self.case_chars)}"
            for i, e in enumerate(evidence.failures[: self.max_cases], 1)
        ) or "(none)"
        correct = "\n\n".join(
            f"Case {i}:\n{_clip(e.render(False), self.case_chars)}"
            for i, e in enumerate(evidence.successes[: self.max_cases], 1)
        ) or "(none)"
        found: list[str] = []
        for attempt in range(self.attempts_per_candidate * k):
            if len(found) >= k:
                break
            approach = APPROACHES[attempt % len(APPROACHES)]
            try:
                with dspy.context(lm=self.lm) if self.lm is not None else contextlib.nullcontext():
                    reply = self.predict(
                        step=f"{evidence.op_name} (predictor {evidence.predictor})",
                        current_instruction=evidence.instruction,
                        failed_cases=failed,
                        correct_cases=correct,
                        approach=approach,
                        config=({"rollout_id": attempt, "temperature": self.temperature} if attempt else {}),
                    )
            except Exception as error:  # noqa: BLE001 - a bad reply costs one candidate, not the round
                log.warning("proposal %d for %s failed: %s", attempt, evidence.predictor, error)
                continue
            text = _clean(getattr(reply, "new_instruction", ""), self.max_chars)
            if len(text) < self.min_chars or _same(text, evidence.instruction) or any(_same(text, f) for f in found):
                log.info("proposal %d for %s dropped (empty, unchanged or a duplicate)", attempt, evidence.predictor)
                continue
            found.append(text)
        return found

