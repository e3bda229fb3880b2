"""`PatternSource`: the proposal slots the other sources left empty go to the rules of the mistakes the
diagnosis found in the blamed answers (`evaluation/diagnosis.py`), each appended to the current instruction: a
general rule the valset can accept where a small model's replies are all echoes, vague or about the cases'
people. The loop gives it the patterns learned from the training golds (`diagnosis.learned_patterns`), so a rule
asks for the format those golds use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.evidence import Pattern
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.reflective import (
    in_patterns,
    origin_patterns,
    pattern_candidates,
    proposal_origin,
)
from memtrace_opt.optimizers.sources.replies import same_text

__all__ = ["PatternSource"]


@dataclass(frozen=True)
class PatternSource:
    """Fills the round's instruction slots (`request.slots`) left after `taken`, one found pattern per slot
    (most cases first), skipping a rule an instruction taken already is. With `patterns` (those learned from the
    training golds, `diagnosis.learned_patterns`), the findings are taken in them: their rules, and only the
    patterns they hold (`reflective.in_patterns`)."""

    patterns: Sequence[Pattern] | None = None

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        evidence = in_patterns(request.evidence, self.patterns)
        known = origin_patterns(evidence)
        found = [c.instruction for c in taken if not c.sets_demos]
        out: list[Candidate] = []
        for text in pattern_candidates(evidence):
            if len(found) >= request.slots:
                break
            if not any(same_text(text, f) for f in found):
                found.append(text)
                out.append(Candidate.of(request.predictor, text,
                                        origin=proposal_origin(text, request.instruction, known)))
        return out
