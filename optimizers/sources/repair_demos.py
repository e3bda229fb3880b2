"""`RepairDemosSource`: a candidate (with a local set to rank them: one per repair besides) that keeps the chosen predictor's instruction and gives it worked
examples made from the round's confirmed repairs (`evaluation/repairs.py`): the recorded inputs of a blamed call
with the output it should have produced. Unlike the demos of `demo_source.py`, these need no correctly answered
case: on a small model Mem0 gets too few training questions right to draw demos from, while every confirmed
repair is an example of exactly the call the predictor got wrong. Each demo is one window of turns
(`REPAIR_CHARS`), and all of the predictor's demos stay within `demo_budget`; the candidate records what the
demos add to every call of the predictor (`origin: "repair"`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from memtrace_opt.optimizers.core.candidate import REPAIR, Candidate
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.demo_source import DemoSettings
from memtrace_opt.optimizers.sources.demos import demo_size

__all__ = ["RepairDemosSource"]


@dataclass
class RepairDemosSource:
    """The repair-demos candidate (module docstring); proposes nothing in a round without confirmed repairs."""

    settings: DemoSettings = field(default_factory=DemoSettings)

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        if not request.repairs:
            return []
        signature = dict(request.program.named_predictors())[request.predictor].signature
        existing = demos_of(request.program)[request.predictor]
        room = math.inf if self.settings.demo_budget is None else self.settings.demo_budget - sum(map(demo_size, existing))
        new: list[dict[str, str]] = []
        for repair in request.repairs:
            demo = repair.demo(signature)
            if demo is None or demo in existing or demo in new or demo_size(demo) > room:
                continue
            new.append(demo)
            room -= demo_size(demo)
        if not new:
            return []
        together = [Candidate.of(request.predictor, request.instruction, [*existing, *new], REPAIR)]
        if request.local is None or len(new) < 2:
            return together
        # with a local objective to tell them apart, each repair is a candidate of its own too: one demo decided
        # a round before, and two tried went opposite ways
        return together + [Candidate.of(request.predictor, request.instruction, [*existing, demo], REPAIR)
                           for demo in new]
