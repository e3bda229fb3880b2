"""The reflective source: the reflection LM writes new instructions for ONE predictor from the evidence of its blamed
failures (what the op was shown, what it produced, why attribution blamed it) and of cases it handled
correctly (so a rewrite keeps them working).

Contract of an `InstructionProposer`:
- `propose(evidence, k)` returns at most `k` distinct instruction texts, none equal to the current one; it may
  return fewer (or none) when the LM's replies are unusable, and never raises for a bad reply.
- It calls only the reflection LM (the caller scopes it) and sees only `evidence`: nothing about other
  predictors, so it cannot rewrite them.

`ReflectiveSource` is the round's `CandidateSource` over a proposer: its texts as `Candidate`s.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.evidence import Pattern, ProposalEvidence
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, refine
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.replies import (
    adds_nothing,
    case_names,
    case_specific,
    near_echo,
    norm,
    same_text,
    unrepeated,
    with_rules,
    without_commentary,
    without_headings,
    without_trace_lines,
)

__all__ = ["InstructionProposer", "ReflectiveProposer", "ReflectiveSource", "ProposeInstruction", "ProposeRule",
           "in_patterns", "origin_patterns", "pattern_candidates", "proposal_origin"]

log = logging.getLogger(__name__)

ADD_RULES = "Keep the current instruction and add one or two precise rules that would have prevented these failures."
APPROACHES = (
    ADD_RULES,  # asked as `ProposeRule`: the model writes only the rules, the code appends them
    "Rewrite the instruction from scratch so that it handles the failures and keeps the correct cases working.",
    "Keep the current instruction, and make it explicit about the mistake the failures show, with a short "
    "example of the right behaviour (invent the names in it).",
    "Write a shorter, stricter instruction that states the step's job and the rule the failures broke.",
)


def in_patterns(evidence: ProposalEvidence, patterns: Sequence[Pattern] | None) -> ProposalEvidence:
    """`evidence` with its findings in `patterns` (`diagnosis.refine`: the patterns learned from the training golds;
    `()`: no diagnosis at all); None leaves it as it is."""
    return evidence if patterns is None else evidence.with_findings(refine(evidence.findings, patterns))


class InstructionProposer(Protocol):
    def propose(self, evidence: ProposalEvidence, k: int) -> list[str]: ...


class ProposeInstruction(dspy.Signature):
    """You improve the instruction of one step of an LLM memory pipeline (a system that memorizes long
    conversations and answers questions about them). Failure attribution found this step to be the root
    cause of the failed cases below: fix what this step does wrong in them (the mistake field says what
    their answers have in common, where it is known). Keep what makes it work on the
    correct cases. The step's input and output fields and their format stay as they are: only the
    instruction text changes, so do not describe new fields. The new instruction must differ from the
    current one where the failures show it falls short. Write the complete new instruction, nothing else:
    no preamble, no commentary."""

    step: str = dspy.InputField(desc="the pipeline step whose instruction you rewrite")
    current_instruction: str = dspy.InputField()
    failed_cases: str = dspy.InputField(desc="cases this step got wrong: its input, its output, why it was blamed")
    correct_cases: str = dspy.InputField(desc="cases this step handled correctly; keep them working")
    mistake: str = dspy.InputField(desc="the mistake the failed answers show, found by comparing each with its gold")
    approach: str = dspy.InputField(desc="how to go about this rewrite")
    new_instruction: str = dspy.OutputField(desc="the complete new instruction text")


class ProposeRule(dspy.Signature):
    """You improve the instruction of one step of an LLM memory pipeline (a system that memorizes long
    conversations and answers questions about them). Failure attribution found this step to be the root
    cause of the failed cases below. Write one or two short rules, as imperative sentences, that added to the
    current instruction would have prevented these failures without breaking the correct cases. Name the
    mistake the failures show (the mistake field says what their answers have in common, where it is known);
    do not repeat the current instruction and do not describe new fields. Write only the new rules, nothing
    else."""

    step: str = dspy.InputField(desc="the pipeline step whose instruction you extend")
    current_instruction: str = dspy.InputField()
    failed_cases: str = dspy.InputField(desc="cases this step got wrong: its input, its output, why it was blamed")
    correct_cases: str = dspy.InputField(desc="cases this step handled correctly; keep them working")
    mistake: str = dspy.InputField(desc="the mistake the failed answers show, found by comparing each with its gold")
    rules: str = dspy.OutputField(desc="one or two short rules to add to the instruction")


_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```$", re.DOTALL)
_LABEL = re.compile(r"^(?:new[ _]instruction|instruction|rules?)\s*:\s*", re.IGNORECASE)


def _clean(text: Any, limit: int) -> str:
    """A reply without what wraps it (a code fence, a label naming the output field) and without a copy of an
    approach it was given; the rest as written."""
    value = str(text or "").strip()
    fenced = _FENCE.match(value)
    if fenced:
        value = fenced.group(1).strip()
    elif len(value) > 1 and value[0] == value[-1] == "`" and value.count("`") == 2:  # `the whole reply`
        value = value[1:-1].strip()
    value = _LABEL.sub("", value, count=1)
    for approach in APPROACHES:  # a small model sometimes copies the approach it was given into its reply
        value = value.replace(approach, "")
    return value[:limit].strip()


@dataclass
class ReflectiveProposer:
    """Calls of the reflection LM, one per approach, each a distinct rollout, until K usable instructions are
    found or `attempts_per_candidate * K` calls are spent (a small model often echoes the current instruction:
    the slot goes to the next approach instead of being lost; so does a reply with no word the current instruction
    lacks, which is the current one cut short). The first approach, adding rules, asks only for the rules
    (`ProposeRule`) and appends them: asked for a whole instruction, a small model mostly returns the current one
    re-worded; the others ask for the complete instruction (`ProposeInstruction`). A reply equal to
    the current instruction but for a word or two counts as an echo.

    `max_cases` blamed and correct cases are shown (each clipped to `case_chars`); replies shorter than
    `min_chars` or longer than `max_chars` are clipped or dropped, lines a reply repeats are dropped. Replies are
    bounded in tokens: `rule_tokens` for rules, and for a whole instruction about one and a half times the current
    one's length (`rewrite_tokens` at least, `max_rewrite_tokens` at most): an unbounded reply of a small model
    is mostly a loop on one line, and decoding it costs more time than the rest of the round. With
    `drop_case_specific`, a reply that names the cases' people (`replies.case_names`: the speakers shown and the
    names in their questions and gold answers that the current instruction does not use) is dropped: a rule about
    the training conversations' people does not carry over to others; a month, a weekday or a common word is no
    one's name. Lines that echo the reflection prompt's headings ("Gold answer:", "Case 2:", a field marker) or use
    the tracing's own words (turn or op ids, "evidence: gold", predictor names, "the answer op"), copied from the
    blame reasons, are dropped, and so are sentences that use the prompt's names for what it shows ("this step",
    "the current instruction", "the rule broken", "the failed cases", "the gold answer"): commentary on the
    rewrite, not instructions for the task model. Nothing else is cut: a well-formed reply passes as written.

    The model is told the mistake the diagnosis found in the blamed answers (`ProposalEvidence.mistake`), and
    with `pattern_rules` the slots its replies leave empty go to the found patterns' own rules, each appended to
    the current instruction (`pattern_candidates`): a general rule the valset can accept where a small model's
    replies are all echoes, vague or about the cases' people."""

    lm: Any = None
    max_cases: int = 3
    case_chars: int = 1500
    min_chars: int = 20
    max_chars: int = 4000
    temperature: float = 0.7
    attempts_per_candidate: int = 2
    min_rule_chars: int = 12
    rule_tokens: int = 160
    rewrite_tokens: int = 256
    max_rewrite_tokens: int = 1024
    drop_case_specific: bool = True
    pattern_rules: bool = True
    predict: dspy.Predict = field(default_factory=lambda: dspy.Predict(ProposeInstruction))
    add_rules: dspy.Predict = field(default_factory=lambda: dspy.Predict(ProposeRule))

    def propose(self, evidence: ProposalEvidence, k: int) -> list[str]:
        failed = "\n\n".join(
            f"Case {i}:\n{e.render(True, self.case_chars)}"
            for i, e in enumerate(evidence.failures[: self.max_cases], 1)
        ) or "(none)"
        correct = "\n\n".join(
            f"Case {i}:\n{e.render(False, self.case_chars)}"
            for i, e in enumerate(evidence.successes[: self.max_cases], 1)
        ) or "(none)"
        found: list[str] = []
        rewrite_tokens = min(self.max_rewrite_tokens, max(self.rewrite_tokens, 64 + len(evidence.instruction) // 3))
        names = case_names(evidence)
        mistake = evidence.mistake()
        for attempt in range(self.attempts_per_candidate * k):
            if len(found) >= k:
                break
            approach = APPROACHES[attempt % len(APPROACHES)]
            config: dict[str, Any] = {"rollout_id": attempt, "temperature": self.temperature} if attempt else {}
            config["max_tokens"] = self.rule_tokens if approach == ADD_RULES else rewrite_tokens
            step = f"{evidence.op_name} (predictor {evidence.predictor})"
            try:
                with dspy.context(lm=self.lm) if self.lm is not None else contextlib.nullcontext():
                    if approach == ADD_RULES:
                        reply = self.add_rules(step=step, current_instruction=evidence.instruction,
                                               failed_cases=failed, correct_cases=correct, mistake=mistake,
                                               config=config)
                        rules = without_commentary(without_trace_lines(without_headings(
                            _clean(getattr(reply, "rules", ""), self.max_chars)), evidence.instruction),
                            evidence.instruction)
                        text = with_rules(evidence.instruction, rules) if len(rules) >= self.min_rule_chars else ""
                    else:
                        reply = self.predict(step=step, current_instruction=evidence.instruction, failed_cases=failed,
                                             correct_cases=correct, mistake=mistake, approach=approach,
                                             config=config)
                        text = without_commentary(without_trace_lines(without_headings(
                            unrepeated(_clean(getattr(reply, "new_instruction", ""), self.max_chars))),
                            evidence.instruction), evidence.instruction)
            except Exception as error:  # noqa: BLE001 - a bad reply costs one candidate, not the round
                log.warning("proposal %d for %s failed: %s", attempt, evidence.predictor, error)
                continue
            if (len(text) < self.min_chars or near_echo(text, evidence.instruction)
                    or adds_nothing(text, evidence.instruction) or any(same_text(text, f) for f in found)):
                log.info("proposal %d for %s dropped (empty, unchanged, cut from the current one or a duplicate)",
                         attempt, evidence.predictor)
                continue
            if self.drop_case_specific and case_specific(text, names):  # names are words the instruction lacks
                log.info("proposal %d for %s dropped (it names the cases' people or things)", attempt,
                         evidence.predictor)
                continue
            found.append(text)
        if self.pattern_rules:
            for text in pattern_candidates(evidence):
                if len(found) >= k:
                    break
                if not any(same_text(text, f) for f in found):
                    found.append(text)
        return found


def pattern_candidates(evidence: ProposalEvidence) -> list[str]:
    """The current instruction with each found pattern's rule appended (most cases first), for the patterns
    whose rule the instruction does not have yet."""
    out = []
    for finding in evidence.findings:
        if norm(finding.pattern.rule) not in norm(evidence.instruction):
            out.append(with_rules(evidence.instruction, finding.pattern.rule))
    return out


def proposal_origin(text: str, evidence_instruction: str, patterns: Sequence[Pattern] = PATTERNS) -> str:
    """Where a proposal came from: `pattern:NAME` for one of `patterns`' rules appended to `evidence_instruction`,
    else `reflection` (the reflection LM wrote it)."""
    for pattern in patterns:
        if same_text(text, with_rules(evidence_instruction, pattern.rule)):
            return f"pattern:{pattern.name}"
    return "reflection"


def origin_patterns(evidence: ProposalEvidence) -> tuple[Pattern, ...]:
    """The patterns whose rules a proposal from `evidence` may hold: its findings' and `PATTERNS`."""
    return (*(finding.pattern for finding in evidence.findings), *PATTERNS)


@dataclass(frozen=True)
class ReflectiveSource:
    """The proposer's instructions for the chosen predictor, at most `request.slots` of them, each with its origin
    (`proposal_origin`: a proposer may append a pattern's rule itself, as `ReflectiveProposer` does with
    `pattern_rules`). With `patterns` (those learned from the training golds, `diagnosis.learned_patterns`), the
    proposer sees the evidence's findings in them (`in_patterns`); `()` shows it none."""

    proposer: InstructionProposer
    patterns: Sequence[Pattern] | None = None
    spends: str = "reflection"  # the reflection LM: the round prices it before asking (`loop/engine.py`)

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        evidence = in_patterns(request.evidence, self.patterns)
        texts = self.proposer.propose(evidence, request.slots)
        known = origin_patterns(evidence)
        return [Candidate.of(request.predictor, text, origin=proposal_origin(text, request.instruction, known))
                for text in texts]
