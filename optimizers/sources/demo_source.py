"""`DemosSource`: one candidate per round that keeps the chosen predictor's instruction and gives it worked
examples from its own correct calls (`demos.py`), from the round's minibatch and from a pool of training cases
traced once, the first time a round needs them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.core.candidate import DEMOS, Candidate
from memtrace_opt.optimizers.core.knobs import knob
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.examples import CaseRef
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.optimizers.sources.demo_context import writes_answers
from memtrace_opt.optimizers.sources.demos import DEMO_BUDGET, DEMO_CHARS, predictor_demos

__all__ = ["DemoSettings", "DemosSource"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoSettings:
    """The demos knobs: `demos` > 0 adds the candidate, with up to that many demos, none longer than `demo_chars`
    characters and all of the predictor's demos within `demo_budget` together (None: no limit), drawn from the
    round's minibatch and from the first `demo_pool` training cases (in the seeded order); with
    `compact_demos`, a demo of the step that writes the answers shows only the lines of its long context around
    the answer (`demo_context.py`)."""

    demos: int = knob(2, "One candidate per round gives the blamed predictor up to N worked examples from its own "
                         "correct calls (default 2; 0: instructions only).")
    demo_pool: int = knob(24, "Draw demos from the correct answers to the first N training questions too, traced "
                              "once (default 24; 0: the round's minibatch only).")
    demo_budget: int | None = knob(DEMO_BUDGET, "Keep all of the blamed predictor's demos within N characters "
                                                "together (default 20000, about 5k tokens: an 8k context window "
                                                "keeps 3k for the call's own prompt; raise it for a model with a "
                                                "longer one).")
    compact_demos: bool = knob(True, "Show the answer step's demos only the lines of their context around the "
                                     "answer (default: on; --full-demos: the whole context, a transcript for "
                                     "long_context).", flag="--compact-demos/--full-demos")
    demo_chars: int = DEMO_CHARS

    def __post_init__(self) -> None:
        if self.demos < 0:
            raise ConfigError(f"optimizer: demos must be >= 0, got {self.demos}")
        if self.demo_pool < 0:
            raise ConfigError(f"optimizer: demo_pool must be >= 0, got {self.demo_pool}")
        if self.demo_budget is not None and self.demo_budget < 1:
            raise ConfigError(f"optimizer: demo_budget must be >= 1 (None: no limit), got {self.demo_budget}")


def offered_before(earlier: Sequence[Any], predictor: str) -> list[dict[str, Any]]:
    """The demos earlier rounds' plans offered `predictor`. Passed as `predictor_demos(exclude=...)`: those the
    program took it has, and any demo the predictor has is skipped anyway; the others were refused and are not
    offered again. Without this the calls ranked most like a round's blamed ones can come first again while the
    program is unchanged: in a 400-call long_context run round 4 spent its only demos candidate on a four-demo
    set an earlier round had been refused."""
    offered: list[dict[str, Any]] = []
    for plan in earlier:
        if plan.chosen_predictor != predictor:
            continue
        for candidate in plan.candidates:
            if candidate.origin == DEMOS:
                offered += [demo for demo in candidate.demo_list() or () if demo not in offered]
    return offered


@dataclass
class DemosSource:
    """The demos candidate (see the module docstring); `pool` is the training cases traced for demos, run by
    `evaluator` the first time they are needed and kept for later rounds: a call that served a correct answer
    is a worked example whichever round ran it. The write path replays from the memo; only the pool's own
    questions cost LM calls."""

    evaluator: CachedEvaluator
    settings: DemoSettings = field(default_factory=DemoSettings)
    pool: Sequence[CaseRef] = ()
    pool_results: list[EvalResult] = field(default_factory=list)
    spends: str = "task"  # the task LM answering the pool's questions: the round prices it before asking

    def _traced_pool(self, request: SourceRequest) -> list[EvalResult]:
        if self.pool and not self.pool_results:
            result = self.evaluator.evaluate(request.program, self.pool)
            log.info("demo pool: %d training cases traced, %d answered correctly (%d LM calls)", len(result.cases),
                     len(result.passed()), result.lm_calls)
            self.pool_results.append(result)
        return self.pool_results

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        if self.settings.demos < 1:
            return []
        sources = [request.minibatch, *self._traced_pool(request)]
        new = predictor_demos(request.program, request.predictor, sources, request.memo, demos=self.settings.demos,
                              demo_chars=self.settings.demo_chars, demo_budget=self.settings.demo_budget,
                              exclude=offered_before(request.earlier, request.predictor),
                              like=[case.shown for case in request.evidence.failures],
                              compact=self.settings.compact_demos and writes_answers(request.predictor, sources))
        if not new:
            return []
        demos = [*demos_of(request.program)[request.predictor], *new]
        return [Candidate.of(request.predictor, request.instruction, demos, DEMOS)]
