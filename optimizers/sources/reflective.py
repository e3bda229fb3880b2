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
import difflib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, Finding
from memtrace_opt.optimizers.sources.base import Candidate, SourceRequest

__all__ = ["OpEvidence", "ProposalEvidence", "InstructionProposer", "ReflectiveProposer", "ReflectiveSource",
           "ProposeInstruction", "ProposeRule", "pattern_candidates", "proposal_origin", "same_text"]

log = logging.getLogger(__name__)

ADD_RULES = "Keep the current instruction and add one or two precise rules that would have prevented these failures."
APPROACHES = (
    ADD_RULES,  # asked as `ProposeRule`: the model writes only the rules, the code appends them
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

    def render(self, blamed: bool, limit: int = 1500) -> str:
        """The case in about `limit` characters. Each part is clipped on its own, so what the step produced and
        why it was blamed always show; the input keeps its start and, mostly, its end (steps read long context
        first and the new material last)."""
        head = "\n".join([f"Question: {_clip(self.question, 300)}", f"Gold answer: {_clip(self.gold, 200)}",
                          f"System's answer: {_clip(self.prediction, 300)}"])
        reason = f"\nWhy this step was blamed: {_clip(self.reason, 400)}" if blamed and self.reason else ""
        produced = _clip(self.produced, max(200, limit // 3))
        room = max(200, limit - len(head) - len(reason) - len(produced))
        return (f"{head}\nThis step was given:\n{_clip_middle(self.shown, room)}\n"
                f"This step produced:\n{produced}{reason}")


@dataclass(frozen=True)
class ProposalEvidence:
    """Everything the proposer sees about the chosen predictor."""

    predictor: str
    op_name: str
    instruction: str
    failures: Sequence[OpEvidence] = field(default_factory=tuple)
    successes: Sequence[OpEvidence] = field(default_factory=tuple)
    findings: Sequence[Finding] = field(default_factory=tuple)  # what the blamed calls have in common

    def mistake(self) -> str:
        """The mistakes the diagnosis found, most cases first, as the reflection LM is told them."""
        total = len(self.failures)
        lines = [f"- {finding.pattern.mistake} ({len(finding.cases)} of the blamed cases)"
                 for finding in self.findings]
        return "\n".join(lines) if lines else f"(nothing common found in the {total} failed cases: read them)"


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


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def same_text(a: str, b: str) -> bool:
    """Equal up to whitespace and case (a small model often echoes the instruction re-wrapped)."""
    return _norm(a) == _norm(b)


_same = same_text


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_NOT_NAMES = frozenset(
    "what when where who whom whose why how which did does do is was were are has have had can could would will "
    "the a an in on at of for to and or but if i".split()
)


def _case_names(evidence: ProposalEvidence) -> set[str]:
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


def _case_specific(text: str, names: set[str]) -> bool:
    """True when `text` names a person, place or thing of the cases: a rule about the training conversations'
    people does not carry over to other conversations (a small model often writes one)."""
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)


def _clip_middle(text: str, limit: int) -> str:
    """`text` in at most about `limit` characters: its first quarter and the rest from its end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    start = limit // 4
    return f"{text[:start].rstrip()}\n[...]\n{text[len(text) - (limit - start - 7):].lstrip()}"


def _near(a: str, b: str, words: int = 2) -> bool:
    """Equal but for at most `words` words changed, added or removed (a small model's echo, re-wrapped or with
    a word changed)."""
    matcher = difflib.SequenceMatcher(None, a.lower().split(), b.lower().split(), autojunk=False)
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")
    return changed <= words


def _adds_nothing(text: str, current: str) -> bool:
    """True when every word of `text` is already in `current`: the current instruction cut short or with parts
    left out (a small model asked for a rewrite often hands back its first lines), which fixes nothing the
    failures show."""
    words = set(re.findall(r"[a-z0-9]+", current.lower()))
    return all(word in words for word in re.findall(r"[a-z0-9]+", text.lower()))


def _clean(text: Any, limit: int) -> str:
    value = str(text or "").strip().strip("`").strip()
    for prefix in ("new instruction:", "instruction:", "rules:", "rule:"):
        if value.lower().startswith(prefix):
            value = value[len(prefix):].strip()
    for approach in APPROACHES:  # a small model sometimes copies the approach it was given into its reply
        value = value.replace(approach, "")
    return value[:limit].strip()


_BULLETS = "-*• "

# the tracing's own words: turn and op ids, the evidence source, predictor names, "the answer op"; a reflection
# model copies them from the blame reasons, and they mean nothing to the task model reading the instruction
_TRACE_WORDS = re.compile(r"\bturn:\S+|\bD\d+:\d+\b|\bop:\d+|\bevidence: (?:gold|pseudo)\b|\b\w+\.predict\b|\bops?\b",
                          re.IGNORECASE)


def _without_trace_lines(text: str, instruction: str) -> str:
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


def _without_commentary(text: str, instruction: str) -> str:
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


def _unrepeated(text: str) -> str:
    """`text` without lines that repeat an earlier one (a small model sampling long replies loops on a line)."""
    seen: set[str] = set()
    kept = []
    for line in text.splitlines():
        key = _norm(line.lstrip(_BULLETS))
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept).strip()


def _with_rules(current: str, rules: str) -> str:
    """The current instruction with the rules appended; a reply that repeats the instruction first keeps
    only what follows it."""
    words, head = rules.split(), current.split()
    if len(words) > len(head) and [w.lower() for w in words[: len(head)]] == [w.lower() for w in head]:
        rules = " ".join(words[len(head):])
    known = _norm(current)  # lines the instruction already has, or repeated, add nothing
    new = _unrepeated("\n".join(line.strip() for line in rules.splitlines()
                                if _norm(line.lstrip(_BULLETS)) not in known))
    return f"{current.rstrip()}\n{new}" if new else current


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
    `drop_case_specific`, a reply that names a person, place or thing of the cases (a capitalized word of their
    questions and answers that the current instruction does not use) is dropped: a rule about the training
    conversations' people does not carry over to others. Lines that use the tracing's own words (turn or op ids,
    "evidence: gold", predictor names, "the answer op"), copied from the blame reasons, are dropped, and so are
    sentences in the reflection prompt's words ("this step", "the current instruction", "the rule broken", "the
    failed cases"): commentary on the rewrite, not instructions for the task model.

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
        names = _case_names(evidence)
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
                        rules = _without_commentary(_without_trace_lines(
                            _clean(getattr(reply, "rules", ""), self.max_chars), evidence.instruction),
                            evidence.instruction)
                        text = _with_rules(evidence.instruction, rules) if len(rules) >= self.min_rule_chars else ""
                    else:
                        reply = self.predict(step=step, current_instruction=evidence.instruction, failed_cases=failed,
                                             correct_cases=correct, mistake=mistake, approach=approach,
                                             config=config)
                        text = _without_commentary(_without_trace_lines(
                            _unrepeated(_clean(getattr(reply, "new_instruction", ""), self.max_chars)),
                            evidence.instruction), evidence.instruction)
            except Exception as error:  # noqa: BLE001 - a bad reply costs one candidate, not the round
                log.warning("proposal %d for %s failed: %s", attempt, evidence.predictor, error)
                continue
            if (len(text) < self.min_chars or _near(text, evidence.instruction)
                    or _adds_nothing(text, evidence.instruction) or any(_same(text, f) for f in found)):
                log.info("proposal %d for %s dropped (empty, unchanged, cut from the current one or a duplicate)",
                         attempt, evidence.predictor)
                continue
            if self.drop_case_specific and _case_specific(text, names):  # names are words the instruction lacks
                log.info("proposal %d for %s dropped (it names the cases' people or things)", attempt,
                         evidence.predictor)
                continue
            found.append(text)
        if self.pattern_rules:
            for text in pattern_candidates(evidence):
                if len(found) >= k:
                    break
                if not any(_same(text, f) for f in found):
                    found.append(text)
        return found


def pattern_candidates(evidence: ProposalEvidence) -> list[str]:
    """The current instruction with each found pattern's rule appended (most cases first), for the patterns
    whose rule the instruction does not have yet."""
    out = []
    for finding in evidence.findings:
        if _norm(finding.pattern.rule) not in _norm(evidence.instruction):
            out.append(_with_rules(evidence.instruction, finding.pattern.rule))
    return out


def proposal_origin(text: str, evidence_instruction: str) -> str:
    """Where a proposal came from: `pattern:NAME` for a pattern's rule appended to `evidence_instruction`,
    else `reflection` (the reflection LM wrote it)."""
    for pattern in PATTERNS:
        if _same(text, _with_rules(evidence_instruction, pattern.rule)):
            return f"pattern:{pattern.name}"
    return "reflection"


@dataclass(frozen=True)
class ReflectiveSource:
    """The proposer's instructions for the chosen predictor, at most `request.slots` of them, each with its origin
    (`proposal_origin`: a proposer may append a pattern's rule itself, as `ReflectiveProposer` does with
    `pattern_rules`)."""

    proposer: InstructionProposer

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        texts = self.proposer.propose(request.evidence, request.slots)
        return [Candidate.of(request.predictor, text, origin=proposal_origin(text, request.instruction))
                for text in texts]
