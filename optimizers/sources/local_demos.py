"""`LocalDemosSource`: worked examples bootstrapped from the chosen predictor's local set: the recorded calls whose
seed reply carried every target (the information each call's questions needed), as BootstrapFewShot bootstraps
from traces that scored, but judged call by call rather than by a whole answer. Several candidates, each the
current instruction with more of them (`demos`, then twice as many), the calls carrying the most targets first,
within `demo_chars` a demo and `demo_budget` in all. The local objective scores each on the calls it was not
made from. Nothing without a local set (`--no-local-objective`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from memtrace_opt.optimizers.core.candidate import BOOTSTRAPPED, Candidate
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.demo_source import DemoSettings, offered_before
from memtrace_opt.optimizers.sources.demos import demo_from_exchange, demo_size

__all__ = ["LocalDemosSource"]


@dataclass
class LocalDemosSource:
    """Bootstrapped demos from the local set (module doc)."""

    settings: DemoSettings = field(default_factory=DemoSettings)

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        local = request.local
        if local is None or self.settings.demos < 1:
            return []
        signature = dict(request.program.named_predictors())[request.predictor].signature
        existing = demos_of(request.program)[request.predictor]
        refused = offered_before(request.earlier, request.predictor)
        carrying = sorted((c for c in local.calls if c.seed_carried and all(c.seed_carried)),
                          key=lambda c: -len(c.targets))
        pool = []
        for call in carrying:
            demo = demo_from_exchange(signature, call.prompt, call.response)
            if demo is None or demo in existing or demo in refused or demo in pool:
                continue
            if demo_size(demo) <= self.settings.demo_chars:
                pool.append(demo)
        room = math.inf if self.settings.demo_budget is None else self.settings.demo_budget - sum(map(demo_size, existing))
        out: list[Candidate] = []
        for size in dict.fromkeys((self.settings.demos, 2 * self.settings.demos)):
            chosen: list[dict[str, str]] = []
            left = room
            for demo in pool:
                if len(chosen) < size and demo_size(demo) <= left:
                    chosen.append(demo)
                    left -= demo_size(demo)
            if chosen and (not out or len(chosen) > len(out[-1].demos or ()) - len(existing)):
                out.append(Candidate.of(request.predictor, request.instruction, [*existing, *chosen], BOOTSTRAPPED))
        return out
